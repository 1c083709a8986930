"""Replay of a real Mac's recorded outputs (``mlx-fleet sim up --replay NODE=CAPTURE_DIR``).

The controller copies a capture (``mlx-fleet capture``: manifest.json plus one stdout file
per read) into ``/usr/local/libexec/macsim/replay/``. A tool called with exactly the argv of
a recorded read prints the recorded stdout (bytes as captured), the recorded stderr and exits
with the recorded status; any other call, and every write, is the normal double's.
"""

import os
import sys

from . import state

REPLAY_DIR = f"{state.LIBEXEC}/replay"


def lookup(tool: str, argv: list[str]):
    """(stdout bytes, stderr text, rc) recorded for ``tool argv``, or None."""
    directory = state.path(REPLAY_DIR)
    manifest = state.read_json(os.path.join(directory, "manifest.json"), None)
    if not manifest:
        return None
    wanted = [tool] + list(argv)
    for read in manifest.get("reads", {}).values():
        if read.get("argv") == wanted:
            with open(os.path.join(directory, read["file"]), "rb") as recorded:
                return recorded.read(), read.get("stderr", ""), int(read.get("rc", 0))
    return None


def serve(tool: str, argv: list[str]):
    """Print a recorded read and return its exit status; None when ``tool argv`` was not recorded."""
    hit = lookup(tool, argv)
    if hit is None:
        return None
    stdout, stderr, rc = hit
    sys.stdout.buffer.write(stdout)
    sys.stdout.flush()
    sys.stderr.write(stderr)
    return rc

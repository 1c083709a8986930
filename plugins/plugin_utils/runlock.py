"""One run at a time per output folder.

Two runs on the same cluster would read the same cluster model, assign addresses and write
hostfiles over each other. The lock is an ``fcntl.flock`` on ``run.lock`` in the output folder:
the CLI holds it for its whole run, and the action plugins that write outputs hold it while they
read the previous outputs and write the new ones. The kernel drops it when its holder exits, so
a killed run never leaves the folder locked. A second run waits a bounded time for it and then
refuses, naming the run that holds it.

Inside a CLI run, the action plugins run in ansible-playbook's processes, which cannot share the
CLI's lock; the CLI passes them its token (``MLX_FLEET_RUN_TOKEN``), and a plugin that finds the
lock held under its own token goes ahead.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import stat
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import UnsafeFolder, load_json, private_folder

LOCK_FILE = "run.lock"
TOKEN_ENV = "MLX_FLEET_RUN_TOKEN"
WAIT_ENV = "MLX_FLEET_LOCK_WAIT"  # seconds a second run waits before it refuses
DEFAULT_WAIT = 30.0
POLL = 0.2


class LockBusy(Exception):
    """Another run holds the folder; the message is one line naming it."""


def new_token() -> str:
    return uuid.uuid4().hex


def wait_seconds() -> float:
    try:
        wait = float(os.environ.get(WAIT_ENV, DEFAULT_WAIT))
    except ValueError:
        return DEFAULT_WAIT
    return max(0.0, wait) if math.isfinite(wait) else DEFAULT_WAIT  # nan or inf would never time out


def _holder(fd: int) -> dict:
    try:
        data = load_json(os.pread(fd, 4096, 0))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "another run (it has not said which yet)"
    return f"{holder.get('what') or 'another run'} (pid {holder['pid']}, started {holder.get('started', '?')})"


@contextmanager
def run_lock(directory: str | Path, what: str, *, token: str | None = None,
             wait: float | None = None) -> Iterator[dict]:
    """Hold the run lock of ``directory`` (created if needed) while the block runs.

    what: how the holder is named to a run that has to wait (``mlx-fleet hostfile``); token: given
    by the CLI and passed to its playbooks, so its own plugins go ahead. Waits up to ``wait``
    seconds (``MLX_FLEET_LOCK_WAIT``, 30 by default), then raises LockBusy.
    """
    directory = private_folder(directory)  # UnsafeFolder (a ValueError) when another account could use it
    path = directory / LOCK_FILE
    wait = wait_seconds() if wait is None else wait
    # Never through a symlink (it would truncate what it points to), and only a plain file.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise UnsafeFolder(f"{path} cannot be opened as the run lock ({exc.strerror}): a symlink or another "
                           "kind of file is there; remove it and run again") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFolder(f"{path} is not a plain file: remove it and run again")
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                if holder.get("token") and holder["token"] == os.environ.get(TOKEN_ENV):
                    break  # our own CLI run holds it for us
                if time.monotonic() >= deadline:
                    raise LockBusy(f"{directory} is in use by {describe(holder)}; waited {wait:g} s: let that "
                                   "run finish (or stop it) and run again") from None
                time.sleep(POLL)
            else:
                holder = {"pid": os.getpid(), "what": what, "token": token or "",
                          "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}
                os.ftruncate(fd, 0)
                os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
                break
        yield holder
    finally:
        os.close(fd)  # releases the lock

"""`mlx-fleet capture HOST --out DIR`: record what the toolkit reads from a real Mac.

Runs every command of the collection's READS registry (plugins/module_utils/macos_commands.py)
on HOST over plain ``ssh`` (the user's ssh config applies; host-key checking stays as
configured) and stores, per read, its stdout byte for byte in ``DIR/<capture_name>`` and
its argv, exit status and stderr in ``DIR/manifest.json``. Nothing that changes the Mac is
ever run: only READS, and each argv is checked against the forms that write before it
leaves. ``mlx-fleet sim up --replay NODE=DIR`` turns such a folder into a simulated Mac.
"""

from __future__ import annotations

import datetime
import shlex
import subprocess
import tempfile
from pathlib import Path

from mlx_fleet import __version__
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder, atomic_write_json, private_folder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ssh_target import SshTarget

MANIFEST = "manifest.json"
FORMAT = "mlx-fleet-capture/1"
CONNECT_TIMEOUT = 10  # seconds ssh waits for the Mac to answer
LOGIN_TIMEOUT = 300  # the first connection, a password or passphrase typed included
READ_TIMEOUT = 300  # one read (system_profiler takes seconds on a Mac, never minutes)

# Words that would make a macOS tool change something; a read carrying one is refused.
_WRITE_WORDS = {"enable", "disable", "bootstrap", "bootout", "load", "unload", "kickstart", "kill",
                "--set", "-w", "set", "add", "delete", "change"}
_WRITE_PREFIXES = ("-set", "-create", "-remove", "-delete", "-add", "-switch", "-enable", "-disable")


class CaptureError(Exception):
    """The capture could not be made; the message is for the user."""


def reads() -> dict[str, tuple[str, ...]]:
    return dict(macos_commands.READS)


def capture_name(name: str) -> str:
    return macos_commands.capture_name(name)


def check_read_only(argv) -> None:
    """Refuse an argv that looks like it changes the Mac (a guard on the READS registry)."""
    for word in argv[1:]:
        if "=" in word or word in _WRITE_WORDS or word.startswith(_WRITE_PREFIXES):
            raise CaptureError(f"refusing to run {shlex.join(argv)!r} on a user's Mac: it is not a read")


def remote_command(argv) -> str:
    """The one string the remote login shell sees: every word quoted, C locale as the modules use."""
    return shlex.join(["env", "LC_ALL=C", *argv])


def capture(host: str, out_dir: str | Path, *, ssh: str = "ssh") -> dict:
    """Record every READS output of HOST into OUT_DIR; returns the manifest."""
    if not host or host.startswith("-"):
        raise CaptureError(f"not a host name: {host!r}")
    registry = reads()
    for argv in registry.values():
        check_read_only(argv)
    try:  # a folder another account can write could get links planted in it, written through
        out = private_folder(out_dir)
    except UnsafeFolder as exc:
        raise CaptureError(f"--out {exc}") from None
    if any(out.iterdir()):
        raise CaptureError(f"{out} is not empty; give a new folder for the capture")
    manifest = {
        "format": FORMAT,
        "host": host,
        "captured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mlx_fleet_version": __version__,
        "reads": {},
    }
    target = SshTarget(host, host)  # plain ssh: the user's ssh config alone says how to reach it
    with tempfile.TemporaryDirectory(prefix="mlx-fleet-capture-") as tmp:
        # One authenticated connection (a password or passphrase is asked once) for all reads.
        control = ["-o", f"ControlPath={tmp}/c", "-o", "LogLevel=ERROR", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}"]
        with open(Path(tmp) / "master.log", "w+") as log:
            try:
                master = subprocess.run(target.argv(*control, "-o", "ControlMaster=yes", "-o", "ControlPersist=yes",
                                                    "-f", "-N", ssh=ssh), stdout=subprocess.DEVNULL, stderr=log,
                                        timeout=LOGIN_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise CaptureError(f"ssh {host}: no connection within {LOGIN_TIMEOUT} s") from None
            log.seek(0)
            if master.returncode != 0:
                raise CaptureError(f"ssh {host} failed (exit {master.returncode}): {log.read().strip()}")
        try:
            for name, argv in registry.items():
                try:
                    result = subprocess.run(target.argv(*control, "-o", "ControlMaster=no", "-n",
                                                        command=remote_command(argv), ssh=ssh),
                                            capture_output=True, timeout=READ_TIMEOUT)
                except subprocess.TimeoutExpired:
                    raise CaptureError(f"{host}: {shlex.join(argv)!r} gave no answer within {READ_TIMEOUT} s; "
                                       "nothing was kept: run the capture again") from None
                if result.returncode == 255:
                    raise CaptureError(f"ssh {host} failed during {shlex.join(argv)!r}: "
                                       f"{result.stderr.decode(errors='replace').strip()}")
                file = capture_name(name)
                (out / file).write_bytes(result.stdout)
                manifest["reads"][name] = {
                    "argv": list(argv), "file": file, "rc": result.returncode,
                    "stderr": result.stderr.decode("utf-8", errors="replace"),
                }
        finally:
            try:
                subprocess.run(target.argv(*control, "-O", "exit", ssh=ssh), capture_output=True, timeout=CONNECT_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass  # the master ends with its folder, which goes now
    atomic_write_json(out / MANIFEST, manifest)
    return manifest

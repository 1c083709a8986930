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

import json
import math
import os
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.locks import LockTimeout, lock_within, open_lock_file
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder, load_json, private_folder

LOCK_FILE = "run.lock"
TOKEN_ENV = "MLX_FLEET_RUN_TOKEN"
WAIT_ENV = "MLX_FLEET_LOCK_WAIT"  # seconds a second run waits before it refuses
DEFAULT_WAIT = 30.0
POLL = 0.2


class LockBusy(Exception):
    """Another run holds the folder; the message is one line naming it. ``holder``: its pid, what it is and when it
    started (no token), as its lock file says; ``waited``: the seconds this run waited."""

    def __init__(self, message: str, holder: dict, waited: float):
        super().__init__(message)
        self.holder = {key: holder[key] for key in ("pid", "what", "started") if key in holder}
        self.waited = waited


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
    try:
        fd = open_lock_file(path)
    except OSError as exc:
        raise UnsafeFolder(f"{path} cannot be opened as the run lock ({exc.strerror}): a symlink or another "
                           "kind of file is there; remove it and run again") from None
    holder: dict = {}

    def ours() -> bool:  # our own CLI run holds it for us
        nonlocal holder
        holder = _holder(fd)
        return bool(holder.get("token")) and holder["token"] == os.environ.get(TOKEN_ENV)

    try:
        try:
            taken = lock_within(fd, wait, POLL, ours, clock=time)
        except LockTimeout:
            raise LockBusy(f"{directory} is in use by {describe(holder)}; waited {wait:g} s: let that "
                           "run finish (or stop it) and run again", holder, wait) from None
        if taken:
            holder = {"pid": os.getpid(), "what": what, "token": token or "",
                      "started": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(holder) + "\n").encode(), 0)
        yield holder
    finally:
        os.close(fd)  # releases the lock

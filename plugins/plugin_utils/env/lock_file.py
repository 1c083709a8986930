"""The environment's lock file (`mlx_env_lock_file`, beside the inventory): its format, reading and
writing it, and the file names it may give.

`mlx-fleet lock` (env_lock_resolve.py) records, for every pinned package, the wheels for the declared
platforms with their URL and sha256, the uv wheels, and the uv-managed CPython build of each platform
with the sha256 uv itself checks. How the controller turns the lock into per-node downloads lives in
envplan.py. "Lock" here is always this file; the run lock (one run per output folder) is runlock.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text, load_json

LOCK_FORMAT = 1
# Where uv's download metadata says the CPython builds are; mlx_env_python_mirror replaces
# this prefix (as UV_PYTHON_INSTALL_MIRROR does for uv).
PYTHON_BUILD_BASE = "https://github.com/astral-sh/python-build-standalone/releases/download"


# A file name the lock gives that becomes a path component (the controller's cache, a bundle member, a
# folder of the Macs' store): a plain name, never "..", a "/" or a leading dot.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def load_lock(path: str | os.PathLike) -> tuple[dict, str]:
    """The lock and its sha256 (of the file's bytes: the lock hash in fingerprints)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise EnvLockError(f"cannot read the lock file {path}: {exc.strerror}", relock=True) from None
    try:
        lock = load_json(data.decode("utf-8"))
    except ValueError as exc:
        raise EnvLockError(f"{path} is not a mlx-fleet lock file ({exc})", relock=True) from None
    if not isinstance(lock, dict) or lock.get("format") != LOCK_FORMAT:
        raise EnvLockError(f"{path} is not a mlx-fleet lock file of format {LOCK_FORMAT}", relock=True)
    check_names(lock, str(path))
    return lock, hashlib.sha256(data).hexdigest()


def plain_name(text, what: str) -> str:
    """text if it is a plain file name (_PLAIN_NAME), else EnvLockError naming what it is."""
    if not isinstance(text, str) or not _PLAIN_NAME.fullmatch(text):
        raise EnvLockError(f"{what} {text!r} is not a plain file name (it becomes a path on the controller and the "
                           "Macs)", relock=True)
    return text


def check_names(lock: dict, where: str) -> None:
    """Every wheel and Python build file name, and every build key, in the lock is a plain_name."""
    def items(value) -> list:
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    uv = lock.get("uv") if isinstance(lock.get("uv"), dict) else {}
    wheels = [f for pkg in items(lock.get("packages")) for f in items(pkg.get("files"))] + items(uv.get("files"))
    for wheel in wheels:
        plain_name(wheel.get("filename"), f"{where}: the wheel file name")
    for build in items(lock.get("python_builds")):
        plain_name(build.get("filename"), f"{where}: the Python build file name")
        plain_name(build.get("key"), f"{where}: the Python build key")


def lock_text(lock: dict) -> str:
    """The lock as its file holds it. Not files.json_text's style: the file's bytes are the lock hash every Mac's
    fingerprint records, so another layout would make every converged Mac differ from an unchanged lock."""
    return json.dumps(lock, indent=1, sort_keys=False) + "\n"


def write_lock(lock: dict, path: str | os.PathLike) -> str:
    """Write the lock atomically (a reader, or a run reading it meanwhile, sees the old lock or the new
    one, never part of it); its sha256. A symlinked lock stays one: the file it names is rewritten (a lock kept
    in a dotfiles repository, shared between inventories), as the inventory editor does."""
    check_names(lock, "the new lock")
    text = lock_text(lock)
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    return hashlib.sha256(text.encode()).hexdigest()

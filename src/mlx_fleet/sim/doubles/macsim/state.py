"""Where a simulated Mac keeps its state, and how the doubles read and write it.

Three stores, as on a Mac:
- node.json: hardware and NVRAM, written by the sim controller (root-owned);
- preferences under /Library/Preferences/SystemConfiguration/: what configd,
  networksetup, scutil and pmset persist (survives a reboot);
- the run directory: kernel runtime state (sysctl -w, launchd jobs), wiped by the
  controller on a simulated reboot.
``MACSIM_ROOT`` prefixes every path so tests can run the doubles against a directory.
"""

import json
import os
import sys
from pathlib import Path

LIBEXEC = "usr/local/libexec/macsim"
PREFS_DIR = "Library/Preferences/SystemConfiguration"
LAUNCH_DAEMONS = "Library/LaunchDaemons"


class Fail(Exception):
    """A tool's failure: ``message`` goes to stderr (if any) and the tool exits ``code``."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.message = message
        self.code = code


def root() -> Path:
    return Path(os.environ.get("MACSIM_ROOT", "/"))


def path(rel: str) -> Path:
    return root() / rel


def is_root() -> bool:
    return os.geteuid() == 0


def read_json(p: Path, default):
    try:
        with open(p) as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def write_json(p: Path, data) -> None:
    """Atomically replace ``p`` so a concurrent reader never sees half a file."""
    import tempfile  # here: most calls only read, and a tool's start is what a converge waits on

    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix="." + p.name)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, p)


def node_path() -> Path:
    return path(f"{LIBEXEC}/node.json")


def node() -> dict:
    data = read_json(node_path(), None)
    if data is None:
        raise Fail(f"macsim: {node_path()} is missing", 70)
    return data


def prefs(name: str, default):
    return read_json(path(f"{PREFS_DIR}/{name}.json"), default)


def save_prefs(name: str, data) -> None:
    write_json(path(f"{PREFS_DIR}/{name}.json"), data)


def runtime(name: str, default):
    return read_json(path(f"{LIBEXEC}/run/{name}.json"), default)


def save_runtime(name: str, data) -> None:
    write_json(path(f"{LIBEXEC}/run/{name}.json"), data)


def out(text: str) -> None:
    sys.stdout.write(text)


def err(text: str) -> None:
    sys.stderr.write(text)


def by_device(device: str) -> dict | None:
    """node.json's hardware port entry for a BSD device name."""
    return next((i for i in node()["interfaces"] if i["device"] == device), None)


def thunderbolt_devices() -> list[str]:
    return [tb["device"] for tb in node()["thunderbolt"]]

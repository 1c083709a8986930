"""Where a simulated Mac keeps its state, and how the doubles read and write it.

Three stores, as on a Mac:
- node.json: hardware and NVRAM, written by the sim controller (root-owned);
- preferences under /Library/Preferences/SystemConfiguration/: what configd,
  networksetup, scutil and pmset persist (survives a reboot);
- the run directory: kernel runtime state (sysctl -w, launchd jobs), wiped by the
  controller on a simulated reboot.
``MACSIM_ROOT`` prefixes every path so tests can run the doubles against a directory.

A double starts for every read a converge or a probe makes, as a Mac's native tool does in a few
milliseconds; so the reads import neither json nor pathlib nor subprocess (together about 12 ms of a
double's 22 on a 2-core machine, their regular expressions compiled at each start): paths are strings,
JSON is read with the C scanner json.loads itself runs on, and processes are spawned with os.
"""

import os
import sys

LIBEXEC = "usr/local/libexec/macsim"
PREFS_DIR = "Library/Preferences/SystemConfiguration"
LAUNCH_DAEMONS = "Library/LaunchDaemons"


class Fail(Exception):
    """A tool's failure: ``message`` goes to stderr (if any) and the tool exits ``code``."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.message = message
        self.code = code


def root() -> str:
    return os.environ.get("MACSIM_ROOT", "/")


def path(rel: str) -> str:
    return os.path.join(root(), rel)


def is_root() -> bool:
    return os.geteuid() == 0


class _Decoding:
    """What json.JSONDecoder gives its C scanner: plain floats and ints, NaN and Infinity as floats."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int
    parse_constant = staticmethod(float)


def loads(text: str):
    """json.loads(TEXT) without importing json (see above); ValueError for anything but one JSON value."""
    import _json

    text = text.strip()
    try:
        value, end = _json.make_scanner(_Decoding)(text, 0)
    except StopIteration:
        raise ValueError(f"not JSON: {text[:40]!r}") from None
    if end != len(text):
        raise ValueError(f"not JSON: extra data at {end}")
    return value


def read_json(p: str, default):
    try:
        with open(p) as f:
            return loads(f.read())
    except FileNotFoundError:
        return default


def write_json(p: str, data) -> None:
    """Atomically replace ``p`` so a concurrent reader never sees half a file."""
    import json  # here, as tempfile: most calls only read (see above)
    import tempfile

    folder = os.path.dirname(p)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(p))
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, p)


def node_path() -> str:
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


def cores(node: dict) -> tuple[str, ...]:
    """node.json's core count as its numbers: '14 (10 performance and 4 efficiency)' -> ('14', '10', '4')."""
    return tuple("".join(c if c.isdecimal() else " " for c in node["cpu_cores"]).split())


def by_device(device: str) -> dict | None:
    """node.json's hardware port entry for a BSD device name."""
    return next((i for i in node()["interfaces"] if i["device"] == device), None)


def thunderbolt_devices() -> list[str]:
    return [tb["device"] for tb in node()["thunderbolt"]]

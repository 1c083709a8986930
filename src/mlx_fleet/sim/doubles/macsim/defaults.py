"""defaults(1) read/write of a preference file given by its path (``/Library/Preferences/com.apple.SoftwareUpdate``),
stored as a binary plist beside it (``DOMAIN.plist``), as cfprefsd keeps it.

A boolean reads as ``1`` or ``0``; a key that is not set: "The domain/default pair of (DOMAIN, KEY) does not
exist" on stderr and exit status 1 (tests/fixtures/macos/defaults-read-missing__*). Domains by bundle id
(a user's ~/Library/Preferences) are not simulated."""

import os
import plistlib

from . import state
from .state import Fail, out

_TYPES = {"-bool": "bool", "-boolean": "bool", "-int": "int", "-integer": "int", "-string": "string"}


def _file(domain: str):
    if not domain.startswith("/"):
        raise Fail(f"defaults: only a preference file's path is simulated, not {domain!r}\n", 1)
    return state.path(domain.lstrip("/") + ".plist")


def _load(path) -> dict:
    try:
        with open(path, "rb") as handle:
            return plistlib.load(handle)
    except FileNotFoundError:
        return {}


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "read":
        value = _load(_file(argv[1])).get(argv[2])
        if value is None:
            raise Fail(f"The domain/default pair of ({argv[1]}, {argv[2]}) does not exist\n", 1)
        out(("1" if value else "0") + "\n" if isinstance(value, bool) else f"{value}\n")
        return 0
    if len(argv) == 5 and argv[0] == "write" and argv[3] in _TYPES:
        path = _file(argv[1])
        if not state.is_root() and path.startswith(state.path("Library")):  # wording assumed
            raise Fail(f"Could not write domain {argv[1]}; exiting\n", 1)
        kind, raw = _TYPES[argv[3]], argv[4]
        if kind == "bool" and raw.lower() not in ("true", "false", "yes", "no", "1", "0"):
            raise Fail(f"defaults: {raw!r} is not a boolean\n", 1)
        value = raw.lower() in ("true", "yes", "1") if kind == "bool" else int(raw) if kind == "int" else raw
        data = _load(path)
        data[argv[2]] = value
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            plistlib.dump(data, handle, fmt=plistlib.FMT_BINARY)
        return 0
    raise Fail("defaults: only 'read DOMAIN KEY' and 'write DOMAIN KEY -bool|-int|-string VALUE' are simulated\n", 1)

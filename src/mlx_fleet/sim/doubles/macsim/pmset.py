"""pmset(1): -g / -g custom and persistent settings (root only).

Settings persist in com.apple.PowerManagement.json per power source, as macOS keeps
them in com.apple.PowerManagement.plist. The refusal text is pmset(1)'s.
"""

from . import state
from .state import Fail, out

# Order and defaults of a desktop Mac's 'pmset -g custom' (AC Power only).
DEFAULTS = {
    "Sleep On Power Button": 1,
    "autorestart": 0,
    "powernap": 1,
    "networkoversleep": 0,
    "disksleep": 10,
    "sleep": 1,
    "ttyskeepawake": 1,
    "displaysleep": 10,
    "tcpkeepalive": 1,
    "powermode": 0,
    "womp": 1,
    "standby": 0,
}
SOURCES = {"-a": ["AC Power", "Battery Power"], "-c": ["AC Power"], "-b": ["Battery Power"]}


def _sources() -> list[str]:
    # Only a MacBook has a battery; its 'pmset -g custom' lists Battery Power first.
    return ["Battery Power", "AC Power"] if state.node()["model"].startswith("macbook") else ["AC Power"]


def settings() -> dict[str, dict]:
    stored = state.prefs("com.apple.PowerManagement", {})
    return {src: {**DEFAULTS, **stored.get(src, {})} for src in _sources()}


def _lines(values: dict) -> str:
    return "".join(f" {key:<20} {value}\n" for key, value in values.items())


def main(argv: list[str]) -> int:
    if argv in (["-g"], ["-g", "live"]):
        out("System-wide power settings:\nCurrently in use:\n" + _lines(settings()["AC Power"]))
        return 0
    if argv == ["-g", "custom"]:
        out("".join(f"{src}:\n{_lines(values)}" for src, values in settings().items()))
        return 0
    if not argv or argv[0] not in SOURCES or len(argv) < 3 or len(argv) % 2 == 0:
        raise Fail("Usage: pmset <options>\n", 1)
    if not state.is_root():
        raise Fail("pmset must be run as root in order to modify any settings\n", 1)
    pairs = dict(zip(argv[1::2], argv[2::2]))
    for key, value in pairs.items():
        if key not in DEFAULTS or not value.isdigit():
            raise Fail(f"Usage: pmset <options>\n", 1)
    stored = state.prefs("com.apple.PowerManagement", {})
    for src in SOURCES[argv[0]]:
        if src in _sources():
            stored.setdefault(src, {}).update({k: int(v) for k, v in pairs.items()})
    state.save_prefs("com.apple.PowerManagement", stored)
    return 0

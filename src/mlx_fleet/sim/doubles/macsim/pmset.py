"""pmset(1): -g / -g custom and persistent settings (root only).

Settings persist in com.apple.PowerManagement.json per power source, as macOS keeps
them in com.apple.PowerManagement.plist. The refusal text is pmset(1)'s.
"""

from . import state
from .state import Fail, out

# Key order of 'pmset -g custom' and of 'pmset -g' ("Currently in use"), from captures of
# an M1 MacBook Pro on macOS 26.2 (tests/fixtures/macos/pmset-*amostras*); autorestart,
# which only desktops have, is placed after womp.
CUSTOM_ORDER = ["Sleep On Power Button", "lowpowermode", "standby", "ttyskeepawake", "hibernatemode",
                "powernap", "hibernatefile", "displaysleep", "womp", "autorestart", "networkoversleep",
                "sleep", "lessbright", "tcpkeepalive", "disksleep"]
LIVE_ORDER = ["standby", "Sleep On Power Button", "hibernatefile", "powernap", "networkoversleep",
              "disksleep", "sleep", "hibernatemode", "ttyskeepawake", "displaysleep", "tcpkeepalive",
              "lowpowermode", "womp", "autorestart"]
COMMON = {"Sleep On Power Button": 1, "lowpowermode": 0, "ttyskeepawake": 1, "powernap": 1,
          "hibernatefile": "/var/vm/sleepimage", "displaysleep": 10, "networkoversleep": 0, "sleep": 1,
          "tcpkeepalive": 1, "disksleep": 10}
DESKTOP_AC = {**COMMON, "standby": 0, "hibernatemode": 0, "womp": 1, "autorestart": 0}
LAPTOP = {
    "Battery Power": {**COMMON, "standby": 1, "hibernatemode": 3, "womp": 0, "lessbright": 1, "displaysleep": 2},
    "AC Power": {**COMMON, "standby": 1, "hibernatemode": 3, "womp": 1},
}
SOURCES = {"-a": ["AC Power", "Battery Power"], "-c": ["AC Power"], "-b": ["Battery Power"]}


def _defaults() -> dict[str, dict]:
    # Only a MacBook has a battery; its 'pmset -g custom' lists Battery Power first.
    return LAPTOP if state.node()["model"].startswith("macbook") else {"AC Power": DESKTOP_AC}


def settings() -> dict[str, dict]:
    stored = state.prefs("com.apple.PowerManagement", {})
    return {src: {**values, **stored.get(src, {})} for src, values in _defaults().items()}


def _lines(values: dict, order: list[str]) -> str:
    keys = sorted(values, key=lambda k: order.index(k) if k in order else len(order))
    return "".join(f" {key:<20} {values[key]}\n" for key in keys)


def main(argv: list[str]) -> int:
    if argv in (["-g"], ["-g", "live"]):
        out("System-wide power settings:\nCurrently in use:\n" + _lines(settings()["AC Power"], LIVE_ORDER))
        return 0
    if argv == ["-g", "custom"]:
        out("".join(f"{src}:\n{_lines(values, CUSTOM_ORDER)}" for src, values in settings().items()))
        return 0
    if not argv or argv[0] not in SOURCES or len(argv) < 3 or len(argv) % 2 == 0:
        raise Fail("Usage: pmset <options>\n", 1)
    if not state.is_root():
        raise Fail("pmset must be run as root in order to modify any settings\n", 1)
    pairs = dict(zip(argv[1::2], argv[2::2]))
    if any(key not in CUSTOM_ORDER or not value.isdigit() for key, value in pairs.items()):
        raise Fail("Usage: pmset <options>\n", 1)
    stored = state.prefs("com.apple.PowerManagement", {})
    for src in SOURCES[argv[0]]:
        if src in _defaults():
            stored.setdefault(src, {}).update({k: int(v) for k, v in pairs.items()})
    state.save_prefs("com.apple.PowerManagement", stored)
    return 0

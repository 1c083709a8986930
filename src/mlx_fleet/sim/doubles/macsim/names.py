"""The computer's names as configd keeps them (preferences.json "System"), shared by scutil,
hostname and sysctl. A fresh node is named after itself: ComputerName and LocalHostName
are the node's name, HostName is not set (as on a Mac nobody gave a HostName)."""

from . import state

KEYS = ("ComputerName", "LocalHostName", "HostName")


def get(key: str) -> str | None:
    names = state.prefs("preferences", {}).get("System", {})
    if key in names:
        return names[key]
    return None if key == "HostName" else state.node()["name"]


def store(key: str, value: str) -> None:
    prefs = state.prefs("preferences", {})
    prefs.setdefault("System", {})[key] = value
    state.save_prefs("preferences", prefs)


def kernel_hostname() -> str:
    """What `hostname` and kern.hostname show: HostName, else LocalHostName.local."""
    return get("HostName") or f"{get('LocalHostName')}.local"

"""softwareupdate(8): --list and --install of the updates `mlx-fleet sim offer` put in node.json.

Formats (tests/fixtures/macos/softwareupdate-*): the list is `* Label: NAME-BUILD` then a
tab-indented `Title: ..., Version: ..., Size: ...KiB, Recommended: YES, Action: restart, ` line;
with nothing pending, "No new software available." on stderr and exit status 1 (stdout empty, as
Ansible captured it: the "Software Update Tool" header lines are a terminal's, left out here).
`--install` prints "Downloading TITLE" / "Downloaded: TITLE" (a real Mac's words), then
"Restarting..." (the issue's report) and returns, while a detached preparation takes
node.json's `update_prepare_seconds` and then asks the machine to restart into the new build
(`power-request.json`, which the sim's power agent on the host acts on).
On Apple silicon even root needs a volume owner's credentials: `--user OWNER --stdinpass` with the
password on stdin; without them, or with a wrong password, "failed to authorize for installation".
Each install that starts preparing adds one to the count in INSTALLS (a Mac installs an update once).
"""

import os
import sys
import time

from . import state
from .state import Fail, err, out

POWER_REQUEST = f"{state.LIBEXEC}/power-request.json"
INSTALLS = f"{state.LIBEXEC}/softwareupdate-installs.json"  # how many installs started: a test's count
NOT_AUTHORIZED = "failed to authorize for installation\n"


def _list(updates: list[dict]) -> int:
    if not updates:
        err("No new software available.\n")
        return 1
    text = "Software Update found the following new or updated software:\n"
    for u in updates:
        text += (f"* Label: {u['label']}\n\tTitle: {u['title']}, Version: {u['version']}, Size: {u['size_kib']}KiB, "
                 f"Recommended: YES, Action: {u.get('action', 'restart')}, \n")
    out(text)
    return 0


def _password_ok(user: str, password: str) -> bool:
    """The account's password, checked against the shadow hash as the Mac's authorization does."""
    import ctypes  # here, as json and subprocess below: `softwareupdate --list` is a read (state.py)
    import ctypes.util

    try:
        with open("/etc/shadow") as handle:
            entry = next((line.split(":") for line in handle if line.split(":")[0] == user), None)
    except OSError:
        return False
    if not entry or not entry[1] or entry[1][0] in "!*":
        return False
    libcrypt = ctypes.CDLL(ctypes.util.find_library("crypt"))
    libcrypt.crypt.restype = ctypes.c_char_p
    hashed = libcrypt.crypt(password.encode(), entry[1].encode())
    return hashed is not None and hashed.decode() == entry[1]


def _install(argv: list[str]) -> int:
    node = state.node()
    labels, user, stdinpass, i = [], None, False, 0
    while i < len(argv):
        word = argv[i]
        if word == "--user":
            user = argv[i + 1] if i + 1 < len(argv) else None
            i += 1
        elif word == "--stdinpass":
            stdinpass = True
        elif word in ("--agree-to-license", "--restart", "--no-scan", "--force"):
            pass
        elif word.startswith("-"):
            raise Fail(f"softwareupdate: unrecognized option '{word}'\n", 1)
        else:
            labels.append(word)
        i += 1
    if not state.is_root():
        raise Fail("softwareupdate: must be run as root to install updates\n", 1)
    out("Software Update Tool\n\nFinding available software\n")
    sys.stdout.flush()
    password = sys.stdin.readline().rstrip("\n") if stdinpass else None
    owners = node.get("volume_owners", ["admin"])
    if not user or password is None or user not in owners or not _password_ok(user, password):
        raise Fail(NOT_AUTHORIZED, 1)
    offered = {u["label"]: u for u in node.get("software_updates", [])}
    missing = [label for label in labels if label not in offered]
    if not labels or missing:
        raise Fail("No such update: " + ", ".join(missing or ["(none given)"]) + "\n", 1)
    if node.get("update_fault") == "no-prepare":
        return 0  # the preparation never starts: nothing downloads, nothing restarts
    update = offered[labels[-1]]
    state.write_json(state.path(INSTALLS), state.read_json(state.path(INSTALLS), 0) + 1)
    out(f"Downloading {update['title']}\nDownloaded: {update['title']}\n")
    sys.stdout.flush()
    # The system goes on preparing after the command returns; the detached child outlives it.
    import json
    import subprocess

    subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                   "dispatch.py"), "_prepare_update", json.dumps(update)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)
    out("Restarting...\n")
    return 0


def prepare(update_json: str) -> int:
    """The preparation: a while, then the machine restarts into the new build (the host acts on it)."""
    time.sleep(float(state.node().get("update_prepare_seconds", 5)))
    state.write_json(state.path(POWER_REQUEST), {"install": state.loads(update_json)})
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-l", "--list"):
        return _list(state.node().get("software_updates", []))
    if argv and argv[0] in ("-i", "--install"):
        return _install(argv[1:])
    raise Fail("softwareupdate: only --list and --install are simulated\n", 1)

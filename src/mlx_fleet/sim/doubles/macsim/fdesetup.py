"""fdesetup(8): `status` as macOS prints it ("FileVault is On." / "FileVault is Off.", the wording public
status checkers compare against), from node.json's "filevault"; turning it on or off is a person's job at
the Mac (it asks for a user's password), so the double refuses every other verb."""

from . import state
from .state import Fail, out


def main(argv: list[str]) -> int:
    if argv != ["status"]:
        raise Fail("fdesetup: only 'fdesetup status' is simulated\n", 64)
    out("FileVault is On.\n" if state.node().get("filevault") else "FileVault is Off.\n")
    return 0

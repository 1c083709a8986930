"""systemsetup(8) -getremotelogin. Without root it prints its refusal on stdout and
exits 0 (observed on real Macs and noted by several public tools)."""

from . import state
from .state import Fail, out


def main(argv: list[str]) -> int:
    if argv != ["-getremotelogin"]:
        raise Fail("systemsetup: only -getremotelogin is simulated\n", 1)
    if not state.is_root():
        out("You need administrator access to run this tool... exiting!\n")
        return 0
    out("Remote Login: On\n")  # sshd is the node's first process: it is always on
    return 0

"""xcode-select(1) -p: the Command Line Tools path, or xcode-select's error (exit 2)."""

from . import state
from .state import Fail, out

NOT_INSTALLED = (
    "xcode-select: error: unable to get active developer directory. Use `sudo xcode-select --switch "
    "path/to/Xcode.app` to specify the Xcode that you wish to use for command line developer tools, or use "
    "`xcode-select --install` to install the standalone command line developer tools.  "
    "See `man xcode-select` for more details.\n"
)


def main(argv: list[str]) -> int:
    if argv not in (["-p"], ["--print-path"]):
        raise Fail("xcode-select: error: only -p is simulated\n", 1)
    if not state.node().get("clt_installed", True):
        raise Fail(NOT_INSTALLED, 2)
    out("/Library/Developer/CommandLineTools\n")
    return 0

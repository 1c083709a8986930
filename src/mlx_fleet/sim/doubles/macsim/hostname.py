"""hostname(1): the kernel host name configd derives from the computer's names."""

from . import names
from .state import Fail, out


def main(argv: list[str]) -> int:
    if argv == ["-s"]:
        out(names.kernel_hostname().split(".")[0] + "\n")
    elif argv:
        raise Fail("hostname: setting the name is not simulated; use scutil --set HostName\n", 1)
    else:
        out(names.kernel_hostname() + "\n")
    return 0

"""scutil(8) --get/--set ComputerName|LocalHostName|HostName.

'HostName: not set' and the super-user message per scutil's documented behaviour
(a public audit table quoting it); the other scutil modes are not simulated.
"""

from . import names, state
from .state import Fail, out

USAGE = "usage: scutil --get|--set ComputerName|LocalHostName|HostName [name]\n"


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("--get", "--set") or argv[1] not in names.KEYS:
        raise Fail(USAGE, 64)
    key = argv[1]
    if argv[0] == "--get":
        value = names.get(key)
        if value is None:
            raise Fail(f"{key}: not set\n", 1)
        out(value + "\n")
        return 0
    if not state.is_root():
        raise Fail("The --set option requires super-user access\n", 1)
    if len(argv) != 3:
        raise Fail(USAGE, 64)  # scutil would read the name from stdin; cluster tools pass it
    names.store(key, argv[2])
    return 0

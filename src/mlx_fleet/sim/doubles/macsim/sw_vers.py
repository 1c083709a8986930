"""sw_vers(1): macOS 11+ layout (ProductName macOS, two tabs after each label). A Mac with a Rapid Security
Response or Background Security Improvement applied (the node's os_version_extra, e.g. "(a)") also prints
ProductVersionExtra, before BuildVersion (tests/fixtures/macos/sw_vers-security-response__*)."""

from . import state
from .state import Fail, out


def main(argv: list[str]) -> int:
    node = state.node()
    extra = node.get("os_version_extra")
    fields = {"-productName": "macOS", "-productVersion": node["os_version"], "-buildVersion": node["os_build"]}
    if extra:
        fields["-productVersionExtra"] = extra
    if not argv:
        out(f"ProductName:\t\tmacOS\nProductVersion:\t\t{node['os_version']}\n"
            + (f"ProductVersionExtra:\t{extra}\n" if extra else "") + f"BuildVersion:\t\t{node['os_build']}\n")
    elif len(argv) == 1 and argv[0] in fields:
        out(fields[argv[0]] + "\n")
    else:
        raise Fail("Usage: sw_vers [-productName|-productVersion|-productVersionExtra|-buildVersion]\n", 1)
    return 0

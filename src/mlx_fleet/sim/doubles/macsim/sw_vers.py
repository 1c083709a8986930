"""sw_vers(1): macOS 11+ layout (ProductName macOS, two tabs after each label)."""

from . import state
from .state import Fail, out


def main(argv: list[str]) -> int:
    node = state.node()
    fields = {"-productName": "macOS", "-productVersion": node["os_version"], "-buildVersion": node["os_build"]}
    if not argv:
        out(f"ProductName:\t\tmacOS\nProductVersion:\t\t{node['os_version']}\nBuildVersion:\t\t{node['os_build']}\n")
    elif len(argv) == 1 and argv[0] in fields:
        out(fields[argv[0]] + "\n")
    else:
        raise Fail("Usage: sw_vers [-productName|-productVersion|-productVersionExtra|-buildVersion]\n", 1)
    return 0

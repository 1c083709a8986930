"""ipconfig(8) getifaddr IFACE: the interface's first IPv4 address; nothing and exit 1 without one."""

from . import net
from .state import Fail, out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "getifaddr":
        raise Fail("usage: ipconfig getifaddr <interface name>\n", 64)
    entry = net.link(argv[1])
    addrs = net.ipv4(entry) if entry else []
    if not addrs:
        return 1
    out(addrs[0]["local"] + "\n")
    return 0

"""The node's live network state, through iproute2 (``MACSIM_IP`` overrides the binary).

The reads print masks and broadcasts with the helpers below; ipaddress, which costs a double a fifth of its
start (state.py), is imported where an address is checked or a route looked up."""

import os

from .state import Fail, loads


def ip(*args: str) -> str:
    returncode, stdout, stderr = run([os.environ.get("MACSIM_IP", "ip"), *args])
    if returncode != 0:
        raise NetError(stderr.strip())
    return stdout


def run(argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ARGV, as subprocess.run(capture_output=True) gives them, without
    importing subprocess (state.py says why). Stderr goes to an unlinked file, so neither can fill up while
    the other is read."""
    out_read, out_write = os.pipe()
    err_file = os.open("/dev/shm" if os.path.isdir("/dev/shm") else "/tmp", os.O_TMPFILE | os.O_RDWR, 0o600)
    try:
        try:
            pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
                (os.POSIX_SPAWN_DUP2, out_write, 1), (os.POSIX_SPAWN_DUP2, err_file, 2)])
        finally:
            os.close(out_write)
        with open(out_read, "rb", closefd=False) as out:
            stdout = out.read()
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        stderr = os.pread(err_file, os.fstat(err_file).st_size, 0)
    finally:
        os.close(out_read)
        os.close(err_file)
    return status, stdout.decode(errors="replace"), stderr.decode(errors="replace")


class NetError(Fail):
    def __init__(self, message: str):
        super().__init__(message, 1)


def _json(*args: str) -> list:
    text = ip("-j", *args)
    return loads(text) if text.strip() else []


def links() -> list[dict]:
    """Every interface with its addresses and link details (``ip -j -d addr show``)."""
    return _json("-d", "addr", "show")


def link(name: str) -> dict | None:
    return next((l for l in links() if l["ifname"] == name), None)


def routes() -> list[dict]:
    return _json("route", "show")


def neighbours() -> list[dict]:
    """The ARP table with each entry's age in seconds (``confirmed``)."""
    return _json("-s", "neigh", "show")


def ipv4(entry: dict) -> list[dict]:
    return [a for a in entry.get("addr_info", []) if a.get("family") == "inet"]


def is_up(entry: dict) -> bool:
    return "UP" in entry.get("flags", [])


def has_carrier(entry: dict) -> bool:
    # A veth whose peer sits in an empty patch-panel bridge, or nowhere, has no carrier.
    return is_up(entry) and "NO-CARRIER" not in entry.get("flags", []) and entry.get("operstate") != "DOWN"


def set_up(name: str, up: bool) -> None:
    ip("link", "set", name, "up" if up else "down")


def netmask(prefixlen: int) -> int:
    """A prefix length's netmask as a number (24: 0xffffff00)."""
    return (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF


def dotted(value: int) -> str:
    """A 32-bit number as a dotted quad (0xffffff00: 255.255.255.0)."""
    return ".".join(str(value >> shift & 0xFF) for shift in (24, 16, 8, 0))


def broadcast(address: str, prefixlen: int) -> str:
    """The broadcast address of ADDRESS's network (10.0.0.1, 30: 10.0.0.3)."""
    value = 0
    for part in address.split("."):
        value = value << 8 | int(part)
    return dotted(value | ~netmask(prefixlen) & 0xFFFFFFFF)


def add_address(name: str, address: str, prefix: int) -> None:
    ip("addr", "replace", f"{address}/{prefix}", "broadcast", broadcast(address, prefix), "dev", name)


def del_address(name: str, address: str, prefix: int) -> None:
    ip("addr", "del", f"{address}/{prefix}", "dev", name)


def flush_ipv4(name: str) -> None:
    ip("-4", "addr", "flush", "dev", name)


def route_cidr(route: dict):
    """The route's destination as an ipaddress.IPv4Network, or None."""
    import ipaddress

    dst = route.get("dst", "")
    if dst == "default":
        return ipaddress.IPv4Network("0.0.0.0/0")
    try:
        return ipaddress.IPv4Network(dst if "/" in dst else dst + "/32")
    except ValueError:
        return None  # IPv6 or something iproute2 names (e.g. "multicast")


def lookup(dest: str) -> dict | None:
    """The route the kernel would use for ``dest``: the longest matching prefix."""
    import ipaddress

    addr = ipaddress.IPv4Address(dest)
    best = None
    for r in routes():
        cidr = route_cidr(r)
        if cidr is not None and addr in cidr and (best is None or cidr.prefixlen > best[0].prefixlen):
            best = (cidr, r)
    return best[1] if best else None

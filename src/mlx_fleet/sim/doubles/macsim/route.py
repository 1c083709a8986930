"""route(8): add, delete, change and get IPv4 routes.

Semantics of BSD route.c as shipped in macOS: the destination is a host when it has
a non-zero host part (classful) or -host is given; the routing socket looks a change
or get up by best match, so ``route change PEER -interface en2`` (mlx.distributed_config)
succeeds once ``ifconfig en2 inet ...`` has made a covering route, and changes that
route; ``get`` exits 0 even when nothing matches. Messages: 'must be root to alter
routing table' (EX_NOPERM), 'writing to routing socket: not in table' (seen in many
public parsers), and the ``route -n get`` layout from public captures.
"""

import ipaddress

from . import net, state
from .state import Fail, err, out

EX_NOPERM = 77
ARP_MAX_AGE = 1200  # seconds an ARP entry lives (net.link.ether.inet.max_age)
# The host route the kernel clones from an interface route for a neighbour it has resolved
# (a public `route get 192.168.1.1` capture, tests/fixtures/macos/route-get-onlink__*).
NEIGHBOUR_FLAGS = "UP,HOST,DONE,LLINFO,WASCLONED,IFSCOPE,IFREF"


def _metrics(expire: int = 0) -> str:
    return (" recvpipe  sendpipe  ssthresh  rtt,msec    rttvar  hopcount      mtu     expire\n"
            + "       0  " * 6 + "    1500  " + f"{expire:>8} \n")


def _parse(args: list[str]) -> dict:
    """route.c's modifiers: ``-interface`` is a flag saying the gateway names a device."""
    spec = {"force": None, "gateway": None, "iface": False, "netmask": None, "dest": None}
    while args:
        word = args.pop(0)
        if word in ("-host", "-net"):
            spec["force"] = word[1:]
        elif word in ("-interface", "-iface"):
            spec["iface"] = True
        elif word == "-netmask" and args:
            spec["netmask"] = args.pop(0)
        elif word in ("-inet", "-static"):
            continue
        elif spec["dest"] is None:
            spec["dest"] = word
        elif spec["gateway"] is None:
            spec["gateway"] = word
        else:
            raise Fail(f"route: bad keyword: {word}\n", 64)
    if spec["dest"] is None:
        raise Fail("usage: route [-dnqtv] command [[modifiers] args]\n", 64)
    return spec


def _network(spec: dict) -> tuple[ipaddress.IPv4Network, bool]:
    """(destination network, is a host route) as route.c's getaddr() decides it."""
    dest = spec["dest"]
    if dest == "default":
        return ipaddress.IPv4Network("0.0.0.0/0"), False
    try:
        if "/" in dest:
            return ipaddress.IPv4Network(dest, strict=False), False
        if spec["netmask"]:
            return ipaddress.IPv4Network(f"{dest}/{spec['netmask']}", strict=False), False
        addr = ipaddress.IPv4Address(dest)
    except ValueError:
        raise Fail(f"route: bad address: {dest}\n", 68) from None
    first = int(addr) >> 24
    classful = 8 if first < 128 else 16 if first < 192 else 24
    host_part = int(addr) & ((1 << (32 - classful)) - 1)
    if spec["force"] == "host" or (spec["force"] != "net" and host_part):
        return ipaddress.IPv4Network(f"{addr}/32"), True
    return ipaddress.IPv4Network(f"{addr}/{classful}", strict=False), False


def _target(spec: dict) -> list[str]:
    if spec["gateway"] is None:
        raise Fail("usage: route [-dnqtv] command [[modifiers] args]\n", 64)
    return ["dev" if spec["iface"] else "via", spec["gateway"]]


def _dst(cidr: ipaddress.IPv4Network) -> str:
    return "default" if cidr.prefixlen == 0 else str(cidr)


def _exact(cidr: ipaddress.IPv4Network) -> dict | None:
    return next((r for r in net.routes() if net.route_cidr(r) == cidr), None)


def _modify(command: str, spec: dict) -> int:
    if not state.is_root():
        raise Fail("route: must be root to alter routing table\n", EX_NOPERM)
    cidr, host = _network(spec)
    gateway = spec["gateway"]
    shown = "default" if cidr.prefixlen == 0 else str(cidr.network_address)
    label = f"{command} {'host' if host else 'net'} {shown}" + (f": gateway {gateway}" if gateway else "")
    try:
        if command == "add":
            if _exact(cidr):
                raise net.NetError("File exists")
            net.ip("route", "add", _dst(cidr), *_target(spec))
        elif command == "delete":
            if not _exact(cidr):
                raise net.NetError("not in table")
            net.ip("route", "del", _dst(cidr))
        else:
            match = net.lookup(str(cidr.network_address)) if host else _exact(cidr)
            if match is None:
                raise net.NetError("not in table")
            net.ip("route", "change", match["dst"], *_target(spec))
    except net.NetError as e:
        reason = str(e) if str(e) in ("File exists", "not in table") else "Invalid argument"
        err(f"route: writing to routing socket: {reason}\n")
        out(f"{label}: {reason}\n")
        return 1
    out(label + "\n")
    return 0


def _flags(route: dict) -> str:
    flags = ["UP"]
    if "gateway" in route:
        flags.append("GATEWAY")
    if route.get("dst", "").count(".") == 3 and "/" not in route["dst"]:
        flags.append("HOST")
    flags.append("DONE")
    if route.get("protocol") == "kernel":
        flags.append("CLONING")
    else:
        flags.append("STATIC")
        if "gateway" in route:
            flags.append("PRCLONING")
    return "<" + ",".join(flags) + ">"


def get(spec: dict) -> int:
    dest = spec["dest"]
    try:
        target = "0.0.0.0" if dest == "default" else str(ipaddress.IPv4Network(dest, strict=False).network_address)
    except ValueError:
        raise Fail(f"route: bad address: {dest}\n", 68) from None
    route = net.lookup(target)
    if route is None:
        err("route: writing to routing socket: not in table\n")
        return 0  # route.c exits 0 after a failed get
    cidr = net.route_cidr(route)
    neighbour = _neighbour(target, route["dev"]) if "gateway" not in route and cidr.prefixlen < 32 else None
    if neighbour is not None:
        router = any(r.get("gateway") == target for r in net.routes())
        out(f"   route to: {dest}\ndestination: {target}\n  interface: {route['dev']}\n"
            f"      flags: <{NEIGHBOUR_FLAGS}{',ROUTER' if router else ''}>\n"
            + _metrics(max(0, ARP_MAX_AGE - int(neighbour.get("confirmed", 0)))))
        return 0
    text = f"   route to: {dest}\n"
    if cidr.prefixlen == 0:
        text += "destination: default\n       mask: default\n"
    else:
        text += f"destination: {cidr.network_address}\n"
        if cidr.prefixlen < 32:
            text += f"       mask: {cidr.netmask}\n"
    if "gateway" in route:
        text += f"    gateway: {route['gateway']}\n"
    text += f"  interface: {route['dev']}\n      flags: {_flags(route)}\n"
    out(text + _metrics())
    return 0


def _neighbour(address: str, device: str) -> dict | None:
    """The resolved ARP entry for an on-link address, as macOS keeps one per peer it talks to."""
    return next((n for n in net.neighbours() if n.get("dst") == address and n.get("dev") == device
                 and n.get("lladdr") and not {"FAILED", "INCOMPLETE"} & set(n.get("state", []))), None)


def main(argv: list[str]) -> int:
    args = [a for a in argv if a not in ("-n", "-q", "-v")]
    if not args or args[0] not in ("add", "delete", "change", "get"):
        raise Fail("usage: route [-dnqtv] command [[modifiers] args]\n", 64)
    spec = _parse(args[1:])
    return get(spec) if args[0] == "get" else _modify(args[0], spec)

"""ifconfig(8): show and configure the node's interfaces (runtime only, as on a Mac).

Output format from the reference captures (TN3205: en2, bridge0) and the bridge member
lines of Apple's ifconfig (tab, then eight spaces before 'ifmaxaddr'); the reference
copies render each tab as four spaces. Linux's loopback 'lo' is shown as 'lo0'.
"""


from . import net, state
from .state import Fail, out

FLAG_BITS = [("UP", 0x1), ("BROADCAST", 0x2), ("LOOPBACK", 0x8), ("SMART", 0x20),
             ("RUNNING", 0x40), ("SIMPLEX", 0x800), ("MULTICAST", 0x8000)]
OPTIONS = {  # per kind of port, as real Apple Silicon Macs report them
    "thunderbolt": "460<TSO4,TSO6,CHANNEL_IO>",
    "Ethernet": "50b<RXCSUM,TXCSUM,VLAN_HWTAGGING,AV,CHANNEL_IO>",
    "Wi-Fi": "6460<TSO4,TSO6,CHANNEL_IO,PARTIAL_CSUM,ZEROINVERT_CSUM>",
    "bridge": "63<RXCSUM,TXCSUM,TSO4,TSO6>",
    "loopback": "1203<RXCSUM,TXCSUM,TXSTATUS,SW_TIMESTAMP>",
}


def mac_name(linux: str) -> str:
    return "lo0" if linux == "lo" else linux


def linux_name(mac: str) -> str:
    return "lo" if mac == "lo0" else mac


def bridge_members() -> list[str]:
    """bridge0's members: the Thunderbolt ports boot enslaved, minus any ``deletem``."""
    return state.runtime("bridge", {"members": state.thunderbolt_devices()})["members"]


def set_bridge_members(members: list[str]) -> None:
    """Record bridge0's members. Membership is bookkeeping, except for the ports node.json lists in
    ``bridge_data_path`` (the controller's cable to a Mac managed over its Thunderbolt Bridge),
    which really join the Linux bridge: a Mac's bridge still delivers a member's own addresses,
    a Linux bridge would swallow them, so the other ports keep their traffic to themselves."""
    state.save_runtime("bridge", {"members": members})
    for device in state.node().get("bridge_data_path", []):
        net.ip("link", "set", device, *(("master", "bridge0") if device in members else ("nomaster",)))


def _kind(name: str) -> str:
    if name == "lo0":
        return "loopback"
    if name == "bridge0":
        return "bridge"
    if name in state.thunderbolt_devices():
        return "thunderbolt"
    port = state.by_device(name)
    return port["hardware_port"] if port and port["hardware_port"] in OPTIONS else "Ethernet"


def _flags(entry: dict, kind: str) -> str:
    names = {"UP"} if net.is_up(entry) else set()
    names |= {"RUNNING"} if names else set()
    names |= {"LOOPBACK", "MULTICAST"} if kind == "loopback" else {"BROADCAST", "SMART", "SIMPLEX", "MULTICAST"}
    if kind == "Wi-Fi":
        names.discard("SMART")
    value = sum(bit for flag, bit in FLAG_BITS if flag in names)
    return f"flags={value:x}<{','.join(flag for flag, _ in FLAG_BITS if flag in names)}>"


def _active(entry: dict, kind: str, by_name: dict) -> bool:
    if kind == "bridge":
        return net.is_up(entry) and any(net.has_carrier(by_name[m]) for m in bridge_members() if m in by_name)
    return net.has_carrier(entry)


def describe(entry: dict, by_name: dict) -> str:
    name = mac_name(entry["ifname"])
    kind = _kind(name)
    mtu = 16384 if kind == "loopback" else entry.get("mtu", 1500)
    lines = [f"{name}: {_flags(entry, kind)} mtu {mtu}", f"\toptions={OPTIONS[kind]}"]
    if kind != "loopback":
        lines.append(f"\tether {entry.get('address', '00:00:00:00:00:00')} ")  # trailing space as printed
    addrs = entry.get("addr_info", [])
    scope_id = f"scopeid 0x{entry['ifindex']:x}"
    inet6 = [a for a in addrs if a["family"] == "inet6"]
    for a in sorted(inet6, key=lambda a: a.get("scope") != "link"):
        if a.get("scope") == "link":
            lines.append(f"\tinet6 {a['local']}%{name} prefixlen {a['prefixlen']} secured {scope_id} ")
        else:
            lines.append(f"\tinet6 {a['local']} prefixlen {a['prefixlen']} ")
    for a in net.ipv4(entry):
        mask = net.netmask(a["prefixlen"])
        line = f"\tinet {a['local']} netmask 0x{mask:08x} "
        if kind != "loopback":
            bcast = a.get("broadcast") or net.broadcast(a["local"], a["prefixlen"])
            line += f"broadcast {bcast}"
        lines.append(line)
    if kind == "bridge":
        lines += [
            "\tConfiguration:",
            "\t\tid 0:0:0:0:0:0 priority 0 hellotime 0 fwddelay 0",
            "\t\tmaxage 0 holdcnt 0 proto stp maxaddr 100 timeout 1200",
            "\t\troot id 0:0:0:0:0:0 priority 0 ifcost 0 port 0",
            "\t\tipfilter disabled flags 0x2",
        ]
        for member in bridge_members():
            port = by_name[member]["ifindex"] if member in by_name else 0
            lines += [f"\tmember: {member} flags=3<LEARNING,DISCOVER>",
                      f"\t        ifmaxaddr 0 port {port} priority 0 path cost 0"]
    lines.append("\tnd6 options=201<PERFORMNUD,DAD>")
    if kind != "loopback":
        active = _active(entry, kind, by_name)
        media = {"thunderbolt": "autoselect <full-duplex>", "bridge": "<unknown type>", "Wi-Fi": "autoselect"}.get(
            kind, "autoselect (1000baseT <full-duplex>)" if active else "autoselect (none)")
        lines += [f"\tmedia: {media}", f"\tstatus: {'active' if active else 'inactive'}"]
    return "\n".join(lines) + "\n"


def _netmask(text: str) -> int:
    import ipaddress  # here, as below: the reads need none (net.py)

    if text.lower().startswith("0x"):
        return bin(int(text, 16)).count("1")
    return ipaddress.IPv4Network(f"0.0.0.0/{text}").prefixlen


def _check_address(address: str, word: str) -> None:
    import ipaddress

    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        raise Fail(f"ifconfig: {word}: bad value\n", 1) from None


def _denied(ioctl: str) -> Fail:
    return Fail(f"ifconfig: ioctl ({ioctl}): Operation not permitted\n", 1)


def configure(name: str, entry: dict, args: list[str]) -> None:
    """The subset of ifconfig's grammar that cluster set-up uses."""
    args = list(args)
    if args and args[0] == "inet":
        args.pop(0)
    address = prefix = None
    alias = remove = False
    up = None
    while args:
        word = args.pop(0)
        if word in ("up", "down"):
            up = word == "up"
        elif word == "netmask":
            prefix = _netmask(args.pop(0))
        elif word == "broadcast":
            args.pop(0)  # derived from the netmask, as the kernel would
        elif word == "alias":
            alias = True
        elif word in ("-alias", "delete"):
            remove = True
        elif word in ("addm", "deletem") and name == "bridge0":
            _member(word, args.pop(0))
        elif address is None:
            address, _, bits = word.partition("/")
            _check_address(address, word)
            prefix = int(bits) if bits else prefix
        else:
            raise Fail(f"ifconfig: {word}: bad value\n", 1)
    if address is not None:
        if not state.is_root():
            raise _denied("SIOCDIFADDR" if remove else "SIOCAIFADDR")
        current = net.ipv4(entry)
        if remove:
            match = next((a for a in current if a["local"] == address), None)
            if match is None:
                raise Fail("ifconfig: ioctl (SIOCDIFADDR): Can't assign requested address\n", 1)
            net.del_address(entry["ifname"], address, match["prefixlen"])
        else:
            if prefix is None:  # classful default, as BSD ifconfig does
                first = int(address.split(".")[0])
                prefix = 8 if first < 128 else 16 if first < 192 else 24
            if current and not alias:
                net.del_address(entry["ifname"], current[0]["local"], current[0]["prefixlen"])
            net.add_address(entry["ifname"], address, prefix)
    if up is not None:
        if not state.is_root():
            raise _denied("SIOCSIFFLAGS")
        net.set_up(entry["ifname"], up)


def _member(op: str, device: str) -> None:
    if not state.is_root():
        raise Fail(f"ifconfig: {'BRDGADD' if op == 'addm' else 'BRDGDEL'} {device}: Operation not permitted\n", 1)
    members = [m for m in bridge_members() if m != device]
    if op == "addm":
        members.append(device)
    set_bridge_members(members)


def main(argv: list[str]) -> int:
    entries = net.links()
    by_name = {mac_name(e["ifname"]): e for e in entries}
    if not argv or argv == ["-a"]:
        out("".join(describe(e, by_name) for e in entries))
    elif argv[0] == "-l":
        out(" ".join(by_name) + "\n")
    else:
        name = argv[0]
        if name not in by_name:
            raise Fail(f"ifconfig: interface {name} does not exist\n", 1)
        if len(argv) == 1:
            out(describe(by_name[name], by_name))
        else:
            configure(name, by_name[name], argv[1:])
    return 0

"""networksetup(8): hardware ports and network services.

Formats from the captures in tests/fixtures/macos: -listallhardwareports (Knurlogic's M3 Ultra,
trimmed, and an untrimmed one: leading blank line, 'Ethernet Address:' lines, the Thunderbolt
Bridge port with 'N/A', the VLAN block), -listnetworkserviceorder, -getinfo (DHCP with and
without a lease, 'Router: (null)' when there is none, Manual), -getadditionalroutes (routes, and
the sentence printed when there are none). The 'is not a recognized network service' error as
quoted in public parsers' test data.
"""


from . import net, services, state
from .state import Fail, out

INVALID = "** Error: The parameters were not valid.\n"
# Setters need root; exit status not documented, 14 is this double's choice.
NEEDS_ROOT = Fail("** Error: Command requires admin privileges.\n", 14)


def _require_root() -> None:
    if not state.is_root():
        raise NEEDS_ROOT


def list_all_hardware_ports(_args) -> None:
    text = "\n"
    for port in services.hardware_ports():
        mac = port.get("mac", "N/A")  # configd lists the bridge with no address of its own
        text += f"Hardware Port: {port['hardware_port']}\nDevice: {port['device']}\nEthernet Address: {mac}\n\n"
    out(text + "VLAN Configurations\n===================\n")


def list_all_network_services(_args) -> None:
    lines = ["An asterisk (*) denotes that a network service is disabled."]
    lines += [("" if s["enabled"] else "*") + s["name"] for s in services.load()]
    out("\n".join(lines) + "\n")


def list_network_service_order(_args) -> None:
    text = "An asterisk (*) denotes that a network service is disabled.\n"
    n = 0
    for s in services.load():
        n += s["enabled"]  # disabled services take no number: (3), (*), (4)
        mark = str(n) if s["enabled"] else "*"
        text += f"({mark}) {s['name']}\n(Hardware Port: {s['hardware_port']}, Device: {s['device']})\n\n"
    out(text)


def _mac_line(service: dict) -> str:
    port = state.by_device(service["device"])
    if port is None:
        live = net.link(service["device"])
        mac = live.get("address") if live else None
    else:
        mac = port["mac"]
    if not mac:
        return ""
    label = "Wi-Fi ID" if service["hardware_port"] == "Wi-Fi" else "Ethernet Address"
    return f"{label}: {mac}\n"


def get_info(args) -> None:
    (name,) = args
    service = services.find(services.load(), name)
    ipv4 = service["ipv4"]
    # A service with IPv4 off: no capture shows it, and a public parser notes that -getinfo cannot
    # tell it apart, so it gets no "<method> Configuration" line; nothing reads one into it.
    text = ""
    if ipv4["method"] == "Manual":
        text += "Manual Configuration\n"
        text += f"IP address: {ipv4['ip']}\nSubnet mask: {ipv4['mask']}\nRouter: {ipv4.get('router') or '(null)'}\n"
    elif ipv4["method"] == "DHCP":
        text += "DHCP Configuration\n"
        live = net.link(service["device"])
        addrs = net.ipv4(live) if live and service["enabled"] else []
        if addrs:
            a = addrs[0]
            mask = net.dotted(net.netmask(a["prefixlen"]))
            text += f"IP address: {a['local']}\nSubnet mask: {mask}\nRouter: {_router(service['device']) or '(null)'}\n"
        text += "Client ID: \n"
    text += "IPv6: Automatic\nIPv6 IP address: none\nIPv6 Router: none\n"
    out(text + _mac_line(service))


def _router(device: str) -> str | None:
    return next((r["gateway"] for r in net.routes() if r.get("dst") == "default" and r.get("dev") == device), None)


def _check_ipv4(*values: str) -> None:
    import ipaddress  # here: the reads need none (net.py)

    for v in values:
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            raise Fail(INVALID, 4) from None


def set_manual(args) -> None:
    _require_root()
    name, address, mask, *router = args
    _check_ipv4(address, mask, *router)
    all_services = services.load()
    service = services.find(all_services, name)
    config = {"method": "Manual", "ip": address, "mask": mask, "router": router[0] if router else None}
    services.reconfigure(all_services, service, lambda s: s.update(ipv4=config))


def _set_method(method: str):
    def command(args) -> None:
        (name,) = args
        _require_root()
        all_services = services.load()
        service = services.find(all_services, name)
        services.reconfigure(all_services, service, lambda s: s.update(ipv4={"method": method}))

    return command


def set_network_service_enabled(args) -> None:
    name, value = args
    if value.lower() not in ("on", "off"):
        raise Fail(INVALID, 4)
    _require_root()
    all_services = services.load()
    service = services.find(all_services, name)
    services.reconfigure(all_services, service, lambda s: s.update(enabled=value.lower() == "on"))


def order_network_services(args) -> None:
    """-ordernetworkservices S1 S2 ...: the services in that order (any not named keep theirs, after them)."""
    _require_root()
    all_services = services.load()
    named = [services.find(all_services, name) for name in args]
    services.save(named + [s for s in all_services if all(s is not n for n in named)])


def get_network_service_enabled(args) -> None:
    (name,) = args
    out("Enabled\n" if services.find(services.load(), name)["enabled"] else "Disabled\n")


def set_additional_routes(args) -> None:
    name, *rest = args
    if len(rest) % 3:
        raise Fail(INVALID, 4)
    _check_ipv4(*rest)
    _require_root()
    routes = [rest[i : i + 3] for i in range(0, len(rest), 3)]
    all_services = services.load()
    service = services.find(all_services, name)
    services.reconfigure(all_services, service, lambda s: s.update(routes=routes))


def get_additional_routes(args) -> None:
    (name,) = args
    routes = services.find(services.load(), name)["routes"]
    if not routes:
        out(f"There are no additional IPv4 routes on {name}.\n")
    for dest, mask, gateway in routes:
        out(f"{dest} {mask} {gateway}\n")


def create_network_service(args) -> None:
    name, port_name = args
    _require_root()
    all_services = services.load()
    port = next((p for p in services.hardware_ports() if port_name in (p["hardware_port"], p["device"])), None)
    if port is None or any(s["name"] == name for s in all_services):
        raise Fail(INVALID, 4)
    service = services.new_service(name, port)
    all_services.append(service)
    services.save(all_services)
    services.apply(service)


def remove_network_service(args) -> None:
    (name,) = args
    _require_root()
    all_services = services.load()
    service = services.find(all_services, name)
    services.withdraw(service)
    all_services.remove(service)
    services.save(all_services)


def get_mac_address(args) -> None:
    (name,) = args
    port = next((p for p in state.node()["interfaces"] if name in (p["hardware_port"], p["device"])), None)
    if port is None:
        raise Fail(INVALID, 4)
    out(f"Ethernet Address: {port['mac']} (Hardware Port: {port['hardware_port']})\n")


# option: (handler, fewest arguments, most arguments or None for unbounded)
COMMANDS = {
    "-listallhardwareports": (list_all_hardware_ports, 0, 0),
    "-listallnetworkservices": (list_all_network_services, 0, 0),
    "-listnetworkserviceorder": (list_network_service_order, 0, 0),
    "-getinfo": (get_info, 1, 1),
    "-setmanual": (set_manual, 3, 4),
    "-setdhcp": (_set_method("DHCP"), 1, 1),
    "-setv4off": (_set_method("Off"), 1, 1),
    "-setnetworkserviceenabled": (set_network_service_enabled, 2, 2),
    "-getnetworkserviceenabled": (get_network_service_enabled, 1, 1),
    "-ordernetworkservices": (order_network_services, 1, None),
    "-setadditionalroutes": (set_additional_routes, 1, None),
    "-getadditionalroutes": (get_additional_routes, 1, 1),
    "-createnetworkservice": (create_network_service, 2, 2),
    "-removenetworkservice": (remove_network_service, 1, 1),
    "-getmacaddress": (get_mac_address, 1, 1),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in COMMANDS:
        raise Fail(f"Usage: networksetup -help\n{INVALID}", 4)
    handler, fewest, most = COMMANDS[argv[0]]
    args = argv[1:]
    if len(args) < fewest or (most is not None and len(args) > most):
        raise Fail(INVALID, 4)
    handler(args)
    return 0

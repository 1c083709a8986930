"""Network services, the configd model behind networksetup, stored in preferences.json.

A fresh Mac has one service per Ethernet/Wi-Fi port plus "Thunderbolt Bridge"
(bridge0); the Thunderbolt ports themselves have no service until someone runs
``networksetup -createnetworkservice "Thunderbolt 1" "Thunderbolt 1"`` (as cluster
set-up scripts do after disabling the bridge). A service's IPv4 settings are applied
to its device while it is enabled, by networksetup at once and by ``boot`` after a
(re)boot.
"""


from . import net, state

BRIDGE_PORT = {"hardware_port": "Thunderbolt Bridge", "device": "bridge0"}


def hardware_ports() -> list[dict]:
    """networksetup's hardware ports: node.json's interfaces, plus the bridge as configd sees it."""
    return state.node()["interfaces"] + [BRIDGE_PORT]


def _default_services() -> list[dict]:
    services = [
        new_service(i["hardware_port"], i)
        for i in state.node()["interfaces"]
        if i["hardware_port"] in ("Ethernet", "Wi-Fi")
    ]
    return services + [new_service("Thunderbolt Bridge", BRIDGE_PORT)]


def new_service(name: str, port: dict) -> dict:
    return {
        "name": name,
        "hardware_port": port["hardware_port"],
        "device": port["device"],
        "enabled": True,
        "ipv4": {"method": "DHCP"},
        "routes": [],
    }


def load() -> list[dict]:
    return state.prefs("preferences", {}).get("NetworkServices") or _default_services()


def save(services: list[dict]) -> None:
    prefs = state.prefs("preferences", {})
    prefs["NetworkServices"] = services
    state.save_prefs("preferences", prefs)


def find(services: list[dict], name: str) -> dict:
    for s in services:
        if s["name"] == name:
            return s
    raise state.Fail(f"{name} is not a recognized network service.\n** Error: The parameters were not valid.\n", 4)


def prefix(mask: str) -> int:
    import ipaddress  # here: the reads need none (net.py)

    return ipaddress.IPv4Network(f"0.0.0.0/{mask}").prefixlen


def _route_args(route: list[str], device: str) -> list[str]:
    dest, mask, gateway = route
    return [f"{dest}/{prefix(mask)}", "via", gateway, "dev", device]


def withdraw(service: dict) -> None:
    """Take a service's addresses and routes off its device (disabled, removed or reconfigured)."""
    device = service["device"]
    if net.link(device) is None:
        return
    for route in service.get("routes", []):
        try:
            net.ip("route", "del", *_route_args(route, device))
        except net.NetError:
            pass  # already gone with its address
    net.flush_ipv4(device)


def apply(service: dict) -> None:
    """Put an enabled service's configuration on its device."""
    device = service["device"]
    if net.link(device) is None:
        return  # hardware not present (e.g. an adapter that is unplugged)
    if device == "bridge0":
        if service["enabled"]:
            # configd enslaves the Thunderbolt ports whenever the Thunderbolt Bridge service comes on.
            state.save_runtime("bridge", {"members": state.thunderbolt_devices()})
        net.set_up("bridge0", service["enabled"])
    if not service["enabled"]:
        return
    ipv4 = service["ipv4"]
    management = state.node().get("management", {})
    if ipv4["method"] == "Manual":
        net.add_address(device, ipv4["ip"], prefix(ipv4["mask"]))
        if ipv4.get("router") and device == management.get("device"):
            net.ip("route", "replace", "default", "via", ipv4["router"], "dev", device)
    elif ipv4["method"] == "DHCP" and device == management.get("device"):
        # The management network's DHCP server always hands out the same lease.
        net.add_address(device, management["ip"], management["prefix"])
        net.ip("route", "replace", "default", "via", management["router"], "dev", device)
    for route in service.get("routes", []):
        try:
            net.ip("route", "replace", *_route_args(route, device))
        except net.NetError:
            # configd's IPMonitor logs a route it cannot install (a gateway off the service's
            # subnet) and goes on; the setting that stored it does not fail.
            pass


def reconfigure(services: list[dict], service: dict, change) -> None:
    """Change a service with ``change(service)``, persist it, and re-apply it live."""
    withdraw(service)
    change(service)
    save(services)
    apply(service)

"""Never lock the user out: the fabric's network plan must leave alone the interface each Mac is
managed over (the one its default route uses, as macos_facts reports it).

Judged on the controller before mlx_fleet.cluster.thunderbolt_network touches any Mac: turning off
the Thunderbolt Bridge a Mac is reached through, re-addressing the Thunderbolt port it is reached
through, or pulling that port into a Thunderbolt Bridge would cut the connection Ansible (and the
user) depend on, with no way back but a person at the Mac.
"""

from __future__ import annotations

BRIDGE_SERVICE = "Thunderbolt Bridge"
FIX = "manage the Mac over Ethernet or Wi-Fi (its ansible_host)"


def management_interface(macos: dict) -> str | None:
    """The device the Mac is managed over (macos_facts' management_interface), None when not reported."""
    return macos.get("management_interface") or None


def _port_name(macos: dict, thunderbolt: dict, device: str) -> str:
    """'Thunderbolt 2 (en3)': the hardware port macos_facts named, else the one thunderbolt_facts knows."""
    bridge = thunderbolt.get("bridge") or {}
    name = macos.get("management_hardware_port") or next(
        (p.get("hardware_port") for p in thunderbolt.get("ports", []) if p.get("device") == device),
        BRIDGE_SERVICE if device == bridge.get("device") else None)
    return f"{name} ({device})" if name else device


def lockout_problems(macos: dict[str, dict], thunderbolt: dict[str, dict], network: dict[str, list[dict]],
                     bridge: str) -> list[str]:
    """One line per Mac whose management connection the plan would cut.

    macos / thunderbolt: each host's mlx_fleet_macos and mlx_fleet_thunderbolt facts; network: the
    ports thunderbolt_network will address per host (dicts with device, hardware_port, peer...);
    bridge: what it will do to the Thunderbolt Bridge (disabled, enabled, unchanged).
    """
    problems = []
    for host, facts in macos.items():
        device = management_interface(facts)
        if device is None:
            continue
        tb = thunderbolt.get(host) or {}
        bridge_facts = tb.get("bridge") or {}
        where = f"{host}: managed over {_port_name(facts, tb, device)}"
        planned = next((p for p in network.get(host, []) if p.get("device") == device), None)
        if device == bridge_facts.get("device") and bridge == "disabled":
            problems.append(f"{where}, which the fabric would turn off (mlx_fabric_bridge: disabled); {FIX}, "
                            "or keep the bridge with mlx_fabric_bridge: unchanged")
        elif planned is not None:
            problems.append(f"{where}, which the fabric would re-address to {planned.get('address')} for its "
                            f"Thunderbolt cable; {FIX}, or leave that port out of the plan (unplug the cable and "
                            "drop it from mlx_fleet_cables)")
        elif bridge == "enabled" and not bridge_facts.get("service_enabled") and any(
                p.get("device") == device for p in tb.get("ports", [])):
            problems.append(f"{where}, which turning the Thunderbolt Bridge on (mlx_fabric_bridge: enabled) would "
                            f"make a bridge member without an address of its own; {FIX}, or keep the bridge "
                            "with mlx_fabric_bridge: unchanged")
    return problems

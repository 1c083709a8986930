"""One judge per fact: a function of typed facts (as the modules and node_facts shape them) returning a Finding,
or None when the fact is as it should be. The audit, the watch and verify's diagnosis judge through these, so a
fact is drift for all of them or for none.

Fixes are templates ({site}, {node}, ...) that the caller fills for the install in use (plugin_utils.base.fixes.fill).
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import field_checks
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.against_plan import rewiring
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Port, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.state import ACTIVE

# What converges each kind of fact (fixes.fill).
FIX_NODE = "{node}"
FIX_ENV = "{env}"
FIX_FABRIC = "{site} (the fabric step configures the Thunderbolt ports)"
FIX_HOSTFILE = "{hostfile}"
FIX_RECOVERY = "the Recovery checklist: {checklist}, then {site}"
FIX_LOCK = "{lock}, then " + FIX_ENV
FIX_CONVERGE = "{site}"


def _port(host: str, receptacle: int) -> tuple[Port, ...]:
    return (Port(host, receptacle),)


# --- a Mac ---------------------------------------------------------------------------------------------------


def unreachable(host: str, error: str) -> Finding:
    return Finding("unreachable", (host,), error or "not probed", "answers over ssh",
                   f"check that {host} is on, awake and on the network (its network cable, Wi-Fi), then `ssh {host}`")


def bridge_expected(bridge: dict, wanted: str) -> str:
    return "on (service enabled)" if wanted == "enabled" else f"off (service disabled, {bridge['device']} inactive)"


def bridge_found(bridge: dict) -> str:
    return (f"service {'enabled' if bridge['service_enabled'] else 'disabled'}, "
            f"{bridge['device']} {'active' if bridge['active'] else 'inactive'}")


def bridge(host: str, state: dict, wanted: str) -> Finding | None:
    """The Thunderbolt Bridge (node_facts.bridge_state) against mlx_fabric_bridge (anything but enabled or disabled:
    left as it is). Off means the service disabled and bridge0 inactive, with members or without."""
    if wanted not in ("disabled", "enabled"):
        return None
    on = wanted == "enabled"
    if state["service_enabled"] == on and (on or not state["active"]):
        return None
    return Finding("bridge", (host,), bridge_found(state), bridge_expected(state, wanted), FIX_FABRIC)


def sleep(host: str, power: dict | None) -> Finding | None:
    """pmset's system sleep: an idle Mac that sleeps drops out of the cluster."""
    minutes = (power or {}).get("sleep")
    if not isinstance(minutes, int) or isinstance(minutes, bool) or minutes == 0:
        return None
    return Finding("sleep", (host,), f"{minutes} min", "0 (never)", FIX_NODE)


def rdma_off(host: str, enabled: bool | None, seen_ready: bool) -> Finding | None:
    """RDMA switched off on a Mac the RDMA ledger saw ready."""
    if not seen_ready or enabled is not False:
        return None
    return Finding("rdma-off", (host,), "disabled", "the last converge saw it ready", FIX_RECOVERY)


def stale_rdma(host: str, stale: bool) -> Finding | None:
    if not stale:
        return None
    return Finding("stale-rdma", (host,), "ibv_devinfo timed out", "ibv_devinfo answers",
                   f"reboot {host}: a wedged RDMA stack comes back only with a restart")


def service_order(host: str, services: list[dict] | None) -> Finding | None:
    order = field_checks.service_order(services)
    return Finding("service-order", (host,), order, "the Thunderbolt services after the others",
                   field_checks.service_order_fix(services or [])) if order else None


def default_route(host: str, interface: str | None, services: list[dict] | None,
                  devices: list[str]) -> Finding | None:
    route = field_checks.default_route(interface, devices)
    return Finding("default-route", (host,), route, "not through bridge0 or a Thunderbolt port",
                   field_checks.service_order_fix(services or [])) if route else None


def filevault(host: str, on: bool | None) -> Finding | None:
    locked = field_checks.filevault(on)
    return Finding("filevault", (host,), locked, "off (a restarted Mac comes back on the network)",
                   field_checks.filevault_fix(host)) if locked else None


def network_manager(host: str, loaded: list[str] | None) -> Finding | None:
    rival = field_checks.competing(loaded)
    return Finding("network-manager", (host,), rival, "none loaded",
                   field_checks.competing_fix(loaded or [])) if rival else None


# --- a port --------------------------------------------------------------------------------------------------


def port_address(host: str, receptacle: int, device: str | None, found: list[str], want: str | None, *,
                 cable: Cable | None = None) -> Finding | None:
    """A Thunderbolt port's addresses (address/prefix, as ifconfig shows them) against the fabric's (None: none)."""
    if found == ([want] if want else []):
        return None
    return Finding("no-ipv4", (host,), f"Thunderbolt {receptacle} ({device}) has {', '.join(found) or 'no IPv4 address'}",
                   want or "none", FIX_FABRIC, _port(host, receptacle), cable)


def rdma_port(host: str, port: dict, *, enabled: bool | None, seen_ready: bool, cable: Cable | None = None) -> Finding | None:
    """An RDMA port not active on a cable that links, on a Mac with RDMA on that the ledger saw ready."""
    if not (enabled and seen_ready and port.get("rdma_device")) or port.get("rdma_state") in (None, ACTIVE):
        return None
    receptacle = port["receptacle"]
    return Finding("rdma-port", (host,), f"Thunderbolt {receptacle}: RDMA port {port['rdma_device']} is "
                   f"{port['rdma_state']}", f"Thunderbolt {receptacle}",
                   f"reboot {host} (an RDMA port that stays down on a linked cable comes back only with a restart)",
                   _port(host, receptacle), cable)


def rdma_gid(host: str, port: dict, addresses: list[str], *, cable: Cable | None = None) -> Finding | None:
    """A cabled RDMA port without the IPv4-mapped GID JACCL picks (field_checks.rdma_gid)."""
    gid = field_checks.rdma_gid(port, addresses)
    if not gid:
        return None
    receptacle = port["receptacle"]
    return Finding("rdma-gid", (host,), f"Thunderbolt {receptacle}: {gid}", f"Thunderbolt {receptacle}",
                   field_checks.RDMA_GID_FIX, _port(host, receptacle), cable)


# --- the cluster ---------------------------------------------------------------------------------------------


def _groups(values: dict[str, str]) -> str:
    by_value: dict[str, list[str]] = {}
    for host, value in values.items():
        by_value.setdefault(value, []).append(host)
    return "; ".join(f"{value} on {', '.join(hosts)}" for value, hosts in sorted(by_value.items()))


def same_build(builds: dict[str, str]) -> Finding | None:
    """Every Mac on one macOS build (host -> "26.2 (25C56)", in inventory order): RDMA breaks across mixed builds."""
    if len(set(builds.values())) < 2:
        return None
    return Finding("os-mismatch", tuple(builds), _groups(builds), "one build on every Mac",
                   "update macOS so every Mac runs the same build")


def same_environment(fingerprints: dict[str, str]) -> Finding | None:
    """Every Mac on one MLX environment (host -> the fingerprint's digest, in inventory order)."""
    if len(set(fingerprints.values())) < 2:
        return None
    return Finding("environment-mismatch", tuple(fingerprints),
                   _groups({h: digest[:12] for h, digest in fingerprints.items()}), "one environment on every Mac",
                   FIX_ENV)


def fast_synch(hosts: list[str], envs: list[str]) -> Finding | None:
    wrong = field_checks.fast_synch(envs)
    return Finding("fast-synch", tuple(hosts), wrong, f"{field_checks.FAST_SYNCH} unset",
                   field_checks.FAST_SYNCH_FIX) if wrong else None


# --- a cable -------------------------------------------------------------------------------------------------


def cable_out(cable, seen: str) -> Finding:
    """A cable of the last converge that links no more (seen: what its ports see, in words)."""
    a, b = cable.a, cable.b
    return Finding("cable", (a.host, b.host), seen, "a link",
                   f"plug the cable between {port_name(a)} and {port_name(b)} back "
                   f"in firmly at both ends, or replace it; if it was moved on purpose: {FIX_CONVERGE}",
                   cable.key, cable)


def moved(was, now) -> Finding:
    """A cable of the last converge found on other ports of the same two Macs."""
    return Finding("moved", (was.a.host, was.b.host), str(now), str(was),
                   f"{FIX_CONVERGE} gives it its addresses on its new ports", was.key + now.key, was)


def extra(cable) -> Finding:
    """A cable the last converge did not configure."""
    return Finding("extra", (cable.a.host, cable.b.host), "not one the last converge configured",
                   "no cable", f"{FIX_CONVERGE} (or unplug it)", cable.key, cable)


def slow(cable, speed_gbps: float, rated_gbps: int) -> Finding | None:
    if speed_gbps >= rated_gbps:
        return None
    return Finding("slow", (cable.a.host, cable.b.host), f"{speed_gbps:g} Gb/s", f"these Macs do {rated_gbps} Gb/s",
                   "replace it with a Thunderbolt 5 cable (a Thunderbolt 4 or a damaged cable links at 40 Gb/s)",
                   cable.key, cable)


@dataclass(frozen=True)
class Rewired:
    findings: list[Finding]  # a cable moved (each of a swap's two as well), and the cables found beyond
    moved: set  # the keys of the reference cables found on other ports


def rewired(reference: list, found: list) -> Rewired:
    """The cables found against the last converge's (reference; none: nothing to compare with): the same rewiring
    the converge reports (fabric_plan.rewiring)."""
    if not reference:
        return Rewired([], set())
    wiring = rewiring(reference, found)
    moves = wiring.moves + [move for *dummy, pair in wiring.swaps for move in pair]
    return Rewired([moved(was, now) for was, now in moves] + [extra(cable) for cable in wiring.extra],
                   {was.key for was, dummy in moves})

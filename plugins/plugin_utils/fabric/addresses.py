"""A stable /30 per cable and each Mac's port addresses (docs/fabric.md section 2, Addresses)."""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import ClusterModel, coerce, ends
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import PREFIX, Cable, Link, Port, hardware_port


@dataclass(frozen=True)
class PortConfig:
    """What thunderbolt_network sets on one cabled port of a Mac."""

    port: Port
    device: str
    address: str
    prefix: int
    peer: Port
    peer_address: str

    @property
    def hardware_port(self) -> str:
        return hardware_port(self.port.receptacle)


def port_arguments(network: dict[str, list[PortConfig]]) -> dict[str, list[dict]]:
    """Per host, its ports exactly as mlx_fleet.cluster.thunderbolt_network takes them (its `ports`)."""
    return {host: [{"device": p.device, "hardware_port": p.hardware_port, "address": p.address, "prefix": p.prefix,
                    "peer": p.peer_address} for p in ports]
            for host, ports in network.items()}


def _held(facts: dict) -> dict[str, list[str]]:
    """device -> the IPv4 addresses (address/prefix) its port holds, from a Mac's mlx_fleet_thunderbolt."""
    return {port["device"]: port.get("addresses") or [] for port in facts["ports"] if port.get("device")}


def unplaced(ports: dict[str, list[dict]], facts: dict) -> list[tuple[str, dict]]:
    """(host, port) for each planned port (as port_arguments gives them) whose address is not on it, by the
    ports as last read ({host: mlx_fleet_thunderbolt})."""
    return [(host, p) for host, configs in ports.items() for p in configs
            if f"{p['address']}/{p['prefix']}" not in _held(facts[host]).get(p["device"], [])]


def to_configure(ports: dict[str, list[dict]], facts: dict, previous: ClusterModel | dict[str, str] | None) -> list[str]:
    """The hosts whose ports differ from the plan: a planned address not on its port, or a port out of
    the plan still holding an address of the last converge's cables (a cable moved away: mlx-fleet's to clear)."""
    model = coerce(previous)
    ledger = [ipaddress.ip_network(link.network) for link in model.links] if model else []
    missing = {host for host, dummy in unplaced(ports, facts)}

    def stale(host: str) -> bool:
        planned = {p["device"] for p in ports[host]}
        return any(ipaddress.ip_interface(a).ip in n for device, held in _held(facts[host]).items()
                   if device not in planned for a in held for n in ledger)

    return [host for host in ports if host in missing or stale(host)]


def preferred_slot(cable: Cable, slots: int) -> int:
    """A cable's own /30 slot in the pool: sha256 of its text."""
    return int(hashlib.sha256(_text(cable).encode()).hexdigest(), 16) % slots


def assign_addresses(cables: list[Cable], pool: str, previous: dict[Cable, str] | None = None) -> dict[Cable, str]:
    """cable -> its /30 (docs/fabric.md): previous assignments inside the pool are kept, a new
    cable takes its preferred slot or probes forward to the next free one. Cables not listed
    release their slot. Raises ValueError when the pool has too few /30 networks."""
    network = ipaddress.IPv4Network(pool)
    slots = network.num_addresses // 4
    if slots < len(cables):
        raise ValueError(f"mlx_fleet_ip_pool {network} holds {slots} /{PREFIX} networks for {len(cables)} "
                         "cables; use a larger pool")
    base = int(network.network_address)
    taken: dict[int, Cable] = {}
    for cable in sorted(cables, key=_text):
        try:
            kept = ipaddress.ip_network((previous or {}).get(cable, ""))
        except ValueError:
            continue
        slot = (int(kept.network_address) - base) // 4
        if kept.version == 4 and kept.prefixlen == PREFIX and kept.subnet_of(network) and slot not in taken:
            taken[slot] = cable
    for cable in sorted(set(cables) - set(taken.values()), key=_text):
        slot = preferred_slot(cable, slots)
        while slot in taken:
            slot = (slot + 1) % slots
        taken[slot] = cable
    return {cable: str(ipaddress.ip_network((base + 4 * slot, PREFIX))) for slot, cable in sorted(
        taken.items(), key=lambda item: _text(item[1]))}


def _text(cable: Cable) -> str:
    """A cable's text, lower end first: what its preferred slot hashes and the order slots are given in, as in
    every earlier version (so a cable gets the /30 it always got)."""
    return str(Cable(*cable.key))


def port_configs(hosts: list[str], links: list[Link], addresses: dict[Cable, str]) -> dict[str, list[PortConfig]]:
    """Per host, by port number, what each of its cabled ports gets."""
    network: dict[str, list[PortConfig]] = {host: [] for host in hosts}
    for link in links:
        addr_a, addr_b = ends(addresses[link.cable])
        for end, addr, peer, peer_addr in ((link.a, addr_a, link.b, addr_b), (link.b, addr_b, link.a, addr_a)):
            network[end.host].append(PortConfig(end.port, end.device, addr, PREFIX, peer.port, peer_addr))
    for configs in network.values():
        configs.sort(key=lambda c: c.port.receptacle)
    return network

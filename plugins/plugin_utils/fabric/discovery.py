"""The cabling graph: which Thunderbolt port of which Mac is cabled to which (docs/fabric.md section 2).

From every Mac's ``mlx_fleet_thunderbolt`` fact: the direct cables between Macs of the inventory,
and what else the ports see (a Mac behind a dock, a Mac outside the inventory), as findings.
"""

from __future__ import annotations


from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, End, Link, Port, hardware_port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS, Model

FULL_SPEED_GBPS = 80  # a Thunderbolt 5 link


def gbps(speed: float) -> str:
    return f"{speed:g} Gb/s"


def model_of(models: dict, host: str) -> Model | None:
    """The host's model from its mlx_fleet_model key, None when not declared or unknown."""
    return MODELS.get(models.get(host))


def read_again_wins(facts: dict, read_again: set[str]) -> dict:
    """FACTS with each Mac not in READ_AGAIN (its ports as read before) less the cables to a Mac whose ports were read
    again and no longer show that end: discovery takes a cable from either end, and a pulled cable's fresh end
    outweighs the other's older read."""
    seen = {peer["domain_uuid"] for host in read_again for port in facts[host]["ports"] for peer in port.get("peers", [])}
    owned = {port["domain_uuid"] for host in read_again for port in facts[host]["ports"]}

    def still_cabled(port, peer) -> bool:
        return peer["domain_uuid"] not in owned or port["domain_uuid"] in seen

    return {host: tb if host in read_again else dict(tb, ports=[
        dict(port, peers=[peer for peer in port.get("peers", []) if still_cabled(port, peer)]) for port in tb["ports"]])
        for host, tb in facts.items()}


def discover(hosts: list[str], facts: dict) -> tuple[list[Link], list[Finding]]:
    """The direct cables between the hosts (sorted by cable), and warnings about what else the ports see."""
    owner = {port["domain_uuid"]: (host, port) for host in hosts for port in facts[host]["ports"]}
    links: dict[Cable, Link] = {}
    found = []
    for host in hosts:
        for port in facts[host]["ports"]:
            for peer in port.get("peers", []):
                peer_host, peer_port = owner.get(peer["domain_uuid"], (None, None))
                if peer_host == host:
                    continue
                if not peer["direct"]:
                    dock = next((d["name"] for d in port.get("devices", []) if d.get("depth") == 1), None)
                    reached = peer_host or f"a {peer.get('name') or 'Mac'} outside the inventory"
                    what = (f"{hardware_port(port['receptacle'])} reaches {reached} through a dock or hub "
                            f"({dock or 'unnamed'}), not a direct cable")
                    fix = "cable them directly: only a direct cable carries RDMA and fabric addresses"
                    found.append(Finding(
                        "dock", found=what, expected="a direct cable", fix=fix, ports=(Port(host, port["receptacle"]),),
                        gap=tuple(sorted((host, peer_host))) if peer_host else (), note=f"via {dock or 'a dock'}"))
                elif peer_host is None:
                    what = (f"{hardware_port(port['receptacle'])} is cabled to a {peer.get('name') or 'Mac'} "
                            f"({peer.get('model')}) outside the inventory")
                    found.append(Finding("outside", found=what, expected="a Mac of the inventory",
                                         fix="it is not part of the fabric", ports=(Port(host, port["receptacle"]),)))
                else:
                    a, b = sorted([End(Port(host, port["receptacle"]), port["device"]),
                                   End(Port(peer_host, peer_port["receptacle"]), peer_port["device"])],
                                  key=lambda e: e.port)
                    speed = min(port["speed_gbps"], peer_port["speed_gbps"])
                    links.setdefault(Cable(a.port, b.port), Link(a, b, speed))
    return [links[cable] for cable in sorted(links, key=lambda c: c.key)], found

"""The cluster model: what a converge judged, kept on the controller for every later reader (docs/fabric.md).

One typed, versioned record, ``cluster.json`` in the output folder, written by the fabric with the hostfiles
in one generation (plugin_utils.storage.outputs): the Macs with their model and Thunderbolt ports, every cable with
both ends and their addresses (its /30 and each end's address), the address pool, the backend and why, and
the findings. It replaces the address ledger ``fabric-addresses.json`` (cable text -> /30): a folder that
has only the old ledger is read from it once, each cable keeping its /30. The audit, the run record,
verify, the moved-cable check and the CLI read it instead of rebuilding both ends' addresses.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import KINDS, Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import CablePlanError, parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import PREFIX, Cable, End, Link, Port

VERSION = 1
MODEL_FILE = "cluster.json"
LEGACY_FILE = "fabric-addresses.json"  # the address ledger of earlier versions: read, never written


@dataclass(frozen=True)
class PortModel:
    """One Thunderbolt port of a Mac as its facts showed it."""

    port: Port
    device: str | None  # its network device (en2)
    rdma_device: str | None  # its RDMA device (rdma_en2), None without one
    speed_gbps: float | None


@dataclass(frozen=True)
class HostModel:
    name: str
    model: str | None  # the mlx_fleet_model key, None when undeclared
    ports: tuple[PortModel, ...] = ()


@dataclass
class ClusterModel:
    pool: str | None
    links: list[Link] = field(default_factory=list)
    hosts: list[HostModel] = field(default_factory=list)
    backend: str | None = None
    reason: str = ""
    findings: list[Finding] = field(default_factory=list)  # what the fabric found (dicts only in the file)
    version: int = VERSION

    def addresses(self) -> dict[Cable, str]:
        """cable -> its /30."""
        return {link.cable: link.network for link in self.links}

    def port_addresses(self) -> dict[Port, str]:
        """port -> its address/prefix."""
        return {end.port: end.interface for link in self.links for end in link.ends()}

    def to_dict(self) -> dict:
        """As JSON keeps it (tuples as lists), so it reads back equal."""
        data = asdict(self)
        data["links"] = [_link_dict(link) for link in self.links]
        data["findings"] = [finding.to_dict() for finding in self.findings]
        data["hosts"] = [{"name": h.name, "model": h.model, "ports": [_port_dict(p) for p in h.ports]} for h in self.hosts]
        return json.loads(json.dumps(data))


def _port_dict(port: PortModel) -> dict:
    """A port as cluster.json keeps it, under its Mac: its number, devices and speed."""
    return {"receptacle": port.port.receptacle, "device": port.device, "rdma_device": port.rdma_device,
            "speed_gbps": port.speed_gbps}


def _link_dict(link: Link) -> dict:
    """A link as cluster.json keeps it: each end's host, port, device and address, the /30, the speed."""
    ends = {name: {"host": end.host, "port": end.receptacle, "device": end.device, "address": end.address}
            for name, end in (("a", link.a), ("b", link.b))}
    return {**ends, "network": link.network, "speed_gbps": link.speed_gbps,
            "cable": str(link.cable)}  # for a person reading the file; readers use the ends


def ends(network: str) -> tuple[str, str]:
    """The lower end's address and the other end's."""
    net = ipaddress.ip_network(network)
    return str(net.network_address + 1), str(net.network_address + 2)


def link(cable: Cable, network: str, *, devices: tuple[str | None, str | None] = (None, None),
         speed_gbps: float | None = None) -> Link:
    """A cable with its /30: the lower end takes .1, the other .2 (devices in the cable's a, b order)."""
    low, high = cable.key
    device = dict(zip((cable.a, cable.b), devices))
    first, second = ends(network)
    return Link(End(low, device[low], first), End(high, device[high], second), speed_gbps,
                str(ipaddress.ip_network(network)))


def _link_from(data: dict) -> Link:
    a, b = (End(Port(str(e["host"]), int(e["port"])), e.get("device"), str(e["address"])) for e in (data["a"], data["b"]))
    network = ipaddress.IPv4Network(data["network"])
    if network.prefixlen != PREFIX or [a.address, b.address] != list(ends(str(network))):
        raise ValueError(f"link {Cable(a.port, b.port)}: its ends are not the two addresses of {network}")
    return Link(a, b, data.get("speed_gbps"), str(network))


def from_dict(data: dict) -> ClusterModel:
    if not isinstance(data, dict) or not isinstance(data.get("version"), int):
        raise ValueError("no version")
    if data["version"] > VERSION:
        raise ValueError(f"version {data['version']} is newer than this mlx-fleet's ({VERSION}); update mlx-fleet")
    hosts = [HostModel(h["name"], h.get("model"), tuple(
        PortModel(Port(h["name"], int(p["receptacle"])), p.get("device"), p.get("rdma_device"), p.get("speed_gbps"))
        for p in h.get("ports", []))) for h in data.get("hosts", [])]
    # A finding of a kind this mlx-fleet does not know (a newer file's, or an older fabric's) is left out.
    findings = [Finding.from_dict(f) for f in data.get("findings", []) if f.get("kind") in KINDS]
    return ClusterModel(data.get("pool"), [_link_from(item) for item in data.get("links", [])], hosts,
                        data.get("backend"), data.get("reason", ""), findings, data["version"])


def _from_ledger(data: dict) -> ClusterModel:
    """The model an old address ledger (``{"pool": ..., "cables": {"a:1 -- b:2": "/30"}}``) gives: its cables
    with both ends' addresses. The one place a cable text is read outside the inventory: the ledger is ours."""
    cables = data["cables"]
    if not isinstance(cables, dict) or not all(isinstance(v, str) for v in cables.values()):
        raise ValueError("cables is not a map of cable to network")
    links = []
    for text, network in cables.items():
        try:
            links.append(link(parse_cable(text), network))
        except (CablePlanError, ValueError):
            continue  # a damaged entry is simply no reference: the cable gets a /30 afresh
    pool = data.get("pool")
    return ClusterModel(pool if isinstance(pool, str) else None, sorted(links, key=lambda item: item.cable.key))


def coerce(previous: ClusterModel | dict[Cable, str] | None) -> ClusterModel | None:
    """A model as given, or the one a cables map (cable -> its /30, as a fabric's addresses) gives."""
    if previous is None or isinstance(previous, ClusterModel):
        return previous
    return ClusterModel(None, sorted((link(cable, network) for cable, network in previous.items()),
                                     key=lambda item: item.cable.key))


def read_model(directory: str | Path) -> ClusterModel | None:
    """The model of the last converge in the output folder (from the old address ledger when that is all
    there is); None when there is neither. Raises ValueError for a damaged file."""
    directory = Path(directory)
    for name, reader in ((MODEL_FILE, from_dict), (LEGACY_FILE, _from_ledger)):
        path = directory / name
        if not path.exists():
            continue
        try:
            return reader(load_json(path.read_text()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}: not a {name} ({exc}); remove it to assign the addresses afresh") from None
    return None


def last_links(directory: str | Path) -> list[Link]:
    """The cables of the last converge with both ends' addresses (the last good state); [] without one.
    A stable name for readers outside the fabric (watch, verify)."""
    model = read_model(directory)
    return list(model.links) if model else []


def read_pool(directory: str | Path) -> str | None:
    """The pool the last converge's cables came from; None without one (or a damaged file: read_model says so)."""
    try:
        model = read_model(directory)
    except ValueError:
        return None
    return model.pool if model else None

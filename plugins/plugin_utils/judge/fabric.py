"""The Thunderbolt fabric, judged on the controller (docs/fabric.md section 2).

From every Mac's ``mlx_fleet_thunderbolt`` fact: the cables (fabric_discovery), checked against
the cable plan (fabric_plan); the backend (fabric_backend); a stable /30 per cable and each Mac's
port addresses (fabric_addresses); the hostfiles mlx.launch reads (hostfile), equal to what
``mlx.distributed_config`` writes for the same cables; and a picture of it all, faults in red
(fabric_picture). Pure Python: action plugins are thin wrappers around it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model import cluster as cluster_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import addresses as fabric_addresses
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import backend as fabric_backend
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import picture as fabric_picture
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import against_plan as fabric_plan
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, CablePlanError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import (
    LEGACY_FILE, MODEL_FILE, ClusterModel, HostModel, PortModel)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.addresses import PortConfig
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import Link, discover
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.hostfile import Hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import resolve_keys


@dataclass
class Fabric:
    hosts: list[str]  # inventory (rank) order
    links: list[Link]  # sorted by cable
    findings: list[Finding]  # the cable plan against the cables found
    backend: str | None  # None when no backend can run on these cables
    why: fabric_backend.Why  # why this backend (or why none), as data: always said, auto never silent
    errors: list[str]
    cautions: list[Finding]  # what is wrong yet leaves a hostfile possible
    ip_pool: str
    addresses: dict[Cable, str]  # cable -> its /30 (the model keeps the links with both ends' addresses)
    network: dict[str, list[PortConfig]]  # per host, by port number
    hostfile: Hostfile | None  # None when there are errors
    ring_hostfile: Hostfile | None  # None when there are errors or no ring
    dot: str
    # With no cable plan: what moved, was unplugged or is new since the last converge's cables (None: no reference).
    rewired: fabric_plan.Rewiring | None
    model: ClusterModel  # what cluster.json keeps

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def reason(self) -> str:
        return self.why.line

    @property
    def changes(self) -> list[str]:
        return fabric_plan.change_lines(self.rewired) if self.rewired else []

    @property
    def warnings(self) -> list[str]:
        return [f.line for f in self.cautions]


def build_fabric(facts: dict, macos: dict, *, models: dict | None = None, cables: list | None = None,
                 backend: str = defaults.BACKEND, ip_pool: str = defaults.IP_POOL,
                 previous: ClusterModel | dict[str, str] | None = None,
                 management_ips: dict | None = None, envs: list[str] | None = None) -> Fabric:
    """Judge the fabric from ``{host: mlx_fleet_thunderbolt}`` in inventory order.

    macos: host -> mlx_fleet_macos, for the RDMA judgement (plugin_utils.rdma.readiness) the backend follows;
    models: host -> mlx_fleet_model key (undeclared ones identified from macos); cables: mlx_fleet_cables (None: no plan); previous:
    the last converge's model (cluster_model.read_model; an old ledger's cables map is read as one);
    management_ips: host -> the en0/en1 address
    jaccl hostfiles list (as mlx.distributed_config does); envs: NAME=value strings.
    """
    hosts = list(facts)
    models = resolve_keys(hosts, models or {}, macos)
    previous = cluster_model.coerce(previous)
    pool = str(ipaddress.IPv4Network(ip_pool))  # inventory_check has vetted it; garbage raises ValueError
    links, seen = discover(hosts, facts)

    plan: list[Cable] = []
    findings: list[Finding] = []
    plan_errors: list[Finding] = []
    rewired = None
    if cables is None and previous and previous.links:
        # The last converge's cables between the hosts (a Mac no longer in the inventory took its cables along).
        rewired = fabric_plan.rewiring(
            [link.cable for link in previous.links if {link.a.host, link.b.host} <= set(hosts)],
            [link.cable for link in links])
    if cables is not None:
        try:
            plan = fabric_plan.read_plan(cables, hosts, facts, models)
        except CablePlanError as exc:
            plan_errors.append(Finding("plan", found=str(exc)))
        else:
            findings = fabric_plan.compare(plan, links, models)

    nodes = rdma.classify_cluster(macos, facts, links, models=models)
    choice = fabric_backend.choose(backend, hosts, facts, links, carriers=rdma.carriers(nodes, links), plan=plan,
                                   models=models)
    cautions = fabric_backend.warnings(
        choice.backend or (backend if backend in fabric_backend.RDMA_BACKENDS else None),
        hosts, facts, models, links, choice.ring)

    address_errors: list[Finding] = []
    try:
        addresses, network = _addressed(hosts, links, pool, previous)
    except ValueError as exc:
        address_errors.append(Finding("addresses", found=str(exc)))
        addresses, network = {}, {}

    everything = seen + plan_errors + findings + choice.findings + cautions + address_errors
    errors = list(dict.fromkeys(f.line for f in everything if f.fault))  # a swap: one line for two cables
    hostfile_data = ring_hostfile = None
    if not errors:
        hostfile_data = hostfile.render(choice.backend, hosts, choice.pairs, choice.ring, addresses,
                                        management_ips or {}, envs or [])
        if choice.ring:
            ring_hostfile = hostfile.render("ring", hosts, choice.pairs, choice.ring, addresses, {}, envs or [])
    model = ClusterModel(
        pool, [cluster_model.link(link.cable, addresses[link.cable], devices=(link.a.device, link.b.device),
                                  speed_gbps=link.speed_gbps) for link in links if link.cable in addresses],
        [_host(host, facts[host], models.get(host)) for host in hosts], choice.backend, choice.reason, everything)
    return Fabric(hosts, links, findings, choice.backend, choice.why, errors, seen + cautions, pool, addresses,
                  network, hostfile_data, ring_hostfile,
                  fabric_picture.dot(hosts, models, links, addresses, choice.reason, everything), rewired, model)


def _host(name: str, thunderbolt: dict, model: str | None) -> HostModel:
    return HostModel(name, model, tuple(
        PortModel(Port(name, p["receptacle"]), p.get("device"), p.get("rdma_device"), p.get("speed_gbps"))
        for p in thunderbolt.get("ports", [])))


def _addressed(hosts: list[str], links: list[Link], pool: str,
               previous: ClusterModel | None) -> tuple[dict[Cable, str], dict[str, list[PortConfig]]]:
    """Each cable's /30 (kept from `previous` where it can be) and each host's port configs."""
    addresses = fabric_addresses.assign_addresses([link.cable for link in links], pool,
                                                  previous.addresses() if previous else {})
    return addresses, fabric_addresses.port_configs(hosts, links, addresses)


def planned_network(facts: dict, *, ip_pool: str = defaults.IP_POOL,
                    previous: ClusterModel | dict[str, str] | None = None) -> dict[str, list[PortConfig]]:
    """Per host, the ports the network step will address, as build_fabric plans them from the same
    facts (``{host: mlx_fleet_thunderbolt}``), without judging the rest: what the preflight needs to
    refuse a plan that would cut a Mac off before anything changes. ValueError when the pool runs out."""
    hosts = list(facts)
    links, dummy = discover(hosts, facts)
    return _addressed(hosts, links, str(ipaddress.IPv4Network(ip_pool)), cluster_model.coerce(previous))[1]


def cable_speeds(links: list[Link]) -> dict[str, float]:
    """The cables found as the fabric's result shows them to a person: each cable's text to its speed."""
    return {str(link): link.speed_gbps for link in links}


def cable_ends(links: list[Link]) -> list[list]:
    """The cables found as data, as the fabric's result carries them to the write guard: each cable's ends."""
    return [link.cable.ports for link in links]


def addresses_result(addresses: dict[Cable, str]) -> dict[str, str]:
    """Each cable's /30 as a result carries it, for a person reading it: by the cable's text (JSON's keys are
    text; a reader takes the model's links)."""
    return {str(cable): network for cable, network in addresses.items()}


def bridges_turned_off(network_results: dict[str, dict | None]) -> list[str]:
    """The Macs (in the order given) whose network step turned their Thunderbolt Bridge service off, or in
    check mode would: by the networksetup calls it reports (thunderbolt_network's RETURN)."""
    off = []
    for host, result in network_results.items():
        service = ((result or {}).get("bridge") or {}).get("service")
        if service and ["-setnetworkserviceenabled", service, "off"] in ((result or {}).get("commands") or []):
            off.append(host)
    return off


@dataclass
class Publication:
    """What write_outputs writes, as the fabric's result carries it to the step that publishes it
    (mlx_fleet.cluster.fabric_publish): the same attributes as a Fabric's."""

    dot: str
    errors: list[str]
    hostfile: Hostfile | None
    ring_hostfile: Hostfile | None
    model: ClusterModel

    @classmethod
    def of(cls, fabric: Fabric) -> Publication:
        return cls(fabric.dot, fabric.errors, fabric.hostfile, fabric.ring_hostfile, fabric.model)

    def to_dict(self) -> dict:
        return {"dot": self.dot, "errors": self.errors, "hostfile": self.hostfile and self.hostfile.to_json(),
                "ring_hostfile": self.ring_hostfile and self.ring_hostfile.to_json(), "model": self.model.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> Publication:
        def typed(found) -> Hostfile | None:
            return found and Hostfile.from_json(found)

        return cls(data["dot"], list(data["errors"]), typed(data["hostfile"]), typed(data["ring_hostfile"]),
                   cluster_model.from_dict(data["model"]))


@dataclass
class Written:
    paths: list[Path]
    skipped: list[str]  # one line per file left alone, and why
    changed: bool  # a hostfile or the cluster model changed (the picture is a report of what was read)


def write_outputs(directory: str | Path, fabric: Fabric | Publication, *, hostfiles: bool = True) -> Written:
    """The picture always (a broken fabric is when it is needed most); hostfile.json,
    hostfile-ring.json and cluster.json only when hostfiles and the fabric has no errors,
    so a failed run leaves the last good ones in place."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written, skipped = fabric_picture.write(directory, fabric.dot)
    if not hostfiles:
        return Written(written, skipped, False)
    if fabric.errors:
        skipped.append(f"{HOSTFILE}, {RING_HOSTFILE}, {MODEL_FILE}: left as they were "
                       f"({len(fabric.errors)} error{'s' if len(fabric.errors) != 1 else ''})")
        return Written(written, skipped, False)
    # Check both hostfiles before replacing either, so the files on disk stay one set.
    for checked in (fabric.hostfile, fabric.ring_hostfile):
        if checked:
            hostfile.Hostfile.from_json(checked.to_json())
    changed = atomic_write_json(directory / MODEL_FILE, fabric.model.to_dict())
    written.append(directory / MODEL_FILE)
    if (directory / LEGACY_FILE).exists():  # the old ledger, read once: the model replaces it
        (directory / LEGACY_FILE).unlink()
        changed = True
    if fabric.ring_hostfile:
        changed = fabric.ring_hostfile.write(directory / RING_HOSTFILE) or changed
        written.append(directory / RING_HOSTFILE)
    elif (directory / RING_HOSTFILE).exists():
        (directory / RING_HOSTFILE).unlink()
        changed = True
    changed = fabric.hostfile.write(directory / HOSTFILE) or changed
    written.append(directory / HOSTFILE)
    return Written(written, skipped, changed)

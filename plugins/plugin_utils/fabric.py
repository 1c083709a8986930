"""The Thunderbolt fabric, judged on the controller (docs/fabric.md section 2).

From every Mac's ``mlx_fleet_thunderbolt`` fact: the cables, checked against the cable plan;
the backend; a stable /30 per cable and each Mac's port addresses; the hostfiles mlx.launch
reads, equal (up to IP numbering) to what ``mlx.distributed_config`` writes for the same
cables; and a picture. Pure Python: action plugins are thin wrappers around it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cableplan import Cable, CablePlanError, Port, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.inventory import DEFAULT_IP_POOL
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import MODELS, Model

BACKENDS = ("jaccl", "jaccl-ring", "ring", "auto")
RDMA_BACKENDS = ("jaccl", "jaccl-ring")
FULL_SPEED_GBPS = 80  # a Thunderbolt 5 link
PREFIX = 30  # one /30 per cable: network, the two ends, broadcast
# Beyond this many hosts the cheapest-ring search (exponential) gives way to inventory order.
RING_SEARCH_LIMIT = 12
# Steps the search for a ring through every host may take before it gives up (a fraction of a second).
RING_SEARCH_STEPS = 20_000

HOSTFILE = "hostfile.json"
RING_HOSTFILE = "hostfile-ring.json"
ADDRESSES_FILE = "fabric-addresses.json"
DOT_FILE = "fabric.dot"
SVG_FILE = "fabric.svg"


@dataclass(frozen=True)
class End:
    """One end of a cable: a Mac's Thunderbolt port and its network device."""

    host: str
    port: int
    device: str


@dataclass(frozen=True)
class Link:
    """A direct Mac-to-Mac cable found on the ports; ``a`` is the lower end (cableplan.Port order)."""

    a: End
    b: End
    speed_gbps: float

    @property
    def cable(self) -> Cable:
        return Cable(Port(self.a.host, self.a.port), Port(self.b.host, self.b.port))

    def __str__(self) -> str:
        return str(self.cable)

    def end(self, host: str) -> End:
        return self.a if self.a.host == host else self.b


@dataclass(frozen=True)
class Finding:
    """The cabling against the plan. ``cable`` is the plan's cable for missing and wrong port,
    the cable found for extra and slow; ``fault`` findings are errors too."""

    kind: str  # "missing" | "extra" | "wrong port" | "slow"
    cable: str
    message: str
    fault: bool


@dataclass(frozen=True)
class PortConfig:
    """What thunderbolt_network sets on one cabled port of a Mac."""

    port: int
    hardware_port: str
    device: str
    address: str
    prefix: int
    peer_host: str
    peer_port: int
    peer_address: str


@dataclass
class Fabric:
    hosts: list[str]  # inventory (rank) order
    links: list[Link]  # sorted by cable
    findings: list[Finding]
    backend: str | None  # None when no backend can run on these cables
    reason: str  # why this backend (or why none): always said, auto never silent
    errors: list[str]
    warnings: list[str]
    ip_pool: str
    addresses: dict[str, str]  # cable "a:1 -- b:2" -> its /30, what fabric-addresses.json keeps
    network: dict[str, list[PortConfig]]  # per host, by port number
    hostfile: dict | None  # None when there are errors
    ring_hostfile: dict | None  # None when there are errors or no ring
    dot: str

    @property
    def ok(self) -> bool:
        return not self.errors


def _gbps(speed: float) -> str:
    return f"{speed:g} Gb/s"


def _tb(host: str, port: int) -> str:
    return f"{host} Thunderbolt {port}"


class _Problems:
    """What the picture draws in red."""

    def __init__(self) -> None:
        self.links: dict[str, list[str]] = {}  # cable -> what is wrong with it
        self.hosts: set[str] = set()
        self.edges: dict[tuple[str, str, str], str] = {}  # (host, host, label) -> style, not cables

    def flag(self, cable: object, note: str) -> None:
        self.links.setdefault(str(cable), []).append(note)


# --- the cabling graph ----------------------------------------------------------------------------


def _discover(hosts: list[str], facts: dict, problems: _Problems) -> tuple[list[Link], list[str]]:
    owner = {port["domain_uuid"]: (host, port) for host in hosts for port in facts[host]["ports"]}
    links: dict[tuple[Port, Port], Link] = {}
    warnings = []
    for host in hosts:
        for port in facts[host]["ports"]:
            for peer in port.get("peers", []):
                peer_host, peer_port = owner.get(peer["domain_uuid"], (None, None))
                if peer_host == host:
                    continue
                if not peer["direct"]:
                    dock = next((d["name"] for d in port.get("devices", []) if d.get("depth") == 1), None)
                    reached = peer_host or f"a {peer.get('name') or 'Mac'} outside the inventory"
                    warnings.append(
                        f"{host}: Thunderbolt {port['receptacle']} reaches {reached} through a dock or hub "
                        f"({dock or 'unnamed'}), not a direct cable; cable them directly: only a direct "
                        "cable carries RDMA and fabric addresses")
                    if peer_host:
                        pair = sorted((host, peer_host))
                        problems.edges[(pair[0], pair[1], f"via {dock or 'a dock'}")] = "dotted"
                elif peer_host is None:
                    warnings.append(
                        f"{host}: Thunderbolt {port['receptacle']} is cabled to a {peer.get('name') or 'Mac'} "
                        f"({peer.get('model')}) outside the inventory; it is not part of the fabric")
                else:
                    ends = sorted([End(host, port["receptacle"], port["device"]),
                                   End(peer_host, peer_port["receptacle"], peer_port["device"])],
                                  key=lambda e: Port(e.host, e.port))
                    speed = min(port["speed_gbps"], peer_port["speed_gbps"])
                    key = (Port(ends[0].host, ends[0].port), Port(ends[1].host, ends[1].port))
                    links.setdefault(key, Link(ends[0], ends[1], speed))
    return [links[key] for key in sorted(links)], warnings


def _model(models: dict, host: str) -> Model | None:
    return MODELS.get(models.get(host))


# --- against the plan -----------------------------------------------------------------------------


def _move(plan: Cable, found: Cable) -> str:
    moves = []
    for host in sorted({plan.a.host, plan.b.host}):
        want = plan.a if plan.a.host == host else plan.b
        have = found.a if found.a.host == host else found.b
        if want != have:
            moves.append((host, have.number, want.number))
    first, *other = moves
    text = f"move the cable in {_tb(first[0], first[1])} to Thunderbolt {first[2]}"
    for host, have, want in other:
        text += f", and its other end in {_tb(host, have)} to Thunderbolt {want}"
    return text


def _compare_plan(plan: list[Cable], links: list[Link], models: dict, problems: _Problems) -> list[Finding]:
    planned = {Cable(*c.key) for c in plan}
    found = {link.cable: link for link in links}
    missing = sorted(planned - found.keys(), key=lambda c: c.key)
    extra = sorted(found.keys() - planned, key=lambda c: c.key)
    findings = []
    # The same two hosts cabled on other ports: a wrong port, and the move that fixes it. A
    # cable sharing an end with the planned one is its likeliest match.
    for cable in list(missing):
        pair = {cable.a.host, cable.b.host}
        candidates = [f for f in extra if {f.a.host, f.b.host} == pair]
        candidates.sort(key=lambda f: not ({f.a, f.b} & {cable.a, cable.b}))
        if candidates:
            wrong = candidates[0]
            missing.remove(cable)
            extra.remove(wrong)
            problems.flag(wrong, "wrong port")
            findings.append(Finding("wrong port", str(cable),
                                    f"wrong port: {cable} is cabled as {wrong}; {_move(cable, wrong)}", True))
    for cable in missing:
        problems.edges[(cable.a.host, cable.b.host, f"missing {cable}")] = "dashed"
        findings.append(Finding("missing", str(cable),
                                f"missing cable {cable}: connect {_tb(cable.a.host, cable.a.number)} to "
                                f"{_tb(cable.b.host, cable.b.number)}", True))
    for cable in extra:
        problems.flag(cable, "extra")
        findings.append(Finding("extra", str(cable),
                                f"extra cable {cable}: not in the cable plan (mlx_fleet_cables); "
                                "unplug it or add it to the plan", True))
    for link in links:
        if link.speed_gbps >= FULL_SPEED_GBPS:
            continue
        problems.flag(link, "slow")
        ends = [(e.host, _model(models, e.host)) for e in (link.a, link.b)]
        slow_end = next(((host, m) for host, m in ends if m and m.tb_generation < 5), None)
        if slow_end:
            # A Thunderbolt 4 Mac: as fast as it gets; the JACCL warning says what it costs.
            findings.append(Finding("slow", str(link),
                                    f"slow cable {link}: {_gbps(link.speed_gbps)} because {slow_end[0]} "
                                    f"({slow_end[1].key}) is Thunderbolt 4", False))
        else:
            findings.append(Finding("slow", str(link),
                                    f"slow cable {link}: {_gbps(link.speed_gbps)} where both ends do "
                                    f"{_gbps(FULL_SPEED_GBPS)}; replace it with a Thunderbolt 5 cable", True))
    return findings


# --- topology -------------------------------------------------------------------------------------


def _pair_links(hosts: list[str], links: list[Link]) -> dict[tuple[int, int], list[Link]]:
    """(i, j) -> the cables between ranks i and j, both ways round.

    Ordered as mlx.distributed_config numbers them: by the lower rank's device name (it walks
    each host's ports sorted by interface name), so multi-cable rdma lists match its own.
    """
    rank = {host: i for i, host in enumerate(hosts)}
    pairs: dict[tuple[int, int], list[Link]] = {}
    for link in links:
        i, j = sorted((rank[link.a.host], rank[link.b.host]))
        pairs.setdefault((i, j), []).append(link)
    for (i, j), found in list(pairs.items()):
        found.sort(key=lambda link: link.end(hosts[i]).device)
        pairs[j, i] = found
    return pairs


def _find_ring(n: int, pairs: dict) -> list[int] | None:
    """The ring mlx.distributed_config picks: the first ring through every host that a
    depth-first search from rank 0, trying lower ranks first, closes. The search gives up
    (no ring) after RING_SEARCH_STEPS steps, so a large cabling never stalls the run."""
    if n < 2:
        return None
    neighbours = [[j for j in range(n) if (i, j) in pairs] for i in range(n)]
    if n > 2 and any(len(found) < 2 for found in neighbours):
        return None  # a host cabled to fewer than two others is on no ring
    path, seen, steps = [0], {0}, [RING_SEARCH_STEPS]

    def search() -> bool:
        steps[0] -= 1
        if steps[0] < 0:
            return False
        node = path[-1]
        for j in neighbours[node]:
            if j == 0 and len(path) == n:
                return True
            if j not in seen:
                path.append(j)
                seen.add(j)
                if search():
                    return True
                seen.remove(path.pop())
        return False

    return path if search() else None


def _cheapest_ring(n: int, pairs: dict) -> list[int]:
    """The ring through every host that needs the fewest new cables (ties: lower ranks first)."""
    if n > RING_SEARCH_LIMIT:
        return list(range(n))

    def cost(i: int, j: int) -> int:
        return 0 if (i, j) in pairs else 1

    best: dict[tuple[int, int], tuple[int, tuple[int, ...]]] = {(1, 0): (0, (0,))}
    for mask in range(1, 1 << n, 2):
        for last in range(n):
            entry = best.get((mask, last))
            if entry is None:
                continue
            for j in range(n):
                if not mask >> j & 1:
                    candidate = (entry[0] + cost(last, j), entry[1] + (j,))
                    key = (mask | 1 << j, j)
                    if key not in best or candidate < best[key]:
                        best[key] = candidate
    full = (1 << n) - 1
    return list(min((c + cost(last, 0), p) for (mask, last), (c, p) in best.items() if mask == full)[1])


def _ring_gaps(ring: list[int], pairs: dict) -> list[tuple[int, int]]:
    gaps = []
    for i, node in enumerate(ring):
        pair = tuple(sorted((node, ring[(i + 1) % len(ring)])))
        if pair not in pairs and pair not in gaps:
            gaps.append(pair)
    return gaps


class _PortPicker:
    """Free ports to name in 'connect X to Y', each named once."""

    def __init__(self, facts: dict, links: list[Link], plan: list[Cable], models: dict, rdma: bool):
        self.facts, self.plan, self.models, self.rdma = facts, plan, models, rdma
        self.taken = {(e.host, e.port) for link in links for e in (link.a, link.b)}

    def _free(self, host: str) -> int | None:
        model = _model(self.models, host)
        broken = model.rdma_broken_ports if model and self.rdma else ()
        free = [p for p in self.facts[host]["ports"] if (host, p["receptacle"]) not in self.taken]
        # Empty ports first, ports RDMA cannot use last.
        free.sort(key=lambda p: (p["connected"], p["receptacle"] in broken, p["receptacle"]))
        return free[0]["receptacle"] if free else None

    def connect(self, a: str, b: str) -> str:
        planned = next((c for c in self.plan if {c.a.host, c.b.host} == {a, b}
                        and (c.a.host, c.a.number) not in self.taken
                        and (c.b.host, c.b.number) not in self.taken), None)
        texts = []
        for host in (a, b):
            number = (planned.a if planned.a.host == host else planned.b).number if planned else self._free(host)
            if number is None:
                texts.append(f"{host} (no free Thunderbolt port: free one first)")
            else:
                self.taken.add((host, number))
                texts.append(_tb(host, number))
        return f"connect {texts[0]} to {texts[1]}"


def _choose_backend(requested: str, hosts: list[str], facts: dict, pairs: dict, picker_for: Callable,
                    problems: _Problems) -> tuple[str | None, str, list[int] | None, list[str]]:
    """(backend, reason, ring, errors)."""
    n = len(hosts)
    ring = _find_ring(n, pairs)
    mesh_gaps = [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in pairs]
    no_rdma = [h for h in hosts if not facts[h].get("rdma_devices")]
    ring_text = " -> ".join(hosts[i] for i in ring) if ring else ""

    def gaps(prefix: str, missing: list[tuple[int, int]], rdma: bool) -> list[str]:
        picker = picker_for(rdma)
        out = []
        for i, j in missing:
            problems.edges[(hosts[i], hosts[j], "needed")] = "dashed"
            out.append(f"{prefix}: {hosts[i]} and {hosts[j]} are not cabled; {picker.connect(hosts[i], hosts[j])}")
        return out

    def rdma_errors(backend: str) -> list[str]:
        problems.hosts.update(no_rdma)
        return [f"{backend} needs RDMA on every host: {h} has no RDMA device (rdma_ctl status: "
                f"{'enabled' if facts[h].get('rdma_enabled') else 'disabled'}); enable it from macOS "
                "Recovery with 'rdma_ctl enable'" for h in no_rdma]

    if requested not in BACKENDS:
        return None, "no backend", None, [f"mlx_fleet_backend: {requested!r} is not one of {', '.join(BACKENDS)}"]
    if n < 2:
        return None, "no backend", None, [f"a Thunderbolt fabric needs at least 2 hosts, the inventory has {n}"]
    if requested == "jaccl":
        errors = gaps("jaccl needs a full mesh", mesh_gaps, True) + rdma_errors("jaccl")
    elif requested in ("jaccl-ring", "ring"):
        errors = [] if ring else gaps(f"{requested} needs a ring through all {n} hosts",
                                      _ring_gaps(_cheapest_ring(n, pairs), pairs), requested != "ring")
        if requested == "jaccl-ring":
            errors += rdma_errors("jaccl-ring")
    if requested != "auto":
        return ((None, f"{requested} was requested but cannot run here (see the errors)", None, errors) if errors
                else (requested, f"{requested} as requested (mlx_fleet_backend)", ring, []))
    # auto, as mlx.distributed_config decides: mesh + RDMA, ring + RDMA, ring.
    rdma_text = f"{', '.join(no_rdma)} {'has' if len(no_rdma) == 1 else 'have'} no RDMA"
    if not mesh_gaps and not no_rdma:
        return "jaccl", "auto chose jaccl: the cables form a full mesh and every host has RDMA", ring, []
    if ring and not no_rdma:
        i, j = mesh_gaps[0]
        return ("jaccl-ring", f"auto chose jaccl-ring: the cables form a ring ({ring_text}) but not a full mesh "
                f"({hosts[i]} and {hosts[j]} are not cabled), and every host has RDMA", ring, [])
    if ring:
        return "ring", f"auto chose ring: the cables form a ring ({ring_text}) but {rdma_text}", ring, []
    reason = f"auto found no backend: the cables form neither a full mesh nor a ring through all {n} hosts"
    return None, reason, None, gaps(f"auto: no ring through all {n} hosts",
                                    _ring_gaps(_cheapest_ring(n, pairs), pairs), False)


# --- addresses ------------------------------------------------------------------------------------


def preferred_slot(cable: str, slots: int) -> int:
    """A cable's own /30 slot in the pool: sha256 of its 'host:port -- host:port' text."""
    return int(hashlib.sha256(cable.encode()).hexdigest(), 16) % slots


def assign_addresses(cables: list[str], pool: str, previous: dict[str, str] | None = None) -> dict[str, str]:
    """cable -> its /30 (docs/fabric.md): previous assignments inside the pool are kept, a new
    cable takes its preferred slot or probes forward to the next free one. Cables not listed
    release their slot. Raises ValueError when the pool has too few /30 networks."""
    network = ipaddress.IPv4Network(pool)
    slots = network.num_addresses // 4
    if slots < len(cables):
        raise ValueError(f"mlx_fleet_ip_pool {network} holds {slots} /{PREFIX} networks for {len(cables)} "
                         "cables; use a larger pool")
    base = int(network.network_address)
    taken: dict[int, str] = {}
    for cable in sorted(cables):
        try:
            kept = ipaddress.ip_network((previous or {}).get(cable, ""))
        except ValueError:
            continue
        slot = (int(kept.network_address) - base) // 4
        if kept.version == 4 and kept.prefixlen == PREFIX and kept.subnet_of(network) and slot not in taken:
            taken[slot] = cable
    for cable in sorted(set(cables) - set(taken.values())):
        slot = preferred_slot(cable, slots)
        while slot in taken:
            slot = (slot + 1) % slots
        taken[slot] = cable
    return {cable: str(ipaddress.ip_network((base + 4 * slot, PREFIX))) for slot, cable in sorted(
        taken.items(), key=lambda item: item[1])}


def _ends(network: str) -> tuple[str, str]:
    """The lower end's address and the other end's."""
    net = ipaddress.ip_network(network)
    return str(net.network_address + 1), str(net.network_address + 2)


def _port_configs(hosts: list[str], links: list[Link], addresses: dict[str, str]) -> dict[str, list[PortConfig]]:
    network: dict[str, list[PortConfig]] = {host: [] for host in hosts}
    for link in links:
        addr_a, addr_b = _ends(addresses[str(link)])
        for end, addr, peer, peer_addr in ((link.a, addr_a, link.b, addr_b), (link.b, addr_b, link.a, addr_a)):
            network[end.host].append(PortConfig(end.port, f"Thunderbolt {end.port}", end.device, addr, PREFIX,
                                                peer.host, peer.port, peer_addr))
    for configs in network.values():
        configs.sort(key=lambda c: c.port)
    return network


# --- hostfiles ------------------------------------------------------------------------------------


def _rdma_entry(devices: list[str], count: int) -> str | list[str]:
    names = [f"rdma_{device}" for device in devices[:count]]
    return names[0] if count == 1 else names


def _hostfile(backend: str, hosts: list[str], pairs: dict, ring: list[int] | None, addresses: dict[str, str],
              management_ips: dict, envs: list[str]) -> dict:
    n = len(hosts)

    def devices(i: int, j: int) -> list[str]:
        return [link.end(hosts[i]).device for link in pairs[i, j]]

    def management(host: str) -> list[str]:
        return [management_ips[host]] if management_ips.get(host) else []

    if backend == "jaccl":
        count = min((len(pairs[i, j]) for i in range(n) for j in range(n) if i != j), default=1)
        entries = [{"ssh": hosts[i], "ips": management(hosts[i]),
                    "rdma": [None if i == j else _rdma_entry(devices(i, j), count) for j in range(n)]}
                   for i in range(n)]
    else:
        # Ring backends: ranks follow the ring, as the ring backend's neighbours are rank +-1.
        count = min(len(pairs[node, ring[k - 1]]) for k, node in enumerate(ring))
        entries = []
        for k, node in enumerate(ring):
            left, right = ring[k - 1], ring[(k + 1) % n]
            if backend == "jaccl-ring":
                rdma = [_rdma_entry(devices(node, other), count) if other in (left, right) else None
                        for other in ring]
                entries.append({"ssh": hosts[node], "ips": management(hosts[node]), "rdma": rdma})
            else:
                host = hosts[node]
                ips = [_ends(addresses[str(link)])[0 if link.a.host == host else 1]
                       for link in pairs[node, left][:count]]
                entries.append({"ssh": host, "ips": ips, "rdma": []})
    return {"backend": backend, "envs": list(envs), "hosts": entries}


def check_hostfile(data: dict) -> None:
    """Raise ValueError unless data is a hostfile mlx.launch can read."""
    if not isinstance(data, dict) or data.get("backend") not in ("jaccl", "jaccl-ring", "ring"):
        raise ValueError("hostfile: backend must be jaccl, jaccl-ring or ring")
    if not isinstance(data.get("envs"), list) or not all(isinstance(e, str) and "=" in e for e in data["envs"]):
        raise ValueError("hostfile: envs must be a list of NAME=value")
    hosts = data.get("hosts")
    if not isinstance(hosts, list) or not hosts:
        raise ValueError("hostfile: no hosts")
    for rank, host in enumerate(hosts):
        if not isinstance(host.get("ssh"), str) or not isinstance(host.get("ips"), list):
            raise ValueError(f"hostfile: rank {rank} needs ssh and ips")
        for ip in host["ips"]:
            ipaddress.ip_address(ip)
        rdma = host.get("rdma")
        if data["backend"] == "ring":
            if rdma != []:
                raise ValueError(f"hostfile: rank {rank}: a ring hostfile has no rdma devices")
            if not host["ips"]:
                raise ValueError(f"hostfile: rank {rank}: a ring hostfile needs the host's addresses")
        elif not isinstance(rdma, list) or len(rdma) != len(hosts) or rdma[rank] is not None:
            raise ValueError(f"hostfile: rank {rank}: rdma must list one entry per rank, null for itself")


# --- warnings that depend on the backend ----------------------------------------------------------


def _has_loop(hosts: list[str], links: list[Link]) -> bool:
    parent = {host: host for host in hosts}

    def root(host: str) -> str:
        while parent[host] != host:
            host = parent[host]
        return host

    for link in links:
        a, b = root(link.a.host), root(link.b.host)
        if a == b:
            return True
        parent[a] = b
    return False


def _backend_warnings(backend: str | None, hosts: list[str], facts: dict, models: dict, links: list[Link],
                      ring: list[int] | None, problems: _Problems) -> list[str]:
    warnings = []
    if backend in RDMA_BACKENDS:
        rank = {host: i for i, host in enumerate(hosts)}
        used = links
        if backend == "jaccl-ring" and ring:
            ring_pairs = {frozenset((node, ring[k - 1])) for k, node in enumerate(ring)}
            used = [link for link in links if frozenset((rank[link.a.host], rank[link.b.host])) in ring_pairs]
        for link in used:
            for end in (link.a, link.b):
                model = _model(models, end.host)
                if model and end.port in model.rdma_broken_ports:
                    problems.flag(link, f"no RDMA on {end.host} Thunderbolt {end.port}")
                    warnings.append(f"{end.host}: Thunderbolt {end.port} ({end.device}) is the {model.model_name} "
                                    f"port beside Ethernet, where RDMA never comes up; move the cable {link} "
                                    "to another port")
            if link.speed_gbps < FULL_SPEED_GBPS:
                problems.flag(link, "Thunderbolt 4 for JACCL")
                warnings.append(f"{link}: {_gbps(link.speed_gbps)} (Thunderbolt 4) on a {backend} link; JACCL "
                                "wants Thunderbolt 5 Macs and cables: Thunderbolt 4 Macs list rdma devices yet "
                                "fail to run it")
    if _has_loop(hosts, links):
        for host in hosts:
            bridge = facts[host].get("bridge") or {}
            if bridge.get("active"):
                problems.hosts.add(host)
                warnings.append(f"{host}: the Thunderbolt Bridge ({bridge.get('device', 'bridge0')}) is active "
                                "while the cables form a loop; it floods frames around the loop and breaks "
                                "RDMA setup: turn the Thunderbolt Bridge service off (thunderbolt_network does)")
    return warnings


# --- the picture ----------------------------------------------------------------------------------


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot(hosts: list[str], models: dict, links: list[Link], addresses: dict[str, str], reason: str,
         problems: _Problems) -> str:
    red = ", color=red, fontcolor=red"
    lines = ["graph fabric {", f'  graph [label={_q(reason)}, labelloc=t, fontname="Helvetica"];',
             '  node [shape=box, fontname="Helvetica"];', '  edge [fontname="Helvetica", fontsize=10];']
    for rank, host in enumerate(hosts):
        model = _model(models, host)
        label = f"{host}\n{model.key if model else 'model unknown'}\nrank {rank}"
        lines.append(f"  {_q(host)} [label={_q(label)}{red if host in problems.hosts else ''}];")
    for link in links:
        problem = problems.links.get(str(link), [])
        label = "\n".join(filter(None, [_gbps(link.speed_gbps), addresses.get(str(link))] + problem))
        lines.append(f"  {_q(link.a.host)} -- {_q(link.b.host)} [label={_q(label)}, "
                     f"taillabel={_q(f'TB{link.a.port} {link.a.device}')}, "
                     f"headlabel={_q(f'TB{link.b.port} {link.b.device}')}{red if problem else ''}];")
    for (a, b, label), style in problems.edges.items():
        lines.append(f"  {_q(a)} -- {_q(b)} [label={_q(label)}, style={style}{red}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- the whole fabric -----------------------------------------------------------------------------


def build_fabric(facts: dict, *, models: dict | None = None, cables: list | None = None, backend: str = "auto",
                 ip_pool: str = DEFAULT_IP_POOL, previous: dict[str, str] | None = None,
                 management_ips: dict | None = None, envs: list[str] | None = None) -> Fabric:
    """Judge the fabric from ``{host: mlx_fleet_thunderbolt}`` in inventory order.

    models: host -> mlx_fleet_model key; cables: mlx_fleet_cables (None: no plan); previous:
    the cables map of fabric-addresses.json; management_ips: host -> the en0/en1 address
    jaccl hostfiles list (as mlx.distributed_config does); envs: NAME=value strings.
    """
    hosts = list(facts)
    models = models or {}
    pool = str(ipaddress.IPv4Network(ip_pool))  # inventory_check has vetted it; garbage raises ValueError
    problems = _Problems()
    links, warnings = _discover(hosts, facts, problems)
    errors: list[str] = []

    plan: list[Cable] = []
    findings: list[Finding] = []
    if cables is not None:
        counts = {h: m.port_count if (m := _model(models, h)) else len(facts[h]["ports"]) for h in hosts}
        try:
            plan = parse_cables(cables, counts)
        except CablePlanError as exc:
            errors.append(str(exc))
        else:
            findings = _compare_plan(plan, links, models, problems)
            errors += [f.message for f in findings if f.fault]

    pairs = _pair_links(hosts, links)
    chosen, reason, ring, topology_errors = _choose_backend(
        backend, hosts, facts, pairs, lambda rdma: _PortPicker(facts, links, plan, models, rdma), problems)
    errors += topology_errors
    warnings += _backend_warnings(chosen or (backend if backend in RDMA_BACKENDS else None), hosts, facts,
                                  models, links, ring, problems)

    try:
        addresses = assign_addresses([str(link) for link in links], pool, previous)
        network = _port_configs(hosts, links, addresses)
    except ValueError as exc:
        errors.append(str(exc))
        addresses, network = {}, {}

    hostfile = ring_hostfile = None
    if not errors:
        hostfile = _hostfile(chosen, hosts, pairs, ring, addresses, management_ips or {}, envs or [])
        if ring:
            ring_hostfile = _hostfile("ring", hosts, pairs, ring, addresses, {}, envs or [])
    return Fabric(hosts, links, findings, chosen, reason, errors, warnings, pool,
                  addresses, network, hostfile, ring_hostfile,
                  _dot(hosts, models, links, addresses, reason, problems))


# --- files ----------------------------------------------------------------------------------------


def atomic_write_text(path: Path, text: str, check: Callable[[str], None] | None = None) -> None:
    """Write a temporary file beside path, check what it reads back, then rename it over path:
    a reader sees the old file or the complete new one, never a part."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if check:
            check(Path(temp).read_text())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | Path, data, validate: Callable[[object], None] | None = None) -> None:
    """Write data as JSON to path atomically; validate (raising ValueError) sees what was read back."""
    path = Path(path)

    def check(text: str) -> None:
        back = json.loads(text)
        if back != data:
            raise ValueError(f"{path}: the written file does not read back as the data")
        if validate:
            validate(back)

    atomic_write_text(path, json.dumps(data, indent=4) + "\n", check)


def read_addresses(path: str | Path) -> dict[str, str]:
    """The cables map of a fabric-addresses.json; empty when there is none yet."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        return dict(json.loads(path.read_text())["cables"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a fabric-addresses.json ({exc}); remove it to assign afresh") from exc


@dataclass
class Written:
    paths: list[Path]
    skipped: list[str]  # one line per file left alone, and why


def write_outputs(directory: str | Path, fabric: Fabric) -> Written:
    """fabric.dot and fabric.svg always; hostfile.json, hostfile-ring.json and fabric-addresses.json
    only when the fabric has no errors, so a failed run leaves the last good ones in place."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written, skipped = [], []
    atomic_write_text(directory / DOT_FILE, fabric.dot)
    written.append(directory / DOT_FILE)
    dot = shutil.which("dot")
    if dot is None:
        skipped.append(f"{SVG_FILE}: skipped, Graphviz 'dot' is not installed")
    else:
        svg = subprocess.run([dot, "-Tsvg"], input=fabric.dot, capture_output=True, text=True, check=False)
        if svg.returncode == 0:
            atomic_write_text(directory / SVG_FILE, svg.stdout)
            written.append(directory / SVG_FILE)
        else:
            why = (svg.stderr.strip().splitlines() or [f"exit status {svg.returncode}"])[0]
            skipped.append(f"{SVG_FILE}: skipped, dot failed: {why}")
    if fabric.errors:
        skipped.append(f"{HOSTFILE}, {RING_HOSTFILE}, {ADDRESSES_FILE}: left as they were "
                       f"({len(fabric.errors)} error{'s' if len(fabric.errors) != 1 else ''})")
        return Written(written, skipped)
    # Check both hostfiles before replacing either, so the files on disk stay one set.
    check_hostfile(fabric.hostfile)
    if fabric.ring_hostfile:
        check_hostfile(fabric.ring_hostfile)
    atomic_write_json(directory / ADDRESSES_FILE, {"pool": fabric.ip_pool, "cables": fabric.addresses})
    written.append(directory / ADDRESSES_FILE)
    if fabric.ring_hostfile:
        atomic_write_json(directory / RING_HOSTFILE, fabric.ring_hostfile, check_hostfile)
        written.append(directory / RING_HOSTFILE)
    else:
        (directory / RING_HOSTFILE).unlink(missing_ok=True)
    atomic_write_json(directory / HOSTFILE, fabric.hostfile, check_hostfile)
    written.append(directory / HOSTFILE)
    return Written(written, skipped)

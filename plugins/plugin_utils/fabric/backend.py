"""Which backend the cables allow, as mlx.distributed_config decides it, and the warnings that depend on it.

``jaccl`` needs a full mesh with RDMA on every host, ``jaccl-ring`` a ring with RDMA, ``ring`` a
ring; ``auto`` picks in that order and always says why. Which Macs and cables can carry RDMA is
not judged here but by ``plugin_utils.rdma.readiness`` (``carriers``), the judgement the RDMA line prints:
auto never picks an RDMA backend over a Mac or a cable that judgement says cannot carry it. A required topology that is not there is
one error per missing pair, naming the ports to connect.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding, join
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import FULL_SPEED_GBPS, gbps, model_of
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.graph import path_through
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Link, Port, hardware_port, port_name

HOSTFILE_BACKENDS = ("jaccl", "jaccl-ring", "ring")  # what a hostfile can name
BACKENDS = HOSTFILE_BACKENDS + ("auto",)  # what mlx_fleet_backend can be
RDMA_BACKENDS = ("jaccl", "jaccl-ring")
# Beyond this many hosts the cheapest-ring search (exponential) gives way to inventory order.
RING_SEARCH_LIMIT = 12
# Steps the search for a ring through every host may take before it gives up (a fraction of a second).
RING_SEARCH_STEPS = 20_000

Pairs = dict[tuple[int, int], list[Link]]


def pair_links(hosts: list[str], links: list[Link]) -> Pairs:
    """(i, j) -> the cables between ranks i and j, both ways round.

    Ordered as mlx.distributed_config numbers them: by the lower rank's device name (it walks
    each host's ports sorted by interface name), so multi-cable rdma lists match its own.
    """
    rank = {host: i for i, host in enumerate(hosts)}
    pairs: Pairs = {}
    for link in links:
        i, j = sorted((rank[link.a.host], rank[link.b.host]))
        pairs.setdefault((i, j), []).append(link)
    for (i, j), found in list(pairs.items()):
        found.sort(key=lambda link: link.end(hosts[i]).device)
        pairs[j, i] = found
    return pairs


def _find_ring(n: int, pairs: Pairs) -> list[int] | None:
    """The ring mlx.distributed_config picks: the first ring through every host that a
    depth-first search from rank 0, trying lower ranks first, closes. The search gives up
    (no ring) after RING_SEARCH_STEPS steps, so a large cabling never stalls the run."""
    if n < 2:
        return None
    neighbours = [[j for j in range(n) if (i, j) in pairs] for i in range(n)]
    if n > 2 and any(len(found) < 2 for found in neighbours):
        return None  # a host cabled to fewer than two others is on no ring
    return path_through(0, list(range(n)), lambda i, j: (i, j) in pairs, lambda last: (last, 0) in pairs,
                        steps=RING_SEARCH_STEPS)


def _cheapest_ring(n: int, pairs: Pairs) -> list[int]:
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


def _ring_gaps(ring: list[int], pairs: Pairs) -> list[tuple[int, int]]:
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
        self.taken = {e.port for link in links for e in link.ends()}

    def _free(self, host: str) -> int | None:
        model = model_of(self.models, host)
        broken = model.rdma_broken_ports if model and self.rdma else ()
        # A port with something plugged in (a drive, a dock, a Mac outside the cluster) is not free.
        free = [p for p in self.facts[host]["ports"]
                if Port(host, p["receptacle"]) not in self.taken and not p["connected"]]
        free.sort(key=lambda p: (p["receptacle"] in broken, p["receptacle"]))  # ports RDMA cannot use last
        return free[0]["receptacle"] if free else None

    def connect(self, a: str, b: str) -> str:
        planned = next((c for c in self.plan if {c.a.host, c.b.host} == {a, b}
                        and c.a not in self.taken and c.b not in self.taken), None)
        texts = []
        for host in (a, b):
            receptacle = planned.end(host).receptacle if planned else self._free(host)
            if receptacle is None:
                texts.append(f"{host} (no free Thunderbolt port: free one first)")
            else:
                self.taken.add(Port(host, receptacle))
                texts.append(port_name(Port(host, receptacle)))
        return f"connect {texts[0]} to {texts[1]}"


@dataclass
class Carriers:
    """What cannot carry RDMA now (plugin_utils.rdma.readiness.carriers judges it), each with why."""

    hosts: dict[str, str]  # host -> why it cannot ("cannot do RDMA (a Thunderbolt 4 Mac)")
    cables: dict[Cable, str]  # cable -> why it cannot
    refusals: dict[str, str]  # host -> why an explicit jaccl/jaccl-ring cannot run on it, with the fix


def broken_ends(link: Link, models: dict) -> list[tuple]:
    """(end, model) for each end of the cable on a port where its model's RDMA never comes up
    (the Mac Studio port beside Ethernet). models: host -> model key."""
    found = []
    for end in (link.a, link.b):
        model = model_of(models, end.host)
        if model and end.receptacle in model.rdma_broken_ports:
            found.append((end, model))
    return found


@dataclass(frozen=True)
class Why:
    """Why this backend, or why none, as data (``line`` says it): its rule, the backend requested or chosen,
    the number of hosts, the ring found (hosts in order), and what kept auto from a better backend: the mesh's
    first pair of hosts not cabled (``gap``), the hosts and cables that cannot carry RDMA, each with why."""

    rule: str  # a key of REASONS
    backend: str | None = None
    hosts: int = 0
    ring: tuple[str, ...] = ()
    gap: tuple[str, str] | None = None
    no_rdma: tuple[tuple[str, str], ...] = ()  # (host, why it cannot carry RDMA)
    unable: tuple[tuple[Cable, str], ...] = ()  # (cable, why it cannot carry RDMA)

    @property
    def line(self) -> str:
        ring = " -> ".join(self.ring)
        if self.rule == "ring-not-mesh":
            but = (f"not a full mesh ({self.gap[0]} and {self.gap[1]} are not cabled)" if self.gap
                   else f"not a full mesh of RDMA links ({_unable(self.unable[:1])})")
        else:
            but = _named(dict(self.no_rdma)) or _unable(self.unable)
        return REASONS[self.rule].format(backend=self.backend, hosts=self.hosts, ring=ring, but=but)


REASONS = {  # the sentence of each rule of Why
    "refused": "no backend",
    "requested": "{backend} as requested (mlx_fleet_backend)",
    "cannot-run": "{backend} was requested but cannot run here (see the errors)",
    "mesh": "auto chose jaccl: the cables form a full mesh and every host and cable can carry RDMA",
    "ring-not-mesh": "auto chose jaccl-ring: the cables form a ring ({ring}) but {but}, and every host and cable of "
                     "the ring can carry RDMA",
    "ring-no-rdma": "auto chose ring: the cables form a ring ({ring}) but {but}",
    "none": "auto found no backend: the cables form neither a full mesh nor a ring through all {hosts} hosts",
}


def _unable(unable) -> str:
    return "; ".join(f"{cable} cannot carry RDMA ({why})" for cable, why in unable)


@dataclass
class Choice:
    backend: str | None  # None when no backend can run on these cables
    why: Why  # why this backend (or why none): always said, auto never silent
    ring: list[int] | None  # ranks round the ring mlx.distributed_config would pick, None without one
    pairs: Pairs
    findings: list[Finding] = field(default_factory=list)  # the errors when backend is None

    @property
    def reason(self) -> str:
        return self.why.line


def choose(requested: str, hosts: list[str], facts: dict, links: list[Link], *, carriers: Carriers,
           plan: list[Cable] | None = None, models: dict | None = None) -> Choice:
    """The backend for these cables. carriers: what cannot carry RDMA (plugin_utils.rdma.readiness.carriers).
    plan and models only make the 'connect X to Y' advice better: a planned cable's ports first,
    and never a port where the model's RDMA does not come up."""
    n = len(hosts)
    models = models or {}
    pairs = pair_links(hosts, links)
    ring = _find_ring(n, pairs)
    mesh_gaps = [(i, j) for i in range(n) for j in range(i + 1, n) if (i, j) not in pairs]
    no_rdma = tuple((h, carriers.hosts[h]) for h in hosts if h in carriers.hosts)
    ring_hosts = tuple(hosts[i] for i in ring) if ring else ()

    def gaps(prefix: str, missing: list[tuple[int, int]], rdma: bool) -> list[Finding]:
        picker = _PortPicker(facts, links, plan or [], models, rdma)
        found = []
        for i, j in missing:
            what, fix = f"{hosts[i]} and {hosts[j]} are not cabled", picker.connect(hosts[i], hosts[j])
            # the two Macs as the gap only: the picture draws the missing edge red, not the Macs
            found.append(Finding("not-cabled", found=what, expected=prefix, fix=fix, gap=(hosts[i], hosts[j]),
                                 note="needed"))
        return found

    def rdma_errors(backend: str) -> list[Finding]:
        return [Finding("no-rdma", (h,), carriers.refusals[h], f"{backend} needs RDMA on every host")
                for h in hosts if h in carriers.refusals]

    def unable(used: list[Link]) -> tuple[tuple[Cable, str], ...]:
        """The cables among these that cannot carry RDMA, each with why."""
        return tuple((link.cable, carriers.cables[link.cable]) for link in used if link.cable in carriers.cables)

    def refused(message: str) -> Choice:
        return Choice(None, Why("refused"), None, pairs, [Finding("backend", found=message)])

    if requested not in BACKENDS:
        return refused(f"mlx_fleet_backend: {requested!r} is not one of {', '.join(BACKENDS)}")
    if n < 2:
        return refused(f"a Thunderbolt fabric needs at least 2 hosts, the inventory has {n}")
    if requested == "jaccl":
        errors = gaps("jaccl needs a full mesh", mesh_gaps, True) + rdma_errors("jaccl")
    elif requested in ("jaccl-ring", "ring"):
        errors = [] if ring else gaps(f"{requested} needs a ring through all {n} hosts",
                                      _ring_gaps(_cheapest_ring(n, pairs), pairs), requested != "ring")
        if requested == "jaccl-ring":
            errors += rdma_errors("jaccl-ring")
    if requested != "auto":
        return (Choice(None, Why("cannot-run", requested), None, pairs, errors)
                if errors else Choice(requested, Why("requested", requested), ring, pairs))
    # auto, as mlx.distributed_config decides (mesh + RDMA, ring + RDMA, ring), but RDMA only where
    # every Mac and every cable the hostfile uses can carry it.
    mesh_faults = () if mesh_gaps or no_rdma else unable(links)
    if not mesh_gaps and not no_rdma and not mesh_faults:
        return Choice("jaccl", Why("mesh", "jaccl", n), ring, pairs)
    ring_faults = unable(_ring_links(ring, hosts, links)) if ring and not no_rdma else ()
    if ring and not no_rdma and not ring_faults:
        gap = (hosts[mesh_gaps[0][0]], hosts[mesh_gaps[0][1]]) if mesh_gaps else None
        return Choice("jaccl-ring", Why("ring-not-mesh", "jaccl-ring", n, ring_hosts, gap, unable=mesh_faults),
                      ring, pairs)
    if ring:
        return Choice("ring", Why("ring-no-rdma", "ring", n, ring_hosts, no_rdma=no_rdma, unable=ring_faults),
                      ring, pairs)
    return Choice(None, Why("none", None, n), None, pairs,
                  gaps(f"auto: no ring through all {n} hosts", _ring_gaps(_cheapest_ring(n, pairs), pairs), False))


def _named(reasons: dict[str, str]) -> str:
    """One phrase per reason, naming all its Macs: "mini-1, mini-2 and mini-3 have RDMA off (...)"."""
    by_reason: dict[str, list[str]] = {}
    for host, reason in reasons.items():
        by_reason.setdefault(reason, []).append(host)
    return "; ".join(join(hosts) + " " + (reason if len(hosts) == 1 or not reason.startswith("has ")
                                          else "have " + reason[len("has "):])
                     for reason, hosts in by_reason.items())


def _ring_links(ring: list[int], hosts: list[str], links: list[Link]) -> list[Link]:
    """The cables between neighbours round the ring (ranks): what a jaccl-ring hostfile uses."""
    rank = {host: i for i, host in enumerate(hosts)}
    ring_pairs = {frozenset((node, ring[k - 1])) for k, node in enumerate(ring)}
    return [link for link in links if frozenset((rank[link.a.host], rank[link.b.host])) in ring_pairs]


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


def warnings(backend: str | None, hosts: list[str], facts: dict, models: dict, links: list[Link],
             ring: list[int] | None) -> list[Finding]:
    """What will hurt on these cables with this backend: RDMA on a port where it never comes up,
    Thunderbolt 4 under JACCL, an active Thunderbolt Bridge across a loop."""
    found = []
    if backend in RDMA_BACKENDS:
        used = _ring_links(ring, hosts, links) if backend == "jaccl-ring" and ring else links
        for link in used:
            for end, model in broken_ends(link, models):
                what = (f"{hardware_port(end.receptacle)} ({end.device}) is the {model.model_name} port beside Ethernet, "
                        "where RDMA never comes up")
                fix = f"move the cable {link} to another port"
                found.append(Finding("dead-rdma-port", found=what, expected="a port where RDMA comes up", fix=fix,
                                     ports=(end.port,), cable=link.cable, link=link.cable,
                                     note=f"no RDMA on {port_name(end.port)}"))
            if link.speed_gbps < FULL_SPEED_GBPS:
                what = f"{gbps(link.speed_gbps)} (Thunderbolt 4) on a {backend} link"
                why = ("JACCL wants Thunderbolt 5 Macs and cables: Thunderbolt 4 Macs list rdma devices yet fail "
                       "to run it")
                found.append(Finding("thunderbolt-4", found=what, expected=gbps(FULL_SPEED_GBPS), fix=why,
                                     ports=link.cable.key, cable=link.cable, link=link.cable,
                                     note="Thunderbolt 4 for JACCL"))
    if _has_loop(hosts, links):
        for host in hosts:
            bridge = facts[host].get("bridge") or {}
            if bridge.get("active"):
                what = (f"the Thunderbolt Bridge ({bridge.get('device', 'bridge0')}) is active while the cables "
                        "form a loop")
                fix = ("it floods frames around the loop and breaks RDMA setup: turn the Thunderbolt Bridge service "
                       "off (a converge's fabric step does, with mlx_fabric_bridge: disabled)")
                found.append(Finding("bridge-loop", (host,), what, "the Thunderbolt Bridge off", fix))
    return found

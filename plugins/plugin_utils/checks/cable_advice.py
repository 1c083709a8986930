"""Which cables to add when a Mac joins the cluster (docs/onboarding.md): pure logic.

From every Mac's ports (which it has, which are taken by a cable or a device now or by the cable
plan, which never carry RDMA), the cables there are (found or planned) and the backend the cluster
aims for: the cables to plug, each from a free port to a free port, as steps a person follows.
``jaccl`` wants a full mesh; when the ports make that impossible the advice says why, plainly, and
gives the ring alternative (``jaccl-ring``, or ``ring`` when RDMA ports run out too) with its cables.
A ring that can only be closed by moving a cable says which cable to unplug first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.graph import path_through
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Port, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import join

RING_BACKENDS = {"jaccl": "jaccl-ring", "jaccl-ring": "jaccl-ring", "ring": "ring"}


@dataclass(frozen=True)
class HostPorts:
    """One Mac's Thunderbolt ports as the advice sees them."""

    name: str
    ports: tuple[int, ...]  # the receptacles it has
    taken: frozenset[int] = frozenset()  # something plugged in, or named by the cable plan
    no_rdma: tuple[int, ...] = ()  # ports that never carry RDMA (models.Model.rdma_broken_ports)
    label: str = ""  # how to name the Mac in a reason: "Mac mini, mini-m4-pro"

    def free(self, rdma: bool, freed: frozenset[int] = frozenset()) -> list[int]:
        """Free ports, lowest first; with rdma only those that carry it (else those last)."""
        free = [p for p in self.ports if p not in self.taken or p in freed]
        if rdma:
            return [p for p in free if p not in self.no_rdma]
        return sorted(free, key=lambda p: (p in self.no_rdma, p))

    def usable(self, rdma: bool) -> int:
        return len([p for p in self.ports if not (rdma and p in self.no_rdma)])


@dataclass(frozen=True)
class Obstacle:
    """What makes a topology impossible to cable, as data (``line`` says it). ``kind``: "too-few-ports" (the Macs
    ``hosts``, of one ``label``, have ``has`` ports that carry RDMA, ``no_rdma`` never do, and a full mesh of ``macs``
    Macs needs ``need``), "ports-in-use" (a Mac needs ``need`` more cables and has ``has`` free RDMA ports, the
    ``taken`` ones in use), "alone" (the only Mac), "ring-ports" (the new Mac has ``has`` free ports, RDMA ones when
    ``rdma``, and a ring needs ``need``), "no-join" (no two Macs joined through the others have a free port)."""

    kind: str
    hosts: tuple[str, ...] = ()
    need: int = 0
    has: int = 0
    label: str = ""
    no_rdma: tuple[int, ...] = ()
    taken: tuple[int, ...] = ()
    macs: int = 0
    rdma: bool = True

    @property
    def line(self) -> str:
        who = join(list(self.hosts))
        if self.kind == "too-few-ports":
            broken = f" ({_ports_text(self.no_rdma)} cannot carry RDMA)" if self.no_rdma else ""
            return (f"{who} ({self.label or 'model unknown'}) {'has' if len(self.hosts) == 1 else 'have'} {self.has} "
                    f"Thunderbolt ports that carry RDMA{broken} and a full mesh of {self.macs} Macs needs {self.need} "
                    "on every Mac")
        if self.kind == "ports-in-use":
            return (f"{who} needs {self.need} more cable{'s' if self.need != 1 else ''} but has "
                    f"{_free_text(self.has)} that carries RDMA (in use: {_ports_text(self.taken)}); free one or "
                    "re-cable it")
        if self.kind == "alone":
            return f"{who} is the only Mac: there is nothing to cable it to"
        if self.kind == "ring-ports":
            return f"{who} has {_free_text(self.has)} {'that carries RDMA ' if self.rdma else ''}and a ring needs {self.need}"
        return (f"no two Macs joined by a path through the others have a free {'RDMA-capable ' if self.rdma else ''}"
                "Thunderbolt port, even after moving one cable")


@dataclass
class Advice:
    backend: str  # what the advised cabling runs: jaccl, jaccl-ring or ring
    topology: str  # "full mesh" | "ring"
    cables: list[Cable] = field(default_factory=list)  # to plug; the new Mac's end first
    unplug: list[Cable] = field(default_factory=list)  # to take out before plugging
    ring: list[str] = field(default_factory=list)  # the ring's order, for a ring
    obstacles: tuple[Obstacle, ...] = ()  # why this topology cannot be cabled (then no cables)
    alternative: Advice | None = None  # the best cabling instead, when impossible

    @property
    def possible(self) -> bool:
        return not self.obstacles

    @property
    def impossible(self) -> str:
        """Why this topology cannot be cabled, one phrase ("" when it can)."""
        return "; ".join(o.line for o in self.obstacles)

    def steps(self) -> list[str]:
        """What a person does, in order: "connect studio-4 Thunderbolt 2 to studio-1 Thunderbolt 5"."""
        out = [f"unplug the cable between {port_name(c.a)} and {port_name(c.b)}" for c in self.unplug]
        out += [f"connect {port_name(c.a)} to {port_name(c.b)}" for c in self.cables]
        return out

    def plan_entries(self) -> list[str]:
        """The cables as mlx_fleet_cables writes them: lower end first."""
        return [str(Cable(*c.key)) for c in self.cables]

    def headline(self) -> str:
        """What the advice comes to, without the steps."""
        if not self.possible:
            text = f"a {self.topology} is impossible: {self.impossible}"
            if self.alternative and self.alternative.possible:
                text += f"; the best alternative is {self.alternative.backend}: {self.alternative.summary()}"
            return text
        if not self.cables and not self.unplug:
            return f"the cables for a {self.topology} ({self.backend}) are all there"
        what = f"{len(self.cables)} cable{'s' if len(self.cables) != 1 else ''} to add"
        if self.unplug:
            what += f" after unplugging {len(self.unplug)}"
        ring = f" ({' -> '.join(self.ring + self.ring[:1])})" if self.ring else ""
        return f"{what} for a {self.topology}{ring} ({self.backend})"

    def summary(self) -> str:
        """The headline and the steps, in one line."""
        steps = self.steps() if self.possible else []
        return self.headline() + (": " + "; ".join(steps) if steps else "")


def _pairs(cables: list[Cable]) -> set[frozenset[str]]:
    return {frozenset((c.a.host, c.b.host)) for c in cables}


def advise(new: str, hosts: list[HostPorts], cables: list[Cable], backend: str) -> Advice:
    """The cables that bring ``new`` into the cluster for ``backend`` (jaccl, jaccl-ring or ring).

    hosts: every Mac in inventory order, ``new`` among them; cables: those found on the ports and
    those the plan lists (each counts as there). jaccl gets a full mesh or, when the ports make
    that impossible, the reason and the ring alternative.
    """
    if backend not in RING_BACKENDS:
        raise ValueError(f"backend {backend!r}: advice is for jaccl, jaccl-ring or ring")
    if backend == "jaccl":
        mesh = _mesh(new, hosts, cables)
        if mesh.possible:
            return mesh
        mesh.alternative = _ring(new, hosts, cables, "jaccl-ring")
        if not mesh.alternative.possible:
            mesh.alternative = _ring(new, hosts, cables, "ring")
        return mesh
    return _ring(new, hosts, cables, backend)


def _mesh(new: str, hosts: list[HostPorts], cables: list[Cable]) -> Advice:
    advice = Advice("jaccl", "full mesh")
    cabled = _pairs(cables)
    names = [h.name for h in hosts]
    # The new Mac's cables first (to the others in inventory order), then any pair the plan lacks.
    order = [(new, other) for other in names if other != new]
    order += [(a, b) for i, a in enumerate(names) for b in names[i + 1:] if new not in (a, b)]
    gaps = [(a, b) for a, b in order if frozenset((a, b)) not in cabled]
    needs: dict[str, int] = {}
    for a, b in gaps:
        needs[a] = needs.get(a, 0) + 1
        needs[b] = needs.get(b, 0) + 1
    n = len(hosts)
    obstacles = []
    # Too few ports at all, whatever the cabling: one obstacle per kind of Mac.
    short: dict[tuple, list[str]] = {}
    for host in hosts:
        if host.usable(True) < n - 1:
            short.setdefault((host.label, host.usable(True), host.no_rdma), []).append(host.name)
    for (label, usable, no_rdma), names_short in short.items():
        obstacles.append(Obstacle("too-few-ports", tuple(names_short), n - 1, usable, label, tuple(no_rdma), macs=n))
    for host in hosts:
        need = needs.get(host.name, 0)
        if host.usable(True) < n - 1:
            continue
        if need > len(host.free(True)):
            obstacles.append(Obstacle("ports-in-use", (host.name,), need, len(host.free(True)),
                                      taken=tuple(sorted(host.taken))))
    if obstacles:
        advice.obstacles = tuple(obstacles)
        return advice
    free = {h.name: h.free(True) for h in hosts}
    for a, b in gaps:
        ends = [Port(host, free[host].pop(0)) for host in (a, b)]
        advice.cables.append(Cable(*ends))
    return advice


def _ports_text(ports) -> str:
    ports = list(ports)
    return "Thunderbolt " + ", ".join(str(p) for p in ports) if ports else "none"


def _free_text(free: int) -> str:
    return "no free port" if not free else f"only {free} free port{'s' if free != 1 else ''}"


def _path_between(start: str, end: str, nodes: list[str], pairs: set[frozenset[str]]) -> list[str] | None:
    """A path from start to end (two Macs) through every node once over the pairs, or None (small clusters)."""
    path = path_through(start, [node for node in nodes if node != end], lambda a, b: frozenset((a, b)) in pairs,
                        lambda last: frozenset((last, end)) in pairs)
    return path + [end] if path else None


def _ring(new: str, hosts: list[HostPorts], cables: list[Cable], backend: str) -> Advice:
    """Put the new Mac into a ring: between two Macs A and B that the other cables already join
    in a path through every other Mac; with no free port there, unplug the cable A -- B."""
    rdma = backend != "ring"
    advice = Advice(backend, "ring")
    by_name = {h.name: h for h in hosts}
    others = [h.name for h in hosts if h.name != new]
    pairs = _pairs(cables)
    if not others:
        advice.obstacles = (Obstacle("alone", (new,)),)
        return advice
    if len(others) == 1:
        # Two Macs: one cable is the whole ring.
        candidates = [(others[0], others[0], None)]
    else:
        candidates = [(a, b, None) for i, a in enumerate(others) for b in others[i + 1:]]
        candidates += [(c.a.host, c.b.host, c) for c in cables if new not in (c.a.host, c.b.host)]
    best = None
    for a, b, unplug in candidates:
        rest = pairs - {frozenset((a, b))} if unplug else pairs
        path = _path_between(a, b, others, rest) if a != b else [a]
        if path is None:
            continue
        freed = {h: frozenset(e.receptacle for e in (unplug.a, unplug.b) if e.host == h) if unplug else frozenset()
                 for h in (a, b, new)}
        wanted = [x for x in dict.fromkeys((a, b)) if frozenset((new, x)) not in pairs]
        free = {h: by_name[h].free(rdma, freed[h]) for h in (a, b, new)}
        if len(free[new]) < len(wanted) or any(not free[x] for x in wanted):
            continue
        plugged = [Cable(Port(new, free[new].pop(0)), Port(x, free[x].pop(0))) for x in wanted]
        option = (unplug is not None, len(plugged), plugged, [unplug] if unplug else [], path)
        if best is None or option[:2] < best[:2]:
            best = option
    if best is None:
        need = 1 if len(others) == 1 else 2
        free = len(by_name[new].free(rdma))
        advice.obstacles = ((Obstacle("ring-ports", (new,), need, free, rdma=rdma),) if free < need
                            else (Obstacle("no-join", rdma=rdma),))
        return advice
    dummy, dummy, advice.cables, advice.unplug, path = best
    advice.ring = path + [new]
    return advice

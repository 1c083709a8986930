"""A finding as data, the table of its kinds, and the one way findings become sentences.

Every check (the preflight, the inventory, the watch, verify's diagnosis, and the judges of plugin_utils.judge.facts
that the audit, the watch and verify share) says what it found as a ``Finding``: its kind, the Macs (and ports)
it concerns, what was found, what was expected, and the fix. ``KINDS`` gives each kind its topic, its severity
and the sentence a person reads; sentences are composed here only, and nothing reads data back out of one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Port

FAULT, WARNING, NOTE = "fault", "warning", "note"
MIXED_BUILDS = "RDMA breaks across mixed builds"  # why every Mac runs one macOS build (the audit, watch, explain)


@dataclass(frozen=True)
class Kind:
    """What a kind of finding is about (its topic), how bad it is, and its sentence: ``template`` and
    ``cleared`` (what the watch says once it is gone) are filled with {macs} (the Macs named together), {at} (the
    Macs of its ports), {on} (" its Macs:", or nothing), {where} (its cable, else its Macs), {found}, {expected},
    {cable}, {rank}, {fact} and {fix} (a template naming the fix is the whole line)."""

    topic: str
    severity: str
    template: str
    cleared: str = ""


KINDS: dict[str, Kind] = {
    # the preflight and the inventory
    "apple-silicon": Kind("hardware", FAULT, "{macs}: {found}"),
    "macos": Kind("macOS", FAULT, "{macs}: {found}"),
    "sudo": Kind("access", FAULT, "{macs}: {found}"),
    "wired-limit": Kind("wired limit", FAULT, "{macs}: {found}"),
    "pool": Kind("addresses", FAULT, "{macs}: {found}"),
    "inventory": Kind("inventory", FAULT, "{found}"),
    # a Mac
    "unreachable": Kind("network", FAULT, "{macs}: unreachable over ssh ({found})",
                        "{macs}: back, it answers over ssh"),
    "bridge": Kind("Thunderbolt Bridge", FAULT, "{macs}: the Thunderbolt Bridge has {found} where mlx_fabric_bridge "
                   "wants it {expected}", "{macs}: the Thunderbolt Bridge is {expected} again"),
    "sleep": Kind("pmset", WARNING, "{macs}: system sleep is {found} (pmset sleep): an idle Mac drops out of the "
                  "cluster", "{macs}: system sleep is off again"),
    "rdma-off": Kind("RDMA", FAULT, "{macs}: RDMA is off (rdma_ctl status: {found}), where {expected}",
                     "{macs}: RDMA is on again"),
    "stale-rdma": Kind("RDMA", FAULT, "{macs}: ibv_devinfo does not answer (RDMA is wedged: jobs fail or hang in "
                       "JACCL)", "{macs}: ibv_devinfo answers again"),
    "service-order": Kind("network", WARNING, "{macs}: the Thunderbolt services are not last in the service order: "
                          "{found}", "{macs}: the Thunderbolt services are last again"),
    "default-route": Kind("network", WARNING, "{macs}: {found}", "{macs}: the default route is off Thunderbolt again"),
    "filevault": Kind("network", WARNING, "{macs}: {found}", "{macs}: FileVault is off again"),
    "network-manager": Kind("network", WARNING, "{macs}: {found}", "{macs}: no other network manager is loaded"),
    # the cluster
    "os-mismatch": Kind("macOS", FAULT, "the Macs run different macOS builds ({found}): " + MIXED_BUILDS,
                        "every Mac runs the same macOS build again"),
    "environment-mismatch": Kind("environment", FAULT, "the Macs run different MLX environments (fingerprints "
                                 "{found})", "every Mac runs the same MLX environment again"),
    "fast-synch": Kind("hostfiles", WARNING, "hostfile.json: {found}", "hostfile.json: {expected} again"),
    # a cable or a port
    "cable": Kind("cables", FAULT, "cable {cable} is out: {found}", "cable {cable} is back"),
    "moved": Kind("cables", WARNING, "cable {expected} moved to {found}", "cable {expected} is back"),
    "extra": Kind("cables", FAULT, "cable {cable} is {found}", "cable {cable} is gone"),
    "slow": Kind("cables", WARNING, "cable {cable} links at {found} where {expected}",
                 "cable {cable} links at full speed again"),
    "no-ipv4": Kind("Thunderbolt addresses", FAULT, "{macs} {found} where the fabric gave it {expected}",
                    "{macs}: the fabric's address {expected} is back"),
    "rdma-port": Kind("RDMA", FAULT, "{macs} {found} on a cable that links",
                      "{macs} {expected}: RDMA port active again"),
    "rdma-gid": Kind("RDMA", FAULT, "{macs} {found}", "{macs} {expected}: RDMA port has its IPv4-mapped GID again"),
    # the fabric: the cables found against the plan, the backend, the addresses (what blocks a hostfile is a fault)
    "plan": Kind("cables", FAULT, "{found}"),
    "addresses": Kind("addresses", FAULT, "{found}"),
    "backend": Kind("backend", FAULT, "{found}"),
    "missing": Kind("cables", FAULT, "missing cable {cable}: {fix}"),
    "wrong-port": Kind("cables", FAULT, "wrong port: {found}"),
    "slow-cable": Kind("cables", FAULT, "slow cable {cable}: {found}"),
    "thunderbolt-4-cable": Kind("cables", WARNING, "slow cable {cable}: {found}"),
    "not-cabled": Kind("cables", FAULT, "{expected}: {found}"),
    "no-rdma": Kind("RDMA", FAULT, "{expected}: {found}"),
    "dock": Kind("cables", WARNING, "{at}: {found}"),
    "outside": Kind("cables", NOTE, "{at}: {found}"),
    "dead-rdma-port": Kind("RDMA", WARNING, "{at}: {found}"),
    "thunderbolt-4": Kind("cables", WARNING, "{cable}: {found}"),
    "bridge-loop": Kind("Thunderbolt Bridge", WARNING, "{macs}: {found}"),
    # the audit: a fact that differs from the declared state or from the other Macs
    "drift": Kind("audit", FAULT, "{fact}:{on} expected {expected}; found {found}"),
    # a declared model on a Mac (models status and the audit): absent, or a file (or a Hub entry's ref) missing
    # or not as pinned; a Hub entry the models' lock does not pin as declared
    "model-missing": Kind("models", FAULT, "{fact}:{on} expected {expected}; found {found}"),
    "model-file-differs": Kind("models", FAULT, "{fact}:{on} expected {expected}; found {found}"),
    "model-not-pinned": Kind("models", FAULT, "{fact}: expected {expected}; found {found}"),
    # verify: what the Macs' tools show about a job that failed ({where}: its cable, else its Macs)
    "unstaged": Kind("network", FAULT, "{macs}: cannot stage the check program ({found})"),
    "interpreter": Kind("environment", FAULT, "{macs}: {expected} does not run MLX ({found})"),
    "link-down": Kind("cables", FAULT, "cable {cable}: {found}"),
    "end-address": Kind("Thunderbolt addresses", FAULT, "cable {cable}: {found} where the fabric gave it {expected}"),
    "bridge-member": Kind("Thunderbolt Bridge", FAULT, "cable {cable}: {found}, the Thunderbolt Bridge, which is up"),
    "rank-address": Kind("Thunderbolt addresses", FAULT, "{macs} (rank {rank}) cannot use its address {expected}: "
                         "{found}"),
    "rdma-path": Kind("RDMA", FAULT, "{where}: RDMA path failed, TCP path works ({found})"),
    "unexplained": Kind("verify", FAULT, "{where}: failed with no fault visible on the Macs' ports; {found}"),
    # MLX jobs on the Macs (mlx-fleet ps, the watch) and the check before `mlx-fleet run` launches one
    "orphan-rank": Kind("jobs", FAULT, "{macs}: an orphaned MLX rank holds memory, its launcher gone ({found})",
                        "{macs}: the orphaned MLX rank is gone"),
    "job-running": Kind("jobs", FAULT, "{macs}: an MLX job is already running ({found})",
                        "{macs}: no MLX job running"),
    "update-held": Kind("macOS", FAULT, "an unfinished macOS update holds the cluster:{on} {found}"),
    "hostfile-stale": Kind("hostfiles", FAULT, "hostfile.json{on} {found}"),
}


def join(names) -> str:
    """Names for a sentence: "a", "a and b", "a, b and c"."""
    names = list(names)
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


@dataclass(frozen=True)
class Finding:
    """Something a check found on one or more Macs (or about the whole cluster: no hosts). The fabric's findings
    also say where its picture draws them in red: on a cable found (``link``, with the ``note``), or between two
    Macs without a direct cable (``gap``)."""

    kind: str  # a key of KINDS
    hosts: tuple[str, ...] = ()
    found: str = ""
    expected: str = ""
    fix: str = ""
    ports: tuple[Port, ...] = ()  # the Thunderbolt ports it concerns
    cable: Cable | None = None  # the cable it is about (the plan's, or the one found)
    variables: tuple[str, ...] = ()  # the inventory variables whose values it is about
    link: Cable | None = None  # a cable found the picture draws red, with the note
    gap: tuple[str, ...] = ()  # two Macs without a direct cable: an edge with the note, dotted for a dock
    note: str = ""
    rank: int | None = None  # verify: the rank of a job that failed
    evidence: tuple[str, ...] = ()  # verify: what the job and the Macs' tools said, as they said it
    fact: str = ""  # the audit: the fact compared ("pmset sleep", "package mlx")

    @property
    def line(self) -> str:
        return line(self)

    @property
    def severity(self) -> str:
        return KINDS[self.kind].severity

    @property
    def fault(self) -> bool:
        return self.severity == FAULT

    def to_dict(self) -> dict:
        """The finding at the JSON boundary (lists, as JSON reads them back), with its sentence for a person:
        a cable as its ends (``cable_ends``, ``link_ends``), and as text for a person (``cable``, ``link``)."""
        return {"kind": self.kind, "hosts": list(self.hosts), "found": self.found, "expected": self.expected,
                "fix": self.fix, "ports": [[p.host, p.receptacle] for p in self.ports],
                "cable": str(self.cable or ""), "cable_ends": self.cable.ports if self.cable else [],
                "variables": list(self.variables), "link": str(self.link or ""),
                "link_ends": self.link.ports if self.link else [], "gap": list(self.gap), "note": self.note,
                "rank": self.rank, "evidence": list(self.evidence), "fact": self.fact, "severity": self.severity,
                "fault": self.fault, "message": self.line}

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        """A finding as to_dict wrote it (the cables from their ends, never from their text)."""
        def cable(ends) -> Cable | None:
            return Cable.from_ports(ends) if ends else None

        return cls(data["kind"], tuple(data.get("hosts", ())), data.get("found", ""), data.get("expected", ""),
                   data.get("fix", ""), tuple(Port(str(h), int(n)) for h, n in data.get("ports", ())),
                   cable(data.get("cable_ends")), tuple(data.get("variables", ())), cable(data.get("link_ends")),
                   tuple(data.get("gap", ())), data.get("note", ""), data.get("rank"), tuple(data.get("evidence", ())),
                   data.get("fact", ""))


def _fill(template: str, finding: Finding, hosts) -> str:
    where = f"cable {finding.cable}" if finding.cable else f"{len(hosts)} Macs ({', '.join(hosts)})"
    return template.format(macs=join(hosts), at=join(dict.fromkeys(p.host for p in finding.ports)),
                           found=finding.found, expected=finding.expected, cable=str(finding.cable or ""),
                           fix=finding.fix, rank=finding.rank, where=where, fact=finding.fact,
                           on=f" {join(hosts)}:" if hosts else "")


def statement(finding: Finding) -> str:
    """What was found, in words, without the fix (unless its kind's sentence names the fix)."""
    return _fill(KINDS[finding.kind].template, finding, finding.hosts)


def line(finding: Finding) -> str:
    """A finding's line for a person: what was found, then the fix."""
    said = "{fix}" in KINDS[finding.kind].template
    return statement(finding) + (f"; {finding.fix}" if finding.fix and not said else "")


def cleared(finding: Finding) -> str:
    """What the watch says once the finding is gone."""
    return _fill(KINDS[finding.kind].cleared or KINDS[finding.kind].template, finding, finding.hosts)


def lines(findings) -> list[str]:
    """One line per kind and fact: findings alike but for their Macs are said once, naming all of them."""
    merged: dict[Finding, tuple[list[str], list[Port]]] = {}
    for finding in findings:
        hosts, ports = merged.setdefault(replace(finding, hosts=(), ports=()), ([], []))
        hosts += [h for h in finding.hosts if h not in hosts]
        ports += [p for p in finding.ports if p not in ports]
    return [line(replace(finding, hosts=tuple(hosts), ports=tuple(ports)))
            for finding, (hosts, ports) in merged.items()]

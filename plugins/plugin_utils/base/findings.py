"""A finding as data, the table of its kinds, and the one way findings become sentences.

Every check (the preflight, the inventory, the watch, verify's diagnosis, and the judges of plugin_utils.judge.facts
that the audit, the watch and verify share) says what it found as a ``Finding``: its kind, the Macs (and ports)
it concerns, what was found, what was expected, and the fix. ``KINDS`` gives each kind its topic, its severity
and the sentence a person reads; sentences are composed here only, and nothing reads data back out of one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

FAULT, WARNING, NOTE = "fault", "warning", "note"
MIXED_BUILDS = "RDMA breaks across mixed builds"  # why every Mac runs one macOS build (the audit, watch, explain)


@dataclass(frozen=True)
class Kind:
    """What a kind of finding is about (its topic), how bad it is, and its sentence: ``template`` and
    ``cleared`` (what the watch says once it is gone) are filled with {macs} (the Macs named together), {found},
    {expected} and {cable}."""

    topic: str
    severity: str
    template: str
    cleared: str = ""


KINDS: dict[str, Kind] = {
    # the preflight and the inventory
    "apple silicon": Kind("hardware", FAULT, "{macs}: {found}"),
    "macos": Kind("macOS", FAULT, "{macs}: {found}"),
    "sudo": Kind("access", FAULT, "{macs}: {found}"),
    "wired limit": Kind("wired limit", FAULT, "{macs}: {found}"),
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
}


def join(names) -> str:
    """Names for a sentence: "a", "a and b", "a, b and c"."""
    names = list(names)
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


@dataclass(frozen=True)
class Finding:
    """Something a check found on one or more Macs (or about the whole cluster: no hosts)."""

    kind: str  # a key of KINDS
    hosts: tuple[str, ...] = ()
    found: str = ""
    expected: str = ""
    fix: str = ""
    ports: tuple[tuple[str, int], ...] = ()  # (host, Thunderbolt port) pairs it concerns
    cable: str = ""  # the cable it is about, as its text
    variables: tuple[str, ...] = ()  # the inventory variables whose values it is about

    @property
    def line(self) -> str:
        return line(self)

    @property
    def severity(self) -> str:
        return KINDS[self.kind].severity

    def to_dict(self) -> dict:
        """The finding at the JSON boundary (lists, as JSON reads them back), with its sentence for a person."""
        return {**asdict(self), "hosts": list(self.hosts), "ports": [list(p) for p in self.ports],
                "variables": list(self.variables), "message": self.line}

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        return cls(data["kind"], tuple(data.get("hosts", ())), data.get("found", ""), data.get("expected", ""),
                   data.get("fix", ""), tuple(tuple(p) for p in data.get("ports", ())), data.get("cable", ""),
                   tuple(data.get("variables", ())))


def _fill(template: str, finding: Finding, hosts) -> str:
    return template.format(macs=join(hosts), found=finding.found, expected=finding.expected, cable=finding.cable)


def sentence(subject: str, found: str, fix: str = "") -> str:
    """A line for a person from its parts: what it is about, what was found, then the fix (the fabric's findings,
    fabric_discovery.Finding, compose their message with it)."""
    return f"{subject}: {found}" + (f"; {fix}" if fix else "")


def statement(finding: Finding) -> str:
    """What was found, in words, without the fix."""
    return _fill(KINDS[finding.kind].template, finding, finding.hosts)


def line(finding: Finding) -> str:
    """A finding's line for a person: what was found, then the fix."""
    return statement(finding) + (f"; {finding.fix}" if finding.fix else "")


def cleared(finding: Finding) -> str:
    """What the watch says once the finding is gone."""
    return _fill(KINDS[finding.kind].cleared or KINDS[finding.kind].template, finding, finding.hosts)


def lines(findings) -> list[str]:
    """One line per kind and fact: findings alike but for their Macs are said once, naming all of them."""
    merged: dict[tuple, list[str]] = {}
    for finding in findings:
        hosts = merged.setdefault((finding.kind, finding.found, finding.expected, finding.fix, finding.cable), [])
        hosts += [h for h in finding.hosts if h not in hosts]
    return [line(Finding(kind, tuple(hosts), found, expected, fix, cable=cable))
            for (kind, found, expected, fix, cable), hosts in merged.items()]


@dataclass(frozen=True)
class FabricFinding:
    """Something a fabric check found, as the fabric's picture and the cluster model keep it. ``cable`` is the plan's cable for missing and wrong port, the
    cable found for extra and slow; ``fault`` findings are errors (no hostfile is written), the
    others warnings or notes. The last four fields say where the picture draws it in red."""

    kind: str  # the plan: "missing" | "extra" | "wrong port" | "slow"; else what the check is about
    cable: str
    message: str
    fault: bool
    link: str = ""  # a cable found: drawn red, with the note
    gap: tuple[str, ...] = ()  # two Macs without a direct cable: an edge with the note, dotted for a dock
    hosts: tuple[str, ...] = ()  # Macs drawn red
    note: str = ""
    # The finding as data (the audit and the model read these, never the message): the ports it concerns
    # ((host, Thunderbolt port) pairs), what was found, what was expected, and the fix.
    ports: tuple[tuple[str, int], ...] = ()
    found: str = ""
    expected: str = ""
    fix: str = ""

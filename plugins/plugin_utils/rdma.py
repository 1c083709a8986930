"""RDMA readiness per Mac, judged on the controller (docs/recovery/README.md).

From each Mac's ``mlx_fleet_macos`` and ``mlx_fleet_thunderbolt`` facts, its model and the cables
the fabric found: which Macs are ready, which need a person to run the Recovery step, which cannot
do RDMA at all (and must not be sent to Recovery), and which have RDMA on but not working. The
cabling questions (which ports are cables, which backend the cables allow) are answered by
``plugin_utils.fabric_discovery`` and ``fabric_backend``, here as everywhere. Pure Python: the
action plugin is a thin wrapper.

Nothing here, or anywhere in mlx-fleet, switches RDMA on: only a person at the Mac can, in macOS
Recovery. The toolkit says who needs that visit and checks afterwards that it worked.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fabric_backend
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_discovery import FULL_SPEED_GBPS, Link, discover, gbps
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.inventory import version_tuple
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import Model, generation_from_facts, model_for

READY = "ready"
NEEDS_RECOVERY = "needs_recovery"
NOT_CAPABLE = "not_capable"
ENABLED_NOT_WORKING = "enabled_not_working"
STATUSES = (READY, NEEDS_RECOVERY, NOT_CAPABLE, ENABLED_NOT_WORKING)
# Each status as a person reads it in a table.
STATUS_WORDS = {READY: "ready", NEEDS_RECOVERY: "off: Recovery step to do", NOT_CAPABLE: "not capable",
                ENABLED_NOT_WORKING: "on, not working"}

RDMA_MIN_MACOS = "26.2"  # the first macOS with RDMA over Thunderbolt (rdma_ctl)
ACTIVE = "PORT_ACTIVE"
LEDGER_FILE = "rdma-ledger.json"
NOT_WORKING = "enabled but not working"
LEDGER_FORMAT = "mlx-fleet-rdma-ledger/1"
LEDGER_FIELDS = ("last_seen_ready", "product_version", "build_version")  # what a regression message quotes


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass
class PortState:
    """One cabled Thunderbolt port as RDMA sees it."""

    receptacle: int
    device: str | None
    rdma_device: str | None
    rdma_state: str | None
    peer: str | None  # the inventory host at the other end, None when unknown
    outcome: str  # "active" | "waiting" (peer not enabled yet) | "peer not capable" | "down" | "broken port" | "no device"

    @property
    def name(self) -> str:
        return f"Thunderbolt {self.receptacle}"


@dataclass
class Readiness:
    """One Mac's RDMA readiness as data: its status, the state in words, what was found and the fix;
    message is the line rendered from them."""

    host: str
    status: str  # one of STATUSES
    state: str  # the status in words: "ready", "needs the Recovery step", ...
    found: str  # what was found
    fix: str  # what to do ("" when ready)
    model: str | None  # plugin_utils.models key, when known
    model_name: str
    model_identifier: str
    chip: str
    serial_number: str
    product_version: str
    build_version: str
    location: str | None = None
    reason: str | None = None  # not_capable: "thunderbolt 4" | "macos" | "no rdma_ctl"
    ports: list[PortState] = field(default_factory=list)
    regression_text: str | None = None  # set from the ledger: RDMA switched off since last seen ready
    rdma_status: str | None = None  # rdma_ctl status as read: enabled, disabled, unknown; None: no rdma_ctl
    rdma_devices: list[str] = field(default_factory=list)  # what ibv_devices lists
    unread: list[dict] = field(default_factory=list)  # outputs no real Mac has shown: {command, output}

    def text(self) -> str:
        """The line without the host: the state, what was found and the fix."""
        return f"{self.state}: {self.found}" + (f"; {self.fix}" if self.fix else "")

    @property
    def message(self) -> str:  # one line
        return f"{self.host}: {self.text()}"

    @property
    def regression(self) -> str | None:
        return f"{self.host}: {self.regression_text}" if self.regression_text else None

    def to_dict(self) -> dict:
        return {**asdict(self), "message": self.message, "regression": self.regression}


# --- one Mac --------------------------------------------------------------------------------------


def _tb_generation(model: Model | None, thunderbolt: dict) -> int | None:
    # A model the catalogue cannot place is judged from its own ports.
    return model.tb_generation if model else generation_from_facts(thunderbolt)


def _cabled_ports(host: str, thunderbolt: dict, cabled: dict[int, str | None] | None) -> dict[int, str | None]:
    """receptacle -> peer host: the fabric's cables when given, else every port with a Mac directly on it."""
    if cabled is not None:
        return dict(cabled)
    return {p["receptacle"]: None for p in thunderbolt.get("ports", [])
            if any(peer.get("direct") for peer in p.get("peers", []))}


def classify_node(host: str, macos: dict, thunderbolt: dict, *, model: str | None = None,
                  location: str | None = None, cabled: dict[int, str | None] | None = None,
                  peer_status: dict[str, str] | None = None) -> Readiness:
    """Classify one Mac.

    cabled: receptacle -> the inventory host on its other end (``cables_by_host`` from the fabric);
    without it, every port with a Mac directly attached counts, peers unknown. peer_status: host ->
    its own first-pass status (READY, NEEDS_RECOVERY, ...), so that a port down only because the
    Mac at the other end has RDMA off is waiting for that Mac, not a fault of this one.
    """
    found = model_for(model, macos)
    info = dict(
        host=host, model=found.key if found else model,
        model_name=macos.get("model_name") or (found.model_name if found else "Mac"),
        model_identifier=macos.get("model_identifier", ""), chip=macos.get("chip", ""),
        serial_number=macos.get("serial_number", ""), product_version=str(macos.get("product_version", "")),
        build_version=macos.get("build_version", ""), location=location, rdma_status=thunderbolt.get("rdma_status"),
        rdma_devices=list(thunderbolt.get("rdma_devices") or []), unread=list(thunderbolt.get("rdma_unread") or []),
    )
    macos_text = f"macOS {info['product_version']} ({info['build_version']})"
    what = f"{info['model_name']} ({found.key if found else info['model_identifier'] or 'model unknown'})"

    # Not capable: never send anyone to Recovery for these.
    tb4 = _tb_generation(found, thunderbolt) == 4
    old = version_tuple(info["product_version"]) < version_tuple(RDMA_MIN_MACOS)
    old_text = f"{macos_text} is older than {RDMA_MIN_MACOS}, the first macOS with RDMA over Thunderbolt"
    ring = "use the ring backend for it (a Recovery visit cannot help)"
    if tb4:
        text = (f"{what} has Thunderbolt 4 ports, and RDMA over Thunderbolt needs Thunderbolt 5"
                + (f" (and {macos_text} is older than {RDMA_MIN_MACOS})" if old else ""))
        fix, reason = ring, "thunderbolt 4"
    elif old:
        text, fix, reason = old_text, f"update macOS, until then {ring}", "macos"
    elif thunderbolt.get("rdma_enabled") is None:
        text, fix, reason = f"{macos_text} has no rdma_ctl", ring, "no rdma_ctl"
    else:
        text = fix = reason = None
    if reason:
        return Readiness(status=NOT_CAPABLE, state="not capable of RDMA", found=text, fix=fix, reason=reason, **info)

    # rdma_ctl's wording unknown: rdma_enabled is what MLX trusts, whether ibv_devices lists rdma_* devices.
    said = ("ibv_devices lists no rdma_* device (the RDMA tools printed a wording no real Mac has shown)"
            if thunderbolt.get("rdma_status") == "unknown" else "rdma_ctl status says disabled")
    if not thunderbolt.get("rdma_enabled"):
        return Readiness(status=NEEDS_RECOVERY, state="needs the Recovery step",
                         found=f"{said} on this {what}, {macos_text}",
                         fix="a person at the Mac enables RDMA in macOS Recovery (see the checklist)", **info)

    devices = thunderbolt.get("rdma_devices") or []
    if not devices:
        return Readiness(status=ENABLED_NOT_WORKING, state=NOT_WORKING,
                         found="rdma_ctl status says enabled but ibv_devices lists no RDMA device",
                         fix="restart the Mac (RDMA comes up at boot), and if it stays empty do the Recovery step "
                             "again", **info)

    by_receptacle = {p["receptacle"]: p for p in thunderbolt.get("ports", [])}
    peer_status = peer_status or {}
    ports = []
    for receptacle, peer in sorted(_cabled_ports(host, thunderbolt, cabled).items()):
        port = by_receptacle.get(receptacle, {"receptacle": receptacle})
        state = port.get("rdma_state")
        if port.get("rdma_device") is None:
            outcome = "no device"
        elif state == ACTIVE:
            outcome = "active"
        elif found and receptacle in found.rdma_broken_ports:
            outcome = "broken port"
        elif peer_status.get(peer) == NEEDS_RECOVERY:
            outcome = "waiting"
        elif peer_status.get(peer) == NOT_CAPABLE:
            outcome = "peer not capable"
        else:
            outcome = "down"
        ports.append(PortState(receptacle, port.get("device"), port.get("rdma_device"), state, peer, outcome))

    def named(p: PortState) -> str:
        to = f", cabled to {p.peer}" if p.peer else ""
        return f"{p.name} ({p.rdma_device or p.device}{to})"

    problems = []  # (what was found, its fix)
    down = [p for p in ports if p.outcome == "down"]
    if down:
        ends = [host] + sorted({p.peer for p in down if p.peer})
        peers = _join(sorted({p.peer for p in down if p.peer})) or "the Mac at the other end"
        problems.append((
            f"{_join([named(p) for p in down])} {'is' if len(down) == 1 else 'are'} "
            f"{_join(sorted({p.rdma_state or 'not active' for p in down}))}; likely causes: the cable, the "
            f"Thunderbolt Bridge still active, RDMA not enabled on {peers}",
            f"restarting both ends ({_join(ends) if len(ends) > 1 else host + ' and its peer'}) is the known remedy"))
    for p in (p for p in ports if p.outcome == "broken port"):
        problems.append((f"{named(p)} is {p.rdma_state or 'not active'}: it is the {info['model_name']} port "
                         "beside Ethernet, where RDMA never comes up", "move the cable to another port"))
    missing = [p for p in ports if p.outcome == "no device"]
    if missing:
        problems.append((f"{_join([named(p) for p in missing])} {'has' if len(missing) == 1 else 'have'} no RDMA "
                         "device although RDMA is enabled", "restart the Mac"))
    if problems:
        # Each problem's fix stays beside it in the line; the last one's is the fix (the others' are in found).
        *first, (last_found, last_fix) = problems
        return Readiness(status=ENABLED_NOT_WORKING, state=NOT_WORKING, ports=ports, **info,
                         found="; ".join([f"{what}; {fix}" for what, fix in first] + [last_found]), fix=last_fix)

    active = [p for p in ports if p.outcome == "active"]
    waiting = [p for p in ports if p.outcome == "waiting"]
    incapable = [p for p in ports if p.outcome == "peer not capable"]
    parts = [f"RDMA enabled, {_plural(len(devices), 'device')}"]
    if active:
        parts.append(f"{_join([p.name for p in active])} {ACTIVE}")
    elif not ports:
        parts.append("no Thunderbolt cable to another Mac yet")
    if waiting:
        parts.append(f"{_join([named(p) for p in waiting])} come{'s' if len(waiting) == 1 else ''} up once "
                     f"{_join(sorted({p.peer for p in waiting}))} {'is' if len({p.peer for p in waiting}) == 1 else 'are'}"
                     " enabled")
    if incapable:
        parts.append(f"{_join([named(p) for p in incapable])} cannot carry RDMA (the peer cannot do RDMA)")
    return Readiness(status=READY, state="ready", found="; ".join(parts), fix="", ports=ports, **info)


def unread_warnings(nodes: dict[str, Readiness]) -> list[str]:
    """One line per RDMA tool output no real Mac has shown: the Mac, the command, its output quoted, and what the
    judgment went by instead (the rdma_* devices ibv_devices lists, what MLX itself trusts)."""
    return [f"{host}: {item['command']} printed {item['output']!r}, a wording no real Mac has shown; RDMA state "
            f"unknown, judged by the rdma_* devices ibv_devices lists ({', '.join(node.rdma_devices) or 'none'}): "
            f"{STATUS_WORDS[node.status]}"
            for host, node in nodes.items() for item in node.unread]


# --- the cluster ----------------------------------------------------------------------------------


def cables_by_host(links: list[Link]) -> dict[str, dict[int, str]]:
    """host -> {receptacle: peer host} from the fabric's cables."""
    out: dict[str, dict[int, str]] = {}
    for link in links:
        out.setdefault(link.a.host, {})[link.a.port] = link.b.host
        out.setdefault(link.b.host, {})[link.b.port] = link.a.host
    return out


BACKEND_TEXT = {
    "jaccl": "jaccl (full mesh)",
    "jaccl-ring": "jaccl-ring (a ring, not a full mesh)",
    "ring": "ring (no RDMA)",
    None: "no backend (the cables form neither a full mesh nor a ring)",
}


@dataclass
class Assessment:
    nodes: dict[str, Readiness]  # inventory order
    backend: str  # what the inventory asks for
    current: str | None  # what auto chooses from the cables and RDMA as they are
    projected: str | None  # what auto would choose once the Recovery checklist is done
    summary: str

    def hosts(self, status: str) -> list[str]:
        return [h for h, r in self.nodes.items() if r.status == status]

    @property
    def blocking(self) -> str | None:
        """With an RDMA backend (jaccl, jaccl-ring) asked for: why the run must stop, else None."""
        if self.backend not in fabric_backend.RDMA_BACKENDS:
            return None
        parts = []
        needs = self.hosts(NEEDS_RECOVERY)
        if needs:
            parts.append(f"{_join(needs)} {'needs' if len(needs) == 1 else 'need'} the Recovery step")
        cannot = self.hosts(NOT_CAPABLE)
        if cannot:
            parts.append(f"{_join(cannot)} cannot do RDMA (use ring for {'it' if len(cannot) == 1 else 'them'})")
        if not parts:
            return None
        return f"mlx_fleet_backend {self.backend} needs RDMA on every Mac: " + "; ".join(parts)


def classify_cluster(macos: dict[str, dict], thunderbolt: dict[str, dict], links: list[Link], *,
                     models: dict | None = None, locations: dict | None = None) -> dict[str, Readiness]:
    """Every Mac's readiness (inventory order), each port's outcome judged knowing its peer's status."""
    hosts = list(thunderbolt)
    models = models or {}
    locations = locations or {}
    cabled = cables_by_host(links)

    def classify(peer_status=None):
        return {h: classify_node(h, macos.get(h, {}), thunderbolt[h], model=models.get(h),
                                 location=locations.get(h), cabled=cabled.get(h, {}) if len(hosts) >= 2 else None,
                                 peer_status=peer_status) for h in hosts}

    first = classify()
    return classify({h: r.status for h, r in first.items()})


# Why a Mac cannot carry RDMA, as auto's reason says it (NOT_CAPABLE by its reason).
_CANNOT = {"thunderbolt 4": "cannot do RDMA (a Thunderbolt 4 Mac)",
           "macos": "cannot do RDMA (its macOS is older than " + RDMA_MIN_MACOS + ")",
           "no rdma_ctl": "cannot do RDMA (no rdma_ctl)"}


def carriers(nodes: dict[str, Readiness], links: list[Link], *,
             enabled: set[str] | frozenset[str] = frozenset()) -> fabric_backend.Carriers:
    """Which Macs and cables cannot carry RDMA now, by the same judgement the RDMA line prints: the
    one auto's backend follows. enabled: Macs to count as done with the Recovery step (the projection)."""
    hosts: dict[str, str] = {}
    refusals: dict[str, str] = {}
    for host, node in nodes.items():
        if node.status == NOT_CAPABLE:
            hosts[host] = _CANNOT.get(node.reason or "", "cannot do RDMA")
            refusals[host] = (f"{host} {hosts[host]}: {node.found}; {node.fix}"
                              + "; set mlx_fleet_backend: ring, or auto (it picks ring for such a Mac)")
        elif node.status == NEEDS_RECOVERY and host not in enabled:
            hosts[host] = "has RDMA off (the Recovery step is still to do)"
        elif node.status == ENABLED_NOT_WORKING and not node.ports:
            hosts[host] = "has RDMA on but no RDMA device (restart it)"
        if node.status in (NEEDS_RECOVERY, ENABLED_NOT_WORKING) and not node.ports:
            status = node.rdma_status or ("enabled" if node.status == ENABLED_NOT_WORKING else "disabled")
            refusals[host] = (f"{host} has no RDMA device (rdma_ctl status: {status}); enable it from "
                              "macOS Recovery with 'rdma_ctl enable'")
    cables: dict[str, str] = {}
    for link in links:
        why = [f"{end.host} Thunderbolt {end.port} is the {model.model_name} port beside Ethernet, where RDMA never "
               "comes up: move the cable to another port" for end, model in fabric_backend.broken_ends(
                   link, {h: n.model for h, n in nodes.items()})]
        if link.speed_gbps < FULL_SPEED_GBPS:
            why.append(f"{gbps(link.speed_gbps)}, a Thunderbolt 4 link: JACCL needs Thunderbolt 5 at both ends")
        for end in (link.a, link.b) if not why else ():  # a port down for a reason above needs no second line
            state = next((p for p in nodes[end.host].ports if p.receptacle == end.port), None)
            if state and state.outcome in ("down", "no device"):
                why.append(f"RDMA is {state.rdma_state or 'not active'} on {end.host} Thunderbolt {end.port}")
        if why:
            cables[str(link)] = "; ".join(why)
    return fabric_backend.Carriers(hosts, cables, refusals)


def assess(macos: dict[str, dict], thunderbolt: dict[str, dict], *, models: dict | None = None,
           locations: dict | None = None, backend: str = defaults.BACKEND) -> Assessment:
    """Classify every Mac (inventory order) and say what the cluster gains once the checklist is done."""
    hosts = list(thunderbolt)
    links, dummy = discover(hosts, thunderbolt)
    nodes = classify_cluster(macos, thunderbolt, links, models=models, locations=locations)
    needs = [h for h in hosts if nodes[h].status == NEEDS_RECOVERY]
    cannot = [h for h in hosts if nodes[h].status == NOT_CAPABLE]
    # What auto makes of RDMA as it is, and once every Mac needing the step has it.
    current = fabric_backend.choose("auto", hosts, thunderbolt, links, carriers=carriers(nodes, links)).backend
    projected = fabric_backend.choose("auto", hosts, thunderbolt, links,
                                      carriers=carriers(nodes, links, enabled=set(needs))).backend
    summary = _summary(hosts, needs, cannot, [h for h in hosts if nodes[h].status == ENABLED_NOT_WORKING],
                       backend, current, projected)
    return Assessment(nodes, backend, current, projected, summary)


def _summary(hosts, needs, cannot, broken, backend, current, projected) -> str:
    cannot_text = (f"; {_join(cannot)} cannot do RDMA, so ring is the way for "
                   f"{'it' if len(cannot) == 1 else 'them'}" if cannot else "")
    # Where the details are depends on who prints the summary: said there, not here.
    broken_text = (f"; {_join(broken)} {'has' if len(broken) == 1 else 'have'} RDMA enabled but not working"
                   if broken else "")
    if len(hosts) < 2:
        ready = "ready for RDMA" if not needs and not cannot else "not ready for RDMA"
        return f"{_join(hosts) or 'no Mac'}: {ready}; one Mac has no Thunderbolt fabric{cannot_text}{broken_text}"
    if not needs:
        if not cannot and not broken:
            return f"all {len(hosts)} Macs are ready for RDMA; the cabling supports {BACKEND_TEXT[current]}"
        return f"no Mac needs the Recovery step; the cabling supports {BACKEND_TEXT[current]}{cannot_text}{broken_text}"
    who = f"once {_join(needs)} {'is' if len(needs) == 1 else 'are'} enabled from Recovery"
    if projected == current:
        gain = f"{who}, the cabling still supports only {BACKEND_TEXT[projected]}"
    else:
        gain = f"{who}, the cabling supports {BACKEND_TEXT[projected]}"
    if backend == "auto":
        until = f"; until then auto falls back to {BACKEND_TEXT[current]}" if projected != current else ""
    elif backend in fabric_backend.RDMA_BACKENDS:
        until = f"; until then {backend} cannot run"
    else:
        until = f"; mlx_fleet_backend is {backend}"
    return gain + until + cannot_text + broken_text


# --- the ledger -----------------------------------------------------------------------------------


def read_ledger(path: str | Path) -> dict:
    path = Path(path)
    if not path.exists():
        return {"format": LEDGER_FORMAT, "nodes": {}}
    try:
        data = load_json(path.read_text())
        if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT or not isinstance(data.get("nodes"), dict):
            raise ValueError(f"format is not {LEDGER_FORMAT}")
        for host, seen in data["nodes"].items():
            if not isinstance(seen, dict) or not all(isinstance(seen.get(k), str) for k in LEDGER_FIELDS):
                raise ValueError(f"{host}: the entry needs {', '.join(LEDGER_FIELDS)}")
    except ValueError as exc:
        raise ValueError(f"{path}: not an RDMA ledger ({exc}); remove it to start a new one") from None
    return data


def note_regressions(assessment: Assessment, ledger: dict) -> list[str]:
    """Mark the Macs that were ready before and have RDMA off now; one line each."""
    lines = []
    for host, node in assessment.nodes.items():
        seen = ledger.get("nodes", {}).get(host)
        if not seen or node.status != NEEDS_RECOVERY:
            continue
        was = f"macOS {seen['product_version']} ({seen['build_version']})"
        now = f"macOS {node.product_version} ({node.build_version})"
        if seen.get("build_version") != node.build_version:
            node.regression_text = (f"RDMA is off again after a macOS update: last seen ready on {was} at "
                                    f"{seen['last_seen_ready']}, now {now} with RDMA disabled; the update switched "
                                    "it off: do the Recovery step again")
        else:
            node.regression_text = (f"RDMA is off again: last seen ready at {seen['last_seen_ready']} on the "
                                    f"same {now}; someone disabled it in Recovery or the NVRAM was reset: do the "
                                    "Recovery step again")
        lines.append(node.regression)
    return lines


def update_ledger(ledger: dict, assessment: Assessment, now: datetime | None = None) -> tuple[dict, bool]:
    """The ledger with every ready Mac's last sighting; and whether anything but the times changed
    (a Mac newly ready, or ready on another macOS build)."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    nodes = {h: dict(v) for h, v in ledger.get("nodes", {}).items()}
    changed = False
    for host, node in assessment.nodes.items():
        if node.status != READY:
            continue
        entry = {"last_seen_ready": stamp, "product_version": node.product_version,
                 "build_version": node.build_version, "serial_number": node.serial_number}
        old = nodes.get(host, {})
        if {k: v for k, v in old.items() if k != "last_seen_ready"} != \
                {k: v for k, v in entry.items() if k != "last_seen_ready"}:
            changed = True
        nodes[host] = entry
    return {"format": LEDGER_FORMAT, "nodes": dict(sorted(nodes.items()))}, changed

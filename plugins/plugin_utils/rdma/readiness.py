"""RDMA readiness per Mac, judged on the controller (docs/recovery/README.md).

From each Mac's ``mlx_fleet_macos`` and ``mlx_fleet_thunderbolt`` facts, its model and the cables
the fabric found: which Macs are ready, which need a person to run the Recovery step, which cannot
do RDMA at all (and must not be sent to Recovery), and which have RDMA on but not working. The
cabling questions (which ports are cables, which backend the cables allow) are answered by
``plugin_utils.fabric.discovery`` and ``fabric_backend``, here as everywhere. One Mac is judged in
``rdma_state`` and put in words in ``rdma_text``; here the cluster (said by ``render.rdma_summary``), and the ledger
of Macs last seen ready.
Pure Python: the action plugin is a thin wrapper.

Nothing here, or anywhere in mlx-fleet, switches RDMA on: only a person at the Mac can, in macOS
Recovery. The toolkit says who needs that visit and checks afterwards that it worked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import backend as fabric_backend
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import FULL_SPEED_GBPS, Link, discover, gbps
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.state import (
    ENABLED_NOT_WORKING, NEEDS_RECOVERY, NOT_CAPABLE, RDMA_MIN_MACOS, READY, Readiness, judge_node)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.words import STATUS_WORDS, describe

LEDGER_FILE = "rdma-ledger.json"
LEDGER_FORMAT = "mlx-fleet-rdma-ledger/1"
LEDGER_FIELDS = ("last_seen_ready", "product_version", "build_version")  # what a regression message quotes


def classify_node(host: str, macos: dict, thunderbolt: dict, *, model: str | None = None,
                  location: str | None = None, cabled: dict[int, str | None] | None = None,
                  peer_status: dict[str, str] | None = None) -> Readiness:
    """Classify one Mac: the judgment (rdma_state.judge_node, whose arguments these are) with its words
    (rdma_text.describe)."""
    node = judge_node(host, macos, thunderbolt, model=model, location=location, cabled=cabled,
                      peer_status=peer_status)
    node.state, node.found, node.fix = describe(node)
    return node


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
        out.setdefault(link.a.host, {})[link.a.receptacle] = link.b.host
        out.setdefault(link.b.host, {})[link.b.receptacle] = link.a.host
    return out


@dataclass
class Assessment:
    nodes: dict[str, Readiness]  # inventory order
    backend: str  # what the inventory asks for
    current: str | None  # what auto chooses from the cables and RDMA as they are
    projected: str | None  # what auto would choose once the Recovery checklist is done

    def hosts(self, status: str) -> list[str]:
        return [h for h, r in self.nodes.items() if r.status == status]

    @property
    def blocked(self) -> bool:
        """An RDMA backend (jaccl, jaccl-ring) is asked for and a Mac needs the Recovery step or cannot do RDMA:
        the run must stop (render.rdma_summary.blocking says why)."""
        return self.backend in fabric_backend.RDMA_BACKENDS and bool(self.hosts(NEEDS_RECOVERY) or self.hosts(NOT_CAPABLE))


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
    cables: dict[Cable, str] = {}
    for link in links:
        why = [f"{port_name(end.port)} is the {model.model_name} port beside Ethernet, where RDMA never "
               "comes up: move the cable to another port" for end, model in fabric_backend.broken_ends(
                   link, {h: n.model for h, n in nodes.items()})]
        if link.speed_gbps < FULL_SPEED_GBPS:
            why.append(f"{gbps(link.speed_gbps)}, a Thunderbolt 4 link: JACCL needs Thunderbolt 5 at both ends")
        for end in (link.a, link.b) if not why else ():  # a port down for a reason above needs no second line
            state = next((p for p in nodes[end.host].ports if p.port == end.port), None)
            if state and state.outcome in ("down", "no device"):
                why.append(f"RDMA is {state.rdma_state or 'not active'} on {port_name(end.port)}")
        if why:
            cables[link.cable] = "; ".join(why)
    return fabric_backend.Carriers(hosts, cables, refusals)


def assess(macos: dict[str, dict], thunderbolt: dict[str, dict], *, models: dict | None = None,
           locations: dict | None = None, backend: str = defaults.BACKEND) -> Assessment:
    """Classify every Mac (inventory order), and what auto chooses now and once the checklist is done."""
    hosts = list(thunderbolt)
    links, dummy = discover(hosts, thunderbolt)
    nodes = classify_cluster(macos, thunderbolt, links, models=models, locations=locations)
    needs = [h for h in hosts if nodes[h].status == NEEDS_RECOVERY]
    # What auto makes of RDMA as it is, and once every Mac needing the step has it.
    current = fabric_backend.choose("auto", hosts, thunderbolt, links, carriers=carriers(nodes, links)).backend
    projected = fabric_backend.choose("auto", hosts, thunderbolt, links,
                                      carriers=carriers(nodes, links, enabled=set(needs))).backend
    return Assessment(nodes, backend, current, projected)


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

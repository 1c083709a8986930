"""A new Mac joining the cluster, judged on the controller (docs/onboarding.md): its serial number and
model checked against the inventory, the cables to add (plugin_utils.checks.cable_advice) from what the
fabric finds on the ports (plugin_utils.judge.fabric) and what the plan lists, and whether the Mac needs
the Recovery step for the backend (plugin_utils.rdma.readiness). Pure Python: the action plugin
(onboard_plan) is a thin wrapper, and the visit sheet (plugin_utils.render.visit_sheet) prints the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import cable_advice
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import RDMA_BACKENDS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import discover
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.cable_advice import Advice
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS, model_for


@dataclass
class Onboarding:
    host: str
    model: str | None  # the model key, declared or derived; None when mlx-fleet has no such model
    serial_number: str
    advice: Advice  # the cabling to do (with auto, the ring alternative when a mesh is impossible)
    errors: list[str] = field(default_factory=list)  # the Mac cannot join as asked: nothing to do
    notes: list[str] = field(default_factory=list)  # said, and printed on the sheet
    needs_recovery: bool = False  # the backend uses RDMA and the Mac needs the Recovery step for it
    rdma: str = ""  # the Mac's RDMA readiness, one line
    rdma_status: str = ""  # the same as data: rdma.READY, rdma.NEEDS_RECOVERY or rdma.NOT_CAPABLE
    same_mac: str = ""  # the inventory's name for this very Mac (same serial number), when it is there already
    add: list[str] = field(default_factory=list)  # entries for mlx_fleet_cables
    unplug: list[str] = field(default_factory=list)  # entries to take out of mlx_fleet_cables
    seen: list[str] = field(default_factory=list)  # advised cables already plugged in

    @property
    def seen_steps(self) -> list[str]:
        """The advice's steps whose cable is in already."""
        steps = self.advice.steps()[len(self.advice.unplug):]
        return [step for step, cable in zip(steps, self.advice.cables) if _entry(cable) in self.seen]


def model_key(declared: str | None, macos: dict) -> str | None:
    """The inventory's model, else the catalogue's model with the Mac's identifier."""
    if declared:
        return declared
    found = model_for(None, macos)
    return found.key if found else None


def target_backend(requested: str, others: list[str], cables: list[Cable], thunderbolt: dict) -> str:
    """The backend to cable for. auto keeps what the cluster is: a full mesh stays a mesh (jaccl),
    anything else becomes a ring (jaccl-ring when every Mac has RDMA)."""
    if requested != "auto":
        return requested
    pairs = {frozenset((c.a.host, c.b.host)) for c in cables}
    if all(frozenset((a, b)) in pairs for i, a in enumerate(others) for b in others[i + 1:]):
        return "jaccl"
    return "jaccl-ring" if all(thunderbolt[h].get("rdma_devices") for h in others) else "ring"


def _entry(cable: Cable) -> str:
    return str(Cable(*cable.key))


def assess(new: str, macos: dict[str, dict], thunderbolt: dict[str, dict], *, models: dict | None = None,
           cables: list[str] | None = None, backend: str = defaults.BACKEND) -> Onboarding:
    """Judge ``new`` joining the others (every dict in inventory order, ``new`` included).

    models: host -> mlx_fleet_model where declared; cables: mlx_fleet_cables (None: the inventory has
    no plan yet, so the cables found become the plan); backend: mlx_fleet_backend.
    """
    names = list(macos)
    others = [n for n in names if n != new]
    keys = {n: model_key((models or {}).get(n), macos[n]) for n in names}
    serial = macos[new]["serial_number"]
    result = Onboarding(new, keys[new], serial, Advice(backend, ""))
    if not _judge_identity(result, others, macos, keys):
        return result

    # The cables: found on the ports (the fabric's discovery) and planned; both count as there.
    found = [link.cable for link in discover(names, thunderbolt)[0]]
    planned = parse_cables(cables or [])
    present = list({c.key: c for c in found + planned}.values())
    taken = {n: {p["receptacle"] for p in thunderbolt[n]["ports"] if p.get("connected")} for n in names}
    for cable in planned:
        for end in (cable.a, cable.b):
            taken.setdefault(end.host, set()).add(end.receptacle)
    hosts = [_host_ports(n, keys[n], macos[n], thunderbolt[n], taken[n]) for n in names]
    wanted = cable_advice.advise(new, hosts, present, target_backend(backend, others, present, thunderbolt))
    advice = wanted
    if not wanted.possible:
        if backend == "auto" and wanted.alternative and wanted.alternative.possible:
            advice = wanted.alternative  # auto runs whatever the cables give: say why, and go on
            result.notes.insert(0, f"a {wanted.topology} is impossible: {wanted.impossible}; auto goes ahead "
                                   f"with the best alternative, {advice.backend}")
        else:
            fix = (f"; to go ahead with it, set mlx_fleet_backend: {wanted.alternative.backend} and run again"
                   if wanted.alternative and wanted.alternative.possible else "")
            result.errors.append(f"{new}: {wanted.headline()}{fix}")
            result.advice = wanted
            return result

    # The new Mac's cables the advice counted as there belong to it too: planned by an earlier run
    # (to plug until seen), or plugged already (to write into the plan).
    live = {c.key for c in found}
    planned_keys = {c.key for c in planned}
    mine_too = [c for c in planned if c.key not in live] + [c for c in found if c.key not in planned_keys]
    advice.cables = [Cable(*(c.a, c.b) if c.a.host == new else (c.b, c.a))
                     for c in mine_too if new in (c.a.host, c.b.host)] + advice.cables
    result.advice = advice
    add = list(advice.cables)
    if cables is None:
        # No plan yet: the cables found between the others start it, or the fabric would call them extra.
        add = [c for c in found if new not in (c.a.host, c.b.host)] + add
    result.add = [_entry(c) for c in add]
    result.unplug = [_entry(c) for c in advice.unplug]
    result.seen = [_entry(c) for c in add if c.key in live]

    _judge_rdma(result, macos[new], thunderbolt[new], keys[new])
    return result


def _judge_identity(result: Onboarding, others: list[str], macos: dict[str, dict], keys: dict) -> bool:
    """False (with the error) when the new Mac is already in the inventory under another name; notes on an
    unknown model and on a macOS build the others do not run."""
    new, serial = result.host, result.serial_number
    same = [n for n in others if macos[n]["serial_number"] == serial]
    if same:
        result.same_mac = same[0]
        result.errors.append(f"{new}: serial number {serial} is already in the inventory as {same[0]}: it is the "
                             f"same Mac; onboard it under that name, or take {same[0]} out of the inventory first")
        return False
    if keys[new] is None:
        result.notes.append(f"{new}: mlx-fleet knows no model with identifier {macos[new]['model_identifier']}: "
                            "its ports come from the Mac itself and none is known to lack RDMA")
    builds = {(macos[n]["product_version"], macos[n]["build_version"]) for n in others}
    mine = (macos[new]["product_version"], macos[new]["build_version"])
    if builds and mine not in builds:
        theirs = ", ".join(f"{v} ({b})" for v, b in sorted(builds))
        result.notes.append(f"{new} runs macOS {mine[0]} ({mine[1]}) and the cluster {theirs}: Macs on different "
                            "builds fail in odd ways; update them to one build")
    return True


def _host_ports(name: str, key: str | None, macos: dict, thunderbolt: dict, taken: set) -> cable_advice.HostPorts:
    """One Mac's ports as the cable advice weighs them: all, taken, and those its model cannot use for RDMA."""
    model = MODELS.get(key)
    return cable_advice.HostPorts(
        name, tuple(sorted(p["receptacle"] for p in thunderbolt["ports"])), frozenset(taken),
        model.rdma_broken_ports if model else (),
        f"{model.model_name}, {model.key}" if model else macos["model_identifier"])


def _judge_rdma(result: Onboarding, macos: dict, thunderbolt: dict, key: str | None) -> None:
    """Whether the new Mac needs the Recovery visit for the backend the advice chose, or cannot join it."""
    readiness = rdma.classify_node(result.host, macos, thunderbolt, model=key)
    result.rdma, result.rdma_status = readiness.message, readiness.status
    uses_rdma = result.advice.backend in RDMA_BACKENDS
    result.needs_recovery = uses_rdma and readiness.status == rdma.NEEDS_RECOVERY
    if uses_rdma and readiness.status == rdma.NOT_CAPABLE:
        result.notes.append(f"{readiness.message}; {result.advice.backend} cannot include it: use ring")

"""What `sim up` builds: node names, models and cables for a topology keyword or a plan file."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, CablePlanError, Port, parse_cables
from mlx_fleet.sim.plan_file import load_plan_file
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import DEFAULT_MODEL, MODELS, Model

if TYPE_CHECKING:
    from mlx_fleet.sim.replay import Replay

TOPOLOGIES = ("mesh", "ring", "line")
# Generated nodes are named after the model's family: mini-1, studio-1, mbp-1, ...
_NAME_PREFIX = {"Mac mini": "mini", "Mac Studio": "studio", "MacBook Pro": "mbp", "MacBook Air": "air", "iMac": "imac",
                "Mac Pro": "macpro"}


@dataclass
class Layout:
    models: dict[str, Model]  # node name -> model, in rank order
    cables: list[Cable]
    rdma: dict[str, bool] = field(default_factory=dict)
    replays: dict[str, Replay] = field(default_factory=dict)  # nodes replaying a capture
    # nodes the controller reaches over a Thunderbolt cable: "bridge0", or a port number
    manage_over: dict[str, str | int] = field(default_factory=dict)


def _pick_port(model: Model, used: set[int]) -> int:
    """The next free port, RDMA-capable ones first, as a careful installer would cable."""
    free = [n for n, _ in model.thunderbolt_devices if n not in used]
    good = [n for n in free if n not in model.rdma_broken_ports]
    if not free:
        raise CablePlanError(f"{model.model_name} ({model.key}) has only {model.port_count} Thunderbolt ports")
    return (good or free)[0]


def generated_cables(models: dict[str, Model], topology: str) -> list[Cable]:
    names = list(models)
    n = len(names)
    if topology == "mesh":
        pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    elif topology == "ring":
        pairs = [(i, (i + 1) % n) for i in range(n if n > 2 else n - 1)]
    elif topology == "line":
        pairs = [(i, i + 1) for i in range(n - 1)]
    else:
        raise CablePlanError(f"unknown topology {topology!r} (mesh, ring, line or a plan file)")
    used: dict[str, set[int]] = {name: set() for name in names}
    cables = []
    for i, j in pairs:
        ends = []
        for name in (names[i], names[j]):
            port = _pick_port(models[name], used[name])
            used[name].add(port)
            ends.append(Port(name, port))
        cables.append(Cable(*ends))
    return cables


def catalogue_model(key: str) -> Model:
    if key not in MODELS:
        close = difflib.get_close_matches(key, MODELS, n=3, cutoff=0.6)
        raise CablePlanError(f"unknown model {key!r}; " + (f"did you mean {', '.join(close)}? " if close else "")
                             + "the keys are those of plugin_utils/base/mac_models.py (mini-m4-pro, studio-m4-max, ...)")
    return MODELS[key]


def build_layout(nodes: int | None, model: str | None, topology: str, rdma: str,
                 replays: dict[str, Replay] | None = None) -> Layout:
    """The cluster to build. Replayed nodes (``--replay``) take the hardware their capture shows:
    with a plan file, a replayed node the plan names keeps the plan's cables; with a topology
    keyword, replayed nodes come after the generated ones (none without --nodes) and are cabled
    only as their recordings show (the cluster adds those cables)."""
    replays = replays or {}
    if topology not in TOPOLOGIES:
        plan = load_plan_file(Path(topology))
        models = {name: replays[name].model if name in replays else catalogue_model(attrs.get("model", model or DEFAULT_MODEL))
                  for name, attrs in plan.nodes.items()}
        if nodes is not None and nodes != len(models):
            raise CablePlanError(f"--nodes {nodes} but plan file {topology} declares {len(models)} nodes")
        models.update((name, r.model) for name, r in replays.items() if name not in models)
        cables = parse_cables(plan.cables, {name: m.port_count for name, m in models.items()})
        plan_rdma = {name: bool(plan.nodes.get(name, {}).get("rdma", True)) for name in models}
    else:
        if replays and nodes is None:
            nodes = 0
        elif not nodes or nodes < 1:
            raise CablePlanError("--nodes must be at least 1")
        chosen = catalogue_model(model or DEFAULT_MODEL)
        prefix = _NAME_PREFIX[chosen.model_name]
        models = {f"{prefix}-{i}": chosen for i in range(1, nodes + 1)}
        cables = generated_cables(models, topology)
        for name, replay in replays.items():
            if name in models:
                raise CablePlanError(f"--replay {name}: a generated node has that name; pick another")
            models[name] = replay.model
        plan_rdma = {name: True for name in models}
    chosen_rdma = _rdma_choice(rdma, plan_rdma)
    # A recorded `rdma_ctl status` is the Mac's NVRAM: it wins over --rdma.
    chosen_rdma.update((name, r.rdma_enabled) for name, r in replays.items() if r.rdma_enabled is not None)
    return Layout(models, cables, rdma=chosen_rdma, replays=dict(replays))


def parse_manage_over(items: list[str] | None, nodes) -> dict[str, str | int]:
    """``--manage-over NODE=bridge0`` or ``NODE=tb:N``: how the controller is cabled to NODE."""
    chosen: dict[str, str | int] = {}
    for item in items or []:
        name, _, how = item.partition("=")
        port = how[3:] if how.startswith("tb:") else ""
        if how != "bridge0" and not port.isdigit():
            raise CablePlanError(f"--manage-over {item}: give NODE=bridge0 or NODE=tb:N (a Thunderbolt port number)")
        if name not in nodes:
            raise CablePlanError(f"--manage-over {item}: no node {name!r} in the cluster")
        chosen[name] = "bridge0" if how == "bridge0" else int(port)
    return chosen


def _rdma_choice(rdma: str, default: dict[str, bool]) -> dict[str, bool]:
    if rdma in ("", "plan"):
        return default
    if rdma == "all":
        return {name: True for name in default}
    if rdma == "none":
        return {name: False for name in default}
    enabled = {n.strip() for n in rdma.split(",") if n.strip()}
    unknown = enabled - set(default)
    if unknown:
        raise CablePlanError(f"--rdma names unknown node(s): {', '.join(sorted(unknown))}")
    return {name: name in enabled for name in default}

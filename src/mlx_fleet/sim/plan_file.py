"""What `mlx-fleet sim up --topology FILE` builds from: a plan file, or the cluster an inventory declares.

The simulator's reader of the cable plan (plugin_utils.declare.cable_plan parses the cables themselves),
so a declared cluster can be rehearsed as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import CablePlanError


@dataclass
class PlanFile:
    """A cluster as a plan file declares it: hosts with their attributes, and cables."""

    nodes: dict[str, dict]
    cables: list[str]


def load_plan_file(path: str | Path) -> PlanFile:
    """A plan file (``nodes:`` and ``cables:``), or the cluster an Ansible YAML inventory declares.

    An inventory (a file, or a folder with hosts.yml), as Ansible reads it (mlx_fleet.inventory_view),
    contributes the hosts of group ``mlx_cluster`` with their ``mlx_fleet_model``, and ``mlx_fleet_cables``.
    """
    path = Path(path)
    inventory = path / "hosts.yml" if path.is_dir() else path
    data = _read_yaml(inventory)
    if isinstance(data, dict) and "all" in data:
        return _plan_from_inventory(path)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict) or not data["nodes"]:
        raise CablePlanError(f"cable plan {path}: needs a 'nodes:' mapping of host names")
    nodes = {str(name): dict(attrs or {}) for name, attrs in data["nodes"].items()}
    cables = data.get("cables") or []
    if not isinstance(cables, list):
        raise CablePlanError(f"cable plan {path}: 'cables:' must be a list of 'host:port -- host:port'")
    return PlanFile(nodes, [str(c) for c in cables])


def _read_yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CablePlanError(f"cannot read cable plan {path}: {exc}") from exc


def _plan_from_inventory(source: Path, group: str = CLUSTER_GROUP) -> PlanFile:
    # Imported here: it brings ansible's templating (~0.3 s of CPU), which every other `mlx-fleet sim`
    # command, a test's many `sim exec` calls above all, would pay for at start.
    from mlx_fleet.inventory_view import InventoryView, InventoryViewError

    try:
        inventory = InventoryView([str(source)])
        hosts = {name: inventory.variables(name) for name in inventory.hosts(group)}
    except InventoryViewError as exc:
        raise CablePlanError(str(exc)) from None
    if not hosts:
        raise CablePlanError(f"inventory {source}: no hosts in group {group}")
    nodes = {name: {"model": str(hv["mlx_fleet_model"])} if hv.get("mlx_fleet_model") else {}
             for name, hv in hosts.items()}
    return PlanFile(nodes, [str(c) for c in next(iter(hosts.values())).get("mlx_fleet_cables") or []])

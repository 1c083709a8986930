"""What `mlx-fleet run` checks before it launches anything: one Finding per problem, nothing started on any Mac.

Here: the hostfile the backend needs is there, and is still the one the last converge published with the
cluster model (not edited or replaced since, and naming the model's Macs)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import MODEL_FILE, read_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.outputs import current_files
from mlx_fleet.verify.plan import settings_from_inventory


def hostfile_name(backend: str) -> str:
    """The published hostfile a backend runs on: the ring's own when asked for ring."""
    return RING_HOSTFILE if backend == "ring" else HOSTFILE


def before_launch(inventory: str, backend: str, command: list[str]) -> list[Finding]:
    """Every reason not to launch COMMAND with BACKEND on the cluster of INVENTORY (empty: launch)."""
    return hostfile_findings(settings_from_inventory([inventory]).output_dir, backend, inventory)


def hostfile_findings(folder: Path, backend: str, inventory: str) -> list[Finding]:
    """The backend's hostfile missing, or no longer the one published with the cluster model."""
    fix = f"publish them again: {fixes.run_command('hostfile', inventory, cli=True)}"
    name = hostfile_name(backend)
    path = folder / name
    if backend == "ring" and not path.exists() and (folder / HOSTFILE).exists():
        name, path = HOSTFILE, folder / HOSTFILE  # a ring cluster publishes only hostfile.json
    if not path.exists():
        return [Finding("hostfile", found=f"{path}: no hostfile", fix=fix)]
    if name not in current_files(folder):
        return [Finding("hostfile", found=f"{path} is not the hostfile the last converge published (changed "
                                          "since)", fix=fix)]
    try:
        hosts = [h["ssh"] for h in load_json(path.read_text())["hosts"]]
        model = read_model(folder)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [Finding("hostfile", found=f"{path}: cannot read it ({exc})", fix=fix)]
    if model is None:
        return [Finding("hostfile", found=f"{folder / MODEL_FILE}: no cluster model", fix=fix)]
    if sorted(hosts) != sorted(h.name for h in model.hosts):
        return [Finding("hostfile", found=f"{path} names {', '.join(hosts)}; the cluster model "
                                          f"{', '.join(h.name for h in model.hosts)}", fix=fix)]
    return []

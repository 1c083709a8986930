"""`mlx-fleet models status` on the controller, in two steps around the Macs' read: the pinned manifests every
Mac should hold (models.status.expected: a path entry hashed, a Hub entry from the lock), then every Mac's files
judged against them. The action plugins models_manifest and models_status only translate."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import ModelFileError, ModelManifest
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import ModelDeclarationError, parse_models
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.path_manifest import PathEntryError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import models_status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json

FACTS = ("mlx_fleet_model_files",)
SETTINGS = {"mlx_fleet_models": None, "mlx_fleet_models_hf_cache": defaults.MODELS_HF_CACHE,
            "mlx_fleet_models_dir": defaults.MODELS_DIR}


MODELS_LOCK_NAME = ".mlx-models.lock.json"  # beside the environment's lock, as `mlx-fleet lock` writes it


def locked_models(env_lock_file: str | None) -> dict[str, ModelManifest]:
    """The models' lock's pinned manifests by name (none before `mlx-fleet lock` wrote it); ModelFileError when it
    is not one mlx-fleet wrote. (w5-hub's models.lock_file.load_models_lock reads the same file: one replaces the
    other when both branches meet.)"""
    path = Path(env_lock_file).with_name(MODELS_LOCK_NAME) if env_lock_file else None
    if path is None or not path.is_file():
        return {}
    try:
        data = load_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"{path} is not a mlx-fleet models' lock ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != 1 or not isinstance(data.get("models"), list):
        raise ModelFileError(f"{path} is not a mlx-fleet models' lock of format 1")
    return {m.name: m for m in (ModelManifest.from_json(entry, str(path)) for entry in data["models"])}


def manifests(view: ClusterView, run: Run, lock_file: str | None) -> dict:
    """What every Mac should hold (status.Expected's JSON) and where (hf_cache, models_dir); StepFailed (bad
    input) for a declaration, the models' lock or a path entry's folder that cannot be read. LOCK_FILE: the
    environment's lock, beside which the models' lock is. Writes a path entry's record."""
    try:
        declared = parse_models(view.setting("mlx_fleet_models"))
        found = status.expected(declared, locked_models(lock_file), run.output_dir, write=run.write)
    except (ModelDeclarationError, ModelFileError, PathEntryError) as exc:
        raise StepFailed([str(exc)], bad_input=True) from None
    return dict(found.to_json(), changed=False, hf_cache=view.setting("mlx_fleet_models_hf_cache"),
                models_dir=view.setting("mlx_fleet_models_dir"))


def judge(view: ClusterView, run: Run, expected: dict) -> dict:
    """Every Mac read against EXPECTED (manifests' result): the report and its lines (msg)."""
    facts = view.having(FACTS).facts(FACTS[0])
    unread = [name for name in view.names if name not in facts]
    found = status.report(expected, facts, unread)
    return {"changed": False, "report": found,
            "msg": "\n".join(models_status.lines(found, run.inventory, cli=run.cli))}

"""`mlx-fleet models status` on the controller, in two steps around the Macs' read: the pinned manifests every
Mac should hold (models.status.expected: a path entry hashed, a Hub entry from the lock), then every Mac's files
judged against them. The action plugins models_manifest and models_status only translate."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import ModelFileError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import ModelDeclarationError, parse_models
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_file import load_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.path_manifest import PathEntryError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import models_status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed

FACTS = ("mlx_fleet_model_files",)
SETTINGS = {"mlx_fleet_models": None, "mlx_fleet_models_hf_cache": defaults.MODELS_HF_CACHE,
            "mlx_fleet_models_dir": defaults.MODELS_DIR}


def manifests(view: ClusterView, run: Run, lock_file: str | None) -> dict:
    """What every Mac should hold (status.Expected's JSON) and where (hf_cache, models_dir); StepFailed (bad
    input) for a declaration, a lock or a path entry's folder that cannot be read. Writes a path entry's record."""
    try:
        declared = parse_models(view.setting("mlx_fleet_models"))
        lock = load_lock(lock_file)[0] if lock_file and Path(lock_file).is_file() else None
        found = status.expected(declared, lock, str(lock_file), run.output_dir, write=run.write)
    except (ModelDeclarationError, EnvLockError, ModelFileError, PathEntryError) as exc:
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

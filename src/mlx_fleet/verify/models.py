"""`verify --script FILE --model NAME`: the declared model the task loads, present and verified (every byte hashed
against its pin) on every Mac before anything starts, and its path on the Macs, given to the task as
MLX_FLEET_MODEL_PATH (run.with_model) (the same path on every Mac: a Hub entry's snapshot folder, a path entry's folder).

The Macs are read as `models status --deep` reads them (module_utils.model_files, sent over the same ssh verify
uses and run by the cluster's interpreter) and judged by the same judge (plugin_utils.models.status)."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults, model_files
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import join
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import ModelFileError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import ModelDeclarationError, parse_models
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    ModelsLockError, load_models_lock, models_lock_path)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.path_manifest import PathEntryError
from mlx_fleet.verify import nodes
from mlx_fleet.verify.plan import Settings, VerifyError
READ_TIMEOUT = 3600  # seconds for one Mac to hash the model's every byte (about 600 GB at 1 GB/s with room)
# Appended to module_utils/model_files.py's own source: the deep read of the manifest given on stdin.
_READ = ("\nimport json, sys\nasked = json.load(sys.stdin)\nprint(json.dumps(read_models("
         "[asked['manifest']], asked['hf_cache'], asked['models_dir'], True)))\n")


def pinned(settings: Settings, name: str, inventory: str) -> dict:
    """The pinned manifest (ModelManifest JSON) of the declared model NAME; VerifyError when it is not declared
    or not pinned, or its declaration, the models' lock or its folder cannot be read."""
    try:
        chosen = [m for m in parse_models(settings.models) if m.name == name]
        if not chosen:
            raise VerifyError(f"--model {name}: not a model of mlx_fleet_models")
        locked = load_models_lock(models_lock_path(settings.lock_file)) if chosen[0].is_hub else {}
        found = status.expected(tuple(chosen), locked, settings.output_dir, write=False)
    except (ModelDeclarationError, ModelFileError, ModelsLockError, PathEntryError) as exc:
        raise VerifyError(str(exc)) from None
    if found.not_pinned:
        raise VerifyError(f"--model {name}: not pinned: run {fixes.run_command('lock', inventory, cli=True)}")
    return found.manifests[0].to_json()


def where(settings: Settings) -> tuple[str, str]:
    """(hf_cache, models_dir) on the Macs, as the inventory or the defaults say."""
    return settings.hf_cache or defaults.MODELS_HF_CACHE, settings.models_dir or defaults.MODELS_DIR


def path_on_macs(manifest: dict, hf_cache: str, models_dir: str) -> str:
    """Where the task finds the model on every Mac: a Hub entry's pinned snapshot, a path entry's folder."""
    root = model_files.model_root(manifest, hf_cache, models_dir)
    return os.path.join(root, "snapshots", manifest["commit"]) if manifest["source"] == model_files.HUB else root


def read(hosts: list[str], manifest: dict, python: str, hf_cache: str, models_dir: str) -> dict[str, dict | str]:
    """Per Mac its mlx_fleet_model_files for MANIFEST, every byte hashed, or why it could not be read."""
    code = Path(model_files.__file__).read_text() + _READ
    command = f"{shlex.quote(python)} -B -c {shlex.quote(code)}"
    asked = json.dumps({"manifest": manifest, "hf_cache": hf_cache, "models_dir": models_dir}).encode()

    def one(host: str) -> dict | str:
        result = nodes.ssh(nodes.by_name(host), command, asked, timeout=READ_TIMEOUT)
        if result.returncode != 0:
            said = result.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"not read ({said[-1] if said else f'exit {result.returncode}'})"
        try:
            return json.loads(result.stdout)
        except ValueError:
            return "not read (its answer is not JSON)"
    return nodes.each(hosts, one)


def refusal(name: str, manifest: dict, held: dict[str, dict | str], inventory: str) -> str | None:
    """One line naming every Mac that does not hold the model verified, and the command that copies it; None
    when every Mac does."""
    lacking = []
    for host, facts in held.items():
        if isinstance(facts, str):
            lacking.append(f"{host} ({facts})")
            continue
        (row,) = status.mac_rows(host, [manifest], facts)
        if not row["verified"]:
            wrong = [f"{finding['fact']}: {finding['found']}" for finding in row["findings"]]
            lacking.append(f"{host} ({'; '.join(wrong)})")
    if not lacking:
        return None
    return (f"--model {name} is not present and verified on {join(lacking)}: nothing started; copy it: "
            f"{fixes.run_command('models', inventory, cli=True)}")

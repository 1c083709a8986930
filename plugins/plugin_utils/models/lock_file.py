"""The models' lock (`.mlx-models.lock.json`, beside the environment's lock): every Hub model the inventory declares,
pinned to a commit with each file's size and hash (base.model_files.ModelManifest), as `mlx-fleet lock` wrote it.

A file of its own, not a section of the environment's lock: that file's bytes are the lock hash every Mac's
environment fingerprint records, so pinning a model there would rebuild every Mac's environment.
"""

from __future__ import annotations

import os
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import json_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import (
    ModelFileError, ModelManifest)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text, load_json

MODELS_LOCK_NAME = ".mlx-models.lock.json"
MODELS_LOCK_FORMAT = 1
# How a re-pin is asked for: the CLI's option, the lock playbook's variable.
REPIN_OPTION = "--update-models"
REPIN_VARIABLE = "mlx_fleet_lock_update_models"


class ModelsLockError(ValueError):
    """The models cannot be pinned, or their lock cannot be read: one line naming the model and where. REPIN: the
    model whose re-pin is the fix."""

    def __init__(self, message: str, repin: str | None = None):
        super().__init__(message)
        self.repin = repin


def models_lock_path(env_lock_file: str | os.PathLike) -> Path:
    """The models' lock: beside the environment's lock (the inventory's mlx_env_lock_file)."""
    return Path(env_lock_file).with_name(MODELS_LOCK_NAME)


def load_models_lock(path: str | os.PathLike) -> dict[str, ModelManifest]:
    """The pinned models by name; none when the file is not there yet."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelsLockError(f"cannot read the models' lock {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = load_json(text)
        if not isinstance(data, dict) or data.get("format") != MODELS_LOCK_FORMAT or not isinstance(data.get("models"), list):
            raise ModelFileError(f"not a models' lock of format {MODELS_LOCK_FORMAT}")
        manifests = [ModelManifest.from_json(entry, str(path)) for entry in data["models"]]
    except ValueError as exc:  # ModelFileError, or JSON that is not
        raise ModelsLockError(f"{path} is not a mlx-fleet models' lock ({exc}); move it away and pin again") from None
    return {m.name: m for m in manifests}


def models_lock_text(manifests) -> str:
    return json_text({"format": MODELS_LOCK_FORMAT, "models": [m.to_json() for m in manifests]})


def write_models_lock(path: str | os.PathLike, manifests) -> bool:
    """Write the lock when its text differs (atomically: a run reading it sees the old lock or the new one); True
    when written."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(path, models_lock_text(manifests))


def models_lock_problem(problem: ModelsLockError, inventory: str, *, cli: bool = False) -> str:
    """The problem as one line, with the command that re-pins its model when that is the fix."""
    if not problem.repin:
        return str(problem)
    command = fixes.run_command("lock", inventory, cli=cli)
    option = f"{REPIN_OPTION} {problem.repin}" if cli else f"-e {REPIN_VARIABLE}={problem.repin}"
    return f"{problem}; pin it again: {command} {option}"

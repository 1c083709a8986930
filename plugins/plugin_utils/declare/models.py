"""The models the inventory declares (`mlx_fleet_models`), in canonical form, and where they live on a Mac.

Each entry is a Hub repository at a revision, `{name, repo, revision, repo_type}` (`repo_type` model or
dataset, `revision` a branch, tag or commit; `mlx-fleet lock` pins it to a commit), or a folder on the
controller, `{name, path}`. The same declaration holds for every Mac of the cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults

# Where the Macs keep models (the inventory's mlx_fleet_models_hf_cache and mlx_fleet_models_dir).
DEFAULT_HF_CACHE = defaults.MODELS_HF_CACHE
DEFAULT_MODELS_DIR = defaults.MODELS_DIR
REPO_TYPES = ("model", "dataset")
# A name becomes a folder on every Mac and a word on the command line (models sync NAME).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# huggingface_hub's repo id rule: [namespace/]name of letters, digits, "-", "_", "." ("--" and ".." refused).
_REPO = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]*")
_KEYS = {"name", "repo", "revision", "repo_type", "path"}


class ModelDeclarationError(ValueError):
    """mlx_fleet_models names something that cannot be a model: the message names the entry and the field."""


@dataclass(frozen=True)
class ModelDeclaration:
    name: str
    repo: str | None = None
    revision: str = "main"
    repo_type: str = "model"
    path: str | None = None

    @property
    def is_hub(self) -> bool:
        return self.repo is not None


def parse_models(value, where: str = "mlx_fleet_models") -> tuple[ModelDeclaration, ...]:
    """The declared models, or ModelDeclarationError naming the first bad entry and field."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ModelDeclarationError(f"{where} must be a list of models ({{name, repo, revision}} or {{name, path}})")
    models = tuple(_parse_entry(entry, f"{where}[{index}]") for index, entry in enumerate(value))
    names = [m.name for m in models]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ModelDeclarationError(f"{where} declares {', '.join(twice)} more than once")
    return models


def _parse_entry(entry, where: str) -> ModelDeclaration:
    if not isinstance(entry, dict):
        raise ModelDeclarationError(f"{where} is not a mapping")
    unknown = sorted(set(map(str, entry)) - _KEYS)
    if unknown:
        raise ModelDeclarationError(f"{where} has unknown keys {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})")
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
        raise ModelDeclarationError(f"{where}: name {name!r} is not a plain name (letters, digits, '.', '_', '-')")
    repo, path = entry.get("repo"), entry.get("path")
    if (repo is None) == (path is None):
        raise ModelDeclarationError(f"{where} ({name}) needs exactly one of repo (a Hub repository) or path (a folder)")
    if path is not None:
        if not isinstance(path, str) or not path.strip():
            raise ModelDeclarationError(f"{where} ({name}): path {path!r} is not a folder name")
        if set(entry) - {"name", "path"}:
            raise ModelDeclarationError(f"{where} ({name}): a path entry takes no revision or repo_type")
        return ModelDeclaration(name, path=path)
    if not isinstance(repo, str) or not _REPO.fullmatch(repo) or "--" in repo or ".." in repo:
        raise ModelDeclarationError(f"{where} ({name}): repo {repo!r} is not a Hub repository id (ORG/NAME)")
    revision = entry.get("revision", "main")
    if not isinstance(revision, str) or not revision.strip() or revision != revision.strip():
        raise ModelDeclarationError(f"{where} ({name}): revision {revision!r} is not a branch, tag or commit")
    repo_type = entry.get("repo_type", "model")
    if repo_type not in REPO_TYPES:
        raise ModelDeclarationError(f"{where} ({name}): repo_type {repo_type!r} is not one of {', '.join(REPO_TYPES)}")
    return ModelDeclaration(name, repo=repo, revision=revision, repo_type=repo_type)


def parse_models_source(value, macs: list[str], where: str = "mlx_fleet_models_source") -> str | None:
    """The Mac that fetches the Hub entries instead of the controller (None: the controller does), or
    ModelDeclarationError naming the value and the fix when it is not one of MACS, the cluster's."""
    if value in (None, ""):
        return None
    if value not in macs:
        raise ModelDeclarationError(f"{where}: {value!r} is not a Mac of the cluster ({', '.join(macs)}): name one of "
                                    "them, or leave it out to fetch the Hub entries on the controller")
    return value

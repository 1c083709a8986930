"""`mlx-fleet lock` for the models: each Hub entry of `mlx_fleet_models` pinned to a commit with every file's size and
hash as the Hub publishes them (`HfApi.repo_info(files_metadata=True)`: an LFS file's sha256, a git file's blob id).

A model already pinned for the same repo and revision stays pinned (its commit checked to be still on the Hub), so a
branch that moves on the Hub never changes the cluster silently; re-pinning is asked for by name (update). The Hub is
the one huggingface_hub knows: HF_ENDPOINT, the user's token (HF_TOKEN or `hf auth login`) read by huggingface_hub
itself and never by mlx-fleet. huggingface_hub is imported only when a Hub model is declared.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import (
    HUB, ModelFile, ModelFileError, ModelManifest)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import (
    ModelDeclaration, ModelDeclarationError, parse_models)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    ModelsLockError, load_models_lock, models_lock_path, models_lock_text, write_models_lock)

EVERY_MODEL = "all"  # update: re-pin every Hub model


def update_models_lock(declared, env_lock_file: str, update=(), *, write: bool = True, hub=None) -> dict:
    """Pin the Hub models DECLARED (mlx_fleet_models, raw) into the models' lock beside ENV_LOCK_FILE, keeping the
    pins of those not in UPDATE (names, or EVERY_MODEL); written when its text differs (and WRITE). HUB: a
    huggingface_hub HfApi (default: one made here). What it found: changed, the lock file, the names pinned now and
    those kept, the files and bytes pinned."""
    try:
        models = [m for m in parse_models(declared) if m.is_hub]
    except ModelDeclarationError as exc:
        raise ModelsLockError(str(exc)) from None
    path = models_lock_path(env_lock_file)
    found = {"changed": False, "models_lock_file": str(path), "pinned": [], "kept": [], "files": 0, "bytes": 0}
    pinned = load_models_lock(path)
    if not models and not pinned:
        return found  # nothing declared, nothing to drop: no file
    names = {m.name for m in models}
    wanted = names if EVERY_MODEL in update else set(update)
    if wanted - names:
        raise ModelsLockError(f"re-pin asked for {', '.join(sorted(wanted - names))}: mlx_fleet_models declares no "
                              f"Hub model of that name (Hub models: {', '.join(sorted(names)) or 'none'})")
    if models and hub is None:
        hub = hub_client()
    manifests = []
    for model in models:
        kept = pinned.get(model.name)
        if kept and model.name not in wanted and (kept.repo, kept.repo_type, kept.revision) == (
                model.repo, model.repo_type, model.revision):
            _ask(hub, model, kept.commit, files_metadata=False)  # the pinned commit is still there
            manifests.append(kept)
            found["kept"].append(model.name)
        else:
            manifests.append(pin(hub, model))
            found["pinned"].append(model.name)
    found.update(files=sum(len(m.files) for m in manifests), bytes=sum(m.total_bytes for m in manifests))
    try:
        found["changed"] = Path(path).read_text() != models_lock_text(manifests)
    except (OSError, UnicodeDecodeError):
        found["changed"] = True
    if found["changed"] and write:
        write_models_lock(path, manifests)
    return found


def pin(hub, model: ModelDeclaration) -> ModelManifest:
    """MODEL's revision as the Hub has it now: its commit and every file's size and hash."""
    info = _ask(hub, model, model.revision, files_metadata=True)
    where = f"the Hub at {hub.endpoint}: model {model.name} ({model.repo}@{model.revision})"
    files = []
    for sibling in info.siblings or ():
        lfs = sibling.lfs
        entry = {"path": sibling.rfilename, "size": lfs.size if lfs else sibling.size}
        entry.update({"sha256": lfs.sha256} if lfs else {"git_sha1": sibling.blob_id})
        try:
            files.append(ModelFile.from_json(entry, where))
        except ModelFileError as exc:
            raise ModelsLockError(str(exc)) from None
    try:
        return ModelManifest.from_json(ModelManifest(model.name, HUB, tuple(files), model.repo, model.repo_type,
                                                     model.revision, info.sha).to_json(), where)
    except ModelFileError as exc:  # no commit, or a file twice
        raise ModelsLockError(str(exc)) from None


def hub_client():
    """huggingface_hub's HfApi, as the user's environment sets it (HF_ENDPOINT, the token)."""
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise ModelsLockError("mlx_fleet_models declares Hub models: pinning them needs the Python package "
                              "huggingface_hub on the controller (pip install huggingface_hub)") from None
    return HfApi()


def _ask(hub, model: ModelDeclaration, revision: str, *, files_metadata: bool):
    """The repo's info at REVISION; each of the Hub's refusals as one line naming the model and the Hub."""
    with hub_refusals(hub.endpoint, model, revision):
        return hub.repo_info(model.repo, repo_type=model.repo_type, revision=revision, files_metadata=files_metadata)


# The Hub's refusals by kind, each with the class of huggingface_hub.errors it is (the most specific first: a gated
# repo's error is a RepositoryNotFoundError too); anything else raised is the Hub not answering (UNREACHABLE). A Mac
# that fetches a Hub entry (model_copy) classifies its client's errors by the same table.
REFUSALS = (("gated", "GatedRepoError"), ("repo_not_found", "RepositoryNotFoundError"),
            ("revision_not_found", "RevisionNotFoundError"), ("offline", "OfflineModeIsEnabled"),
            ("http", "HfHubHTTPError"))
UNREACHABLE = "unreachable"


@contextmanager
def hub_refusals(endpoint: str, model: ModelDeclaration, revision: str):
    """A call to the Hub at ENDPOINT about MODEL at REVISION: each of its refusals as one ModelsLockError line."""
    from huggingface_hub import errors

    try:
        yield
    except Exception as exc:  # the client's transport errors too (httpx2's): the Hub did not answer
        kind = next((kind for kind, name in REFUSALS if isinstance(exc, getattr(errors, name))), UNREACHABLE)
        detail = _first_line(exc)
        raise refusal(kind, detail if kind != UNREACHABLE else f"{type(exc).__name__}: {detail}",
                      endpoint, model, revision) from None


def refusal(kind: str, detail: str, endpoint: str, model: ModelDeclaration, revision: str) -> ModelsLockError:
    """The Hub at ENDPOINT's refusal of KIND (REFUSALS, or UNREACHABLE) about MODEL at REVISION, as one line; DETAIL:
    the first line of what the client said (with its error's name when the Hub did not answer)."""
    what = f"model {model.name}: {model.repo_type} {model.repo}"
    if kind == "gated":
        return ModelsLockError(f"{what} is gated on the Hub at {endpoint}: accept its terms on the Hub with your "
                               "account, then log in here: hf auth login")
    if kind == "repo_not_found":
        return ModelsLockError(f"{what} is not on the Hub at {endpoint} (or is private: log in with an account "
                               "that may read it: hf auth login)")
    if kind == "revision_not_found" and revision != model.revision:
        return ModelsLockError(f"{what}: its pinned commit {revision} (of revision {model.revision}) is no longer on "
                               f"the Hub at {endpoint}", repin=model.name)
    if kind == "revision_not_found":
        return ModelsLockError(f"{what} has no revision {revision!r} on the Hub at {endpoint}")
    if kind == "offline":
        return ModelsLockError(f"{what}: pinning needs the Hub, and HF_HUB_OFFLINE is set")
    if kind == "http":
        return ModelsLockError(f"{what}: the Hub at {endpoint} answered {detail}")
    return ModelsLockError(f"{what}: the Hub at {endpoint} did not answer ({detail})")


def summary_line(found: dict) -> str:
    """One line of what the models' lock holds now and where."""
    pinned = f"{len(found['pinned'])} pinned ({', '.join(found['pinned'])})" if found["pinned"] else "0 pinned"
    return (f"models: {pinned}, {len(found['kept'])} kept as pinned, {found['files']} files, {found['bytes']} bytes "
            f"-> {found['models_lock_file']}")


def _first_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__

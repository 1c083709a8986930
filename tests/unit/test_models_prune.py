"""`models prune` on one Mac (the models_prune module, on real files): it removes what the sync wrote (model_copy's
record of it) that no declared model pins, in check mode lists the same and removes nothing, and never removes a
file the sync did not write: a snapshot put there by hand, a blob such a snapshot still links to, a folder of
another name."""

from __future__ import annotations

import os
import time

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files
from test_models_sync import TOKEN, pinned_file, serving

DATA = {"model.safetensors": os.urandom(50_000), "config.json": b"{}"}
COMMIT, OTHER = "a" * 40, "b" * 40


def synced(tmp_path, manifest: dict) -> dict:
    """MANIFEST copied onto this 'Mac' by model_copy, as a sync does; the module's parameters."""
    from ansible_collections.mlx_fleet.cluster.plugins.modules import model_copy

    sender = serving(tmp_path, DATA)
    params = {"models": [manifest], "hf_cache": str(tmp_path / "hub"), "models_dir": str(tmp_path / "models"),
              "token": TOKEN, "timeout": 30, "serve": None,
              "receive": [{"sender": "controller", "address": "127.0.0.1", "port": sender.port,
                           "files": [{"model": "m", "path": name} for name in DATA]}]}
    assert model_copy.copy(params)["failed"] == []
    sender.wait()
    return params


def test_prune_removes_only_what_the_sync_wrote_and_no_entry_pins(tmp_path, run_module):
    from ansible_collections.mlx_fleet.cluster.plugins.modules import models_prune

    hub = {"name": "m", "source": "hub", "repo": "acme/tiny", "repo_type": "model", "revision": "main",
           "commit": COMMIT, "files": [pinned_file(name, blob) for name, blob in DATA.items()]}
    path = {"name": "m", "source": "path", "files": hub["files"]}
    synced(tmp_path, hub)
    synced(tmp_path, path)
    root = model_files.model_root(hub, str(tmp_path / "hub"), "")
    config_blob = model_files.blob_path(root, hub["files"][1])
    # By hand: another commit's snapshot linking to the sync's config blob, and a folder of another name.
    mine = os.path.join(root, "snapshots", OTHER, "config.json")
    os.makedirs(os.path.dirname(mine))
    os.symlink(os.path.relpath(config_blob, os.path.dirname(mine)), mine)
    (tmp_path / "models" / "hand").mkdir()
    (tmp_path / "models" / "hand" / "w.bin").write_bytes(b"x")
    args = {"models": [hub], "hf_cache": str(tmp_path / "hub"), "models_dir": str(tmp_path / "models")}

    kept = run_module(models_prune.main, args)  # the Hub entry pinned: only the path entry's folder goes
    assert kept["removed"] == [str(tmp_path / "models" / "m" / name) for name in sorted(DATA)]
    assert not (tmp_path / "models" / "m").exists() and (tmp_path / "models" / "hand" / "w.bin").is_file()
    assert model_files.read_model(hub, str(tmp_path / "hub"), "", True)["present"] is True
    assert run_module(models_prune.main, args)["changed"] is False

    nothing = dict(args, models=[], _ansible_check_mode=True, _ansible_diff=True)
    checked = run_module(models_prune.main, nothing)
    weights_blob = model_files.blob_path(root, hub["files"][0])
    snapshot = [os.path.join(root, "snapshots", COMMIT, name) for name in sorted(DATA)]
    going = sorted([weights_blob, os.path.join(root, "refs", "main")] + snapshot)
    assert (checked["changed"], sorted(checked["removed"])) == (True, going)
    assert checked["diff"]["before"].splitlines() == checked["removed"] and checked["diff"]["after"] == ""
    assert all(os.path.lexists(p) for p in going)  # check mode: listed, not removed
    assert checked["bytes"] == len(DATA["model.safetensors"]) + len(COMMIT)  # the blob and the ref

    done = run_module(models_prune.main, dict(nothing, _ansible_check_mode=False))
    assert sorted(done["removed"]) == going and not any(os.path.lexists(p) for p in going)
    assert os.path.isfile(config_blob) and os.path.islink(mine)  # a snapshot made by hand still links to it
    assert model_files.read_written(model_files.written_path(hub, str(tmp_path / "hub"), "")) == [
        os.path.relpath(config_blob, root)]
    assert run_module(models_prune.main, dict(nothing, _ansible_check_mode=False))["changed"] is False


def test_a_file_the_sync_wrote_and_changed_since_is_found_by_its_date_without_hashing(tmp_path):
    """Sizes and dates by default: a file of the sync's record modified after the record is changed_since_sync; a
    file the sync did not write has no date to compare (only --deep tells)."""
    path = {"name": "m", "source": "path", "files": [pinned_file(name, blob) for name, blob in DATA.items()]}
    synced(tmp_path, path)
    cache, models = str(tmp_path / "hub"), str(tmp_path / "models")
    assert model_files.read_model(path, cache, models, False)["present"] is True
    weights = tmp_path / "models" / "m" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[7] ^= 1
    record = model_files.written_path(path, cache, models)
    hour_ago = int((time.time() - 3600) * 1e9)
    for written in [record] + [str(tmp_path / "models" / "m" / name) for name in DATA]:  # the sync, an hour ago
        os.utime(written, ns=(hour_ago, hour_ago))
    weights.write_bytes(bytes(data))
    states = {f["path"]: f["state"] for f in model_files.read_model(path, cache, models, False)["files"]}
    assert states == {"model.safetensors": model_files.CHANGED_SINCE_SYNC, "config.json": model_files.OK}
    deep = {f["path"]: f["state"] for f in model_files.read_model(path, cache, models, True)["files"]}
    assert deep["model.safetensors"] == model_files.HASH_DIFFERS
    os.remove(record)  # as if copied by hand: no date to compare
    assert model_files.read_model(path, cache, models, False)["present"] is True

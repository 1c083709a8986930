"""`models prune` on one Mac (the models_prune module, on real files): it removes what the sync wrote (model_copy's
record of it) that no declared model pins, in check mode lists the same and removes nothing, and never removes a
file the sync did not write: a snapshot put there by hand, a blob such a snapshot still links to, a folder of
another name. That record stamps each file as the sync verified it (size, modification time): the reads trust a
file still so (verify) and hash the others."""

from __future__ import annotations

import json
import os

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
    assert model_files.read_record(model_files.written_path(hub, str(tmp_path / "hub"), "")) == {
        os.path.relpath(config_blob, root): model_files.stamp(config_blob)}  # its stamp kept
    assert run_module(models_prune.main, dict(nothing, _ansible_check_mode=False))["changed"] is False


def states_and_hashed(manifest: dict, cache: str, models: str, **how) -> tuple[dict[str, str], int]:
    found = model_files.read_models([manifest], cache, models, how.get("deep", False), how.get("verify", False))
    return {f["path"]: f["state"] for f in found["models"][0]["files"]}, found["hashed_bytes"]


def test_the_record_stamps_each_file_received_as_verified_and_the_hub_links_and_ref_unstamped(tmp_path):
    hub = {"name": "m", "source": "hub", "repo": "acme/tiny", "repo_type": "model", "revision": "main",
           "commit": COMMIT, "files": [pinned_file(name, blob) for name, blob in DATA.items()]}
    synced(tmp_path, hub)
    root = model_files.model_root(hub, str(tmp_path / "hub"), "")
    blobs = [os.path.relpath(model_files.blob_path(root, pinned), root) for pinned in hub["files"]]
    record = model_files.read_record(model_files.written_path(hub, str(tmp_path / "hub"), ""))
    assert {p: s for p, s in record.items() if s} == {p: model_files.stamp(os.path.join(root, p)) for p in blobs}
    assert sorted(p for p, s in record.items() if s is None) == ["refs/main"] + [
        f"snapshots/{COMMIT}/{name}" for name in sorted(DATA)]


def test_a_file_the_sync_verified_is_hashed_again_only_when_its_size_or_date_changed(tmp_path):
    """As git's index: verify trusts a file of the sync's record still of the size and date it verified, and hashes
    every other; the read without hashing names such a file changed_since_sync; deep hashes every byte."""
    path = {"name": "m", "source": "path", "files": [pinned_file(name, blob) for name, blob in DATA.items()]}
    synced(tmp_path, path)
    cache, models = str(tmp_path / "hub"), str(tmp_path / "models")
    everything = sum(len(blob) for blob in DATA.values())
    assert states_and_hashed(path, cache, models, verify=True) == (dict.fromkeys(DATA, model_files.OK), 0)
    assert states_and_hashed(path, cache, models, deep=True) == (dict.fromkeys(DATA, model_files.OK), everything)

    weights = tmp_path / "models" / "m" / "model.safetensors"
    verified_at = weights.stat().st_mtime_ns
    data = bytearray(weights.read_bytes())
    data[7] ^= 1
    weights.write_bytes(bytes(data))  # the same size, another date
    os.utime(weights, ns=(verified_at + 10**9, verified_at + 10**9))
    changed = {"model.safetensors": model_files.HASH_DIFFERS, "config.json": model_files.OK}
    assert states_and_hashed(path, cache, models, verify=True) == (changed, len(data))
    assert states_and_hashed(path, cache, models) == (
        dict(changed, **{"model.safetensors": model_files.CHANGED_SINCE_SYNC}), 0)

    os.utime(weights, ns=(verified_at, verified_at))  # its date put back: trusted, found only by deep
    assert states_and_hashed(path, cache, models, verify=True) == (dict.fromkeys(DATA, model_files.OK), 0)
    assert states_and_hashed(path, cache, models, deep=True) == (changed, everything)

    weights.write_bytes(DATA["model.safetensors"] + b"x")  # another size: never trusted, not hashed either
    assert states_and_hashed(path, cache, models, verify=True)[0]["model.safetensors"] == model_files.SIZE_DIFFERS

    weights.write_bytes(DATA["model.safetensors"])
    os.utime(weights, ns=(verified_at - 10**9, verified_at - 10**9))  # the right bytes, an earlier date: hashed
    assert states_and_hashed(path, cache, models, verify=True) == (dict.fromkeys(DATA, model_files.OK), len(data))

    record = model_files.written_path(path, cache, models)
    with open(record, "w") as handle:  # an earlier mlx-fleet's record: paths only, no stamps
        json.dump(sorted(DATA), handle)
    assert model_files.read_written(record) == sorted(DATA)
    assert states_and_hashed(path, cache, models, verify=True) == (dict.fromkeys(DATA, model_files.OK), everything)
    os.remove(record)  # as if copied by hand: every file hashed, and no date to compare without hashing
    assert states_and_hashed(path, cache, models, verify=True) == (dict.fromkeys(DATA, model_files.OK), everything)
    assert states_and_hashed(path, cache, models) == (dict.fromkeys(DATA, model_files.OK), 0)

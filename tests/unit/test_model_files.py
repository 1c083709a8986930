"""A Mac's read of the declared models (module_utils.model_files, the model_files_facts module): each file's state in
a Hugging Face cache laid out as huggingface_hub writes it and in a path entry's folder, odd things on disk as
states, the Hub ref, the free bytes; and the hashing and layout the controller shares (plugin_utils.base.model_files)."""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files as on_mac
from ansible_collections.mlx_fleet.cluster.plugins.modules import model_files_facts
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import (
    HUB, PATH, ModelFile, ModelManifest)

COMMIT = "a" * 40
WEIGHTS = os.urandom(3000)
CONFIG = b'{"model_type": "llama"}\n'


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def hub_manifest() -> dict:
    """A Hub entry: the weights pinned by sha256 (an LFS file), config.json by its git blob id (a small file)."""
    return ModelManifest("tiny", HUB, (
        ModelFile("model.safetensors", len(WEIGHTS), sha256=hashlib.sha256(WEIGHTS).hexdigest()),
        ModelFile("sub/config.json", len(CONFIG), git_sha1=git_blob_id(CONFIG))),
        repo="org/tiny", revision="main", commit=COMMIT).to_json()


def lay_out_hub(cache, manifest: dict, contents: dict[str, bytes]) -> str:
    """The repo folder as huggingface_hub leaves it after a download: blobs, relative snapshot links, the ref."""
    root = cache / "models--org--tiny"
    (root / "blobs").mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(COMMIT)
    for pinned in manifest["files"]:
        blob = root / "blobs" / on_mac.blob_name(pinned)
        blob.write_bytes(contents[pinned["path"]])
        entry = root / "snapshots" / COMMIT / pinned["path"]
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.symlink_to(os.path.relpath(blob, entry.parent))
    return str(root)


def states(found: dict) -> dict[str, str]:
    return {f["path"]: f["state"] for f in found["files"]}


@pytest.fixture
def hub(tmp_path):
    manifest = hub_manifest()
    root = lay_out_hub(tmp_path / "hub", manifest, {"model.safetensors": WEIGHTS, "sub/config.json": CONFIG})
    return manifest, tmp_path / "hub", root


def read(manifest, cache, deep=False, models_dir="/nonexistent"):
    return on_mac.read_model(manifest, str(cache), models_dir, deep)


def test_a_complete_hub_snapshot_is_present_and_verified_by_sha256_and_git_blob_id(hub):
    manifest, cache, root = hub
    for deep in (False, True):
        found = read(manifest, cache, deep)
        assert found["present"] and found["ref"] == on_mac.REF_OK and found["root"] == root
        assert states(found) == {"model.safetensors": "ok", "sub/config.json": "ok"}


def test_the_layout_is_huggingface_hubs(hub):
    manifest, cache, root = hub
    assert ModelManifest.from_json(manifest, "t").repo_folder() == "models--org--tiny"
    assert on_mac.repo_folder("dataset", "org/data") == "datasets--org--data"
    assert os.readlink(os.path.join(root, "snapshots", COMMIT, "sub", "config.json")) == \
        "../../../blobs/" + git_blob_id(CONFIG)


def test_a_ref_naming_another_commit_or_none_is_not_present(hub):
    manifest, cache, root = hub
    with open(os.path.join(root, "refs", "main"), "w") as handle:
        handle.write("b" * 40)
    found = read(manifest, cache)
    assert (found["present"], found["ref"], found["ref_commit"]) == (False, on_mac.REF_OTHER, "b" * 40)
    os.unlink(os.path.join(root, "refs", "main"))
    assert read(manifest, cache)["ref"] == on_mac.REF_MISSING
    # A revision that is the commit itself has no ref (huggingface_hub writes none).
    assert read(dict(manifest, revision=COMMIT), cache)["present"]


def test_a_flipped_byte_is_found_only_by_deep(hub):
    manifest, cache, root = hub
    blob = os.path.join(root, "blobs", manifest["files"][0]["sha256"])
    with open(blob, "r+b") as handle:
        handle.seek(100)
        handle.write(bytes([WEIGHTS[100] ^ 1]))
    assert read(manifest, cache)["present"]
    found = read(manifest, cache, deep=True)
    assert not found["present"] and states(found)["model.safetensors"] == on_mac.HASH_DIFFERS


def test_odd_things_on_disk_are_file_states(hub, tmp_path):
    manifest, cache, root = hub
    snapshot = os.path.join(root, "snapshots", COMMIT)
    weights, config = os.path.join(snapshot, "model.safetensors"), os.path.join(snapshot, "sub", "config.json")
    outside = tmp_path / "elsewhere"
    outside.write_bytes(WEIGHTS)
    os.unlink(weights)
    os.symlink(str(outside), weights)  # the same bytes, but not the repo's blob
    os.unlink(os.path.join(root, "blobs", manifest["files"][1]["git_sha1"]))
    assert states(read(manifest, cache, deep=True)) == {"model.safetensors": on_mac.LINK_OUTSIDE,
                                                        "sub/config.json": on_mac.LINK_BROKEN}
    os.unlink(weights)
    os.mkdir(weights)
    os.unlink(config)
    with open(config, "wb") as handle:
        handle.write(CONFIG)
    assert states(read(manifest, cache)) == {"model.safetensors": on_mac.NOT_A_FILE,
                                            "sub/config.json": on_mac.NOT_LINKED}


def test_a_missing_cache_is_missing_files_not_a_failure(tmp_path):
    found = read(hub_manifest(), tmp_path / "none")
    assert not found["present"] and set(states(found).values()) == {on_mac.MISSING}
    assert found["ref"] == on_mac.REF_MISSING


def test_a_path_entry_is_read_in_its_folder(tmp_path):
    manifest = ModelManifest("local", PATH, (
        ModelFile("w.safetensors", len(WEIGHTS), sha256=hashlib.sha256(WEIGHTS).hexdigest()),
        ModelFile("config.json", len(CONFIG), sha256=hashlib.sha256(CONFIG).hexdigest()))).to_json()
    folder = tmp_path / "models" / "local"
    folder.mkdir(parents=True)
    (folder / "w.safetensors").write_bytes(WEIGHTS[:-1])
    found = on_mac.read_model(manifest, "/nonexistent", str(tmp_path / "models"), False)
    assert "ref" not in found and not found["present"]
    assert states(found) == {"w.safetensors": on_mac.SIZE_DIFFERS, "config.json": on_mac.MISSING}
    assert found["files"][0]["size"] == len(WEIGHTS) - 1
    (folder / "w.safetensors").write_bytes(WEIGHTS)
    (folder / "config.json").write_bytes(CONFIG)
    assert on_mac.read_model(manifest, "/nonexistent", str(tmp_path / "models"), True)["present"]


def test_free_bytes_are_those_of_the_nearest_existing_folder(tmp_path, monkeypatch):
    asked = []  # the volume's figures change while other tests write: what matters is which folder is asked

    def statvfs(path):
        asked.append(path)
        return os.statvfs_result((4096, 4096, 10, 9, 7, 100, 90, 80, 0, 255))

    monkeypatch.setattr(on_mac.os, "statvfs", statvfs)
    assert on_mac.free_bytes(str(tmp_path / "not" / "yet")) == 7 * 4096
    assert asked == [str(tmp_path)]


def test_the_module_reads_every_model_in_one_call_and_changes_nothing(hub, run_module):
    manifest, cache, root = hub
    result = run_module(model_files_facts.main, {"models": [manifest, dict(manifest, name="other", repo="org/other")],
                                                 "hf_cache": str(cache), "deep": True, "_ansible_check_mode": True})
    facts = result["ansible_facts"]["mlx_fleet_model_files"]
    assert result["changed"] is False and facts["deep"] is True
    assert facts["hashed_bytes"] == len(WEIGHTS) + len(CONFIG)  # the other model has no file to hash
    assert [(m["name"], m["present"]) for m in facts["models"]] == [("tiny", True), ("other", False)]
    assert all(m["free_bytes"] > 0 for m in facts["models"])


def test_the_controller_checks_a_file_as_the_mac_does(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(CONFIG)
    digests = on_mac.digest_file(str(path), git=True)
    assert (digests.size, digests.git_sha1) == (len(CONFIG), git_blob_id(CONFIG))
    # A file pinned by its sha256 is hashed once: no git blob id, which nothing would compare.
    assert on_mac.digest_file(str(path)).git_sha1 is None
    assert on_mac.pinned_by_git({"size": 1, "git_sha1": "ab"}) and not on_mac.pinned_by_git({"size": 1, "sha256": "cd"})
    pinned = ModelFile("f", len(CONFIG), git_sha1=git_blob_id(CONFIG))
    assert pinned.matches(digests) and pinned.blob == git_blob_id(CONFIG)
    assert not ModelFile("f", len(CONFIG), sha256="0" * 64).matches(digests)

"""`mlx-fleet models status` on the controller: a path entry's folder hashed and recorded (a change named, an
unchanged file not read again), a Hub entry pinned only by the lock, every Mac's read judged into rows, and the
render's own sentences (the last line what to run next)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files as on_mac
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import (
    HUB, ModelFile, ModelManifest)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import parse_models
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import path_manifest, status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    ModelsLockError, load_models_lock, models_lock_path)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import models_status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed


@pytest.fixture
def folder(tmp_path):
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_bytes(b"{}")
    (model / "sub" / "model.safetensors").write_bytes(b"x" * 1000)
    return model


def test_a_path_entry_is_hashed_and_recorded(folder, tmp_path):
    out = tmp_path / "out"
    manifest, change = path_manifest.hash_folder("m", folder, out, write=True)
    assert [(f.path, f.size, f.sha256) for f in manifest.files] == [
        ("config.json", 2, hashlib.sha256(b"{}").hexdigest()),
        ("sub/model.safetensors", 1000, hashlib.sha256(b"x" * 1000).hexdigest())]
    assert not change and path_manifest.record_path(out, "m").is_file()
    # Check mode (write=False) writes no record.
    path_manifest.hash_folder("n", folder, out, write=False)
    assert not path_manifest.record_path(out, "n").exists()


def test_a_change_to_the_folder_is_named_at_the_next_read(folder, tmp_path):
    out = tmp_path / "out"
    path_manifest.hash_folder("m", folder, out, write=True)
    (folder / "config.json").write_bytes(b"{1}")
    (folder / "tokenizer.json").write_bytes(b"t")
    (folder / "sub" / "model.safetensors").unlink()
    manifest, change = path_manifest.hash_folder("m", folder, out, write=True)
    assert change.to_json() == {"added": ["tokenizer.json"], "removed": ["sub/model.safetensors"],
                                "changed": ["config.json"]}
    assert not path_manifest.hash_folder("m", folder, out, write=True)[1]  # recorded: no change any more


def test_an_unchanged_file_is_not_read_again(folder, tmp_path, monkeypatch):
    out = tmp_path / "out"
    path_manifest.hash_folder("m", folder, out, write=True)
    read = []
    real = path_manifest.digest_file
    monkeypatch.setattr(path_manifest, "digest_file", lambda path: read.append(path) or real(path))
    path_manifest.hash_folder("m", folder, out, write=True)
    assert read == []
    (folder / "config.json").write_bytes(b"{2}")
    path_manifest.hash_folder("m", folder, out, write=True)
    assert read == [folder / "config.json"]


def test_a_folder_that_cannot_be_a_model_is_one_error(folder, tmp_path):
    with pytest.raises(path_manifest.PathEntryError, match="not a folder"):
        path_manifest.hash_folder("m", folder / "config.json", tmp_path / "out", write=False)
    (folder / "escape").symlink_to(tmp_path)
    with pytest.raises(path_manifest.PathEntryError, match="escape"):
        path_manifest.hash_folder("m", folder, tmp_path / "out", write=False)


def hub_lock_entry(revision="main") -> dict:
    return ModelManifest("tiny", HUB, (ModelFile("model.safetensors", 10, sha256="1" * 64),),
                         repo="org/tiny", revision=revision, commit="c" * 40).to_json()


def test_a_hub_entry_is_pinned_only_by_the_lock_as_declared(folder, tmp_path):
    declared = parse_models([{"name": "tiny", "repo": "org/tiny"}, {"name": "local", "path": str(folder)}])
    without = status.expected(declared, {}, tmp_path / "out", write=False)
    assert without.not_pinned == ["tiny"] and [m.name for m in without.manifests] == ["local"]
    pinned = status.expected(declared, locked(hub_lock_entry()), tmp_path / "out", write=False)
    assert pinned.not_pinned == [] and [m.name for m in pinned.manifests] == ["tiny", "local"]
    moved = status.expected(declared, locked(hub_lock_entry("v2")), tmp_path / "out", write=False)
    assert moved.not_pinned == ["tiny"]


def locked(entry: dict) -> dict[str, ModelManifest]:
    return {entry["name"]: ModelManifest.from_json(entry, "lock")}


def test_the_manifests_take_hub_pins_from_the_models_lock_beside_the_environments_lock(tmp_path):
    env_lock = tmp_path / ".mlx-env.lock.json"
    models_lock = tmp_path / ".mlx-models.lock.json"
    models_lock.write_text(json.dumps({"format": 1, "models": [hub_lock_entry()]}))
    assert load_models_lock(models_lock_path(env_lock))["tiny"].commit == "c" * 40
    models_lock.write_text(json.dumps({"format": 1, "models": [dict(hub_lock_entry(), commit="main")]}))
    with pytest.raises(ModelsLockError, match="commit"):
        load_models_lock(models_lock_path(env_lock))


def facts(present: bool, files: list[dict], deep=False, ref=on_mac.REF_OK) -> dict:
    return {"deep": deep, "models": [{"name": "tiny", "present": present, "files": files, "ref": ref,
                                      "ref_commit": "c" * 40, "free_bytes": 5000}]}


def test_every_mac_is_judged_with_the_files_and_bytes_it_lacks():
    expected = {"manifests": [hub_lock_entry()], "not_pinned": [], "changed_folders": {}}
    report = status.report(expected, {
        "mini-1": facts(True, [{"path": "model.safetensors", "state": "ok", "size": 10}], deep=True),
        "mini-2": facts(False, [{"path": "model.safetensors", "state": "missing", "size": None}],
                        ref=on_mac.REF_MISSING),
        "mini-3": facts(False, [{"path": "model.safetensors", "state": "hash_differs", "size": 10}], deep=True),
    }, unread=["mini-4"])
    rows = {row["mac"]: row for row in report["rows"]}
    assert (rows["mini-1"]["present"], rows["mini-1"]["verified"], rows["mini-1"]["bytes_missing"]) == (True, True, 0)
    assert (rows["mini-2"]["missing"], rows["mini-2"]["bytes_missing"], rows["mini-2"]["ref"]) == (
        ["model.safetensors"], 10, on_mac.REF_MISSING)
    assert rows["mini-3"]["differing"] == {"model.safetensors": "hash_differs"}
    assert (report["lacking"], report["unread"], report["complete"]) == (["mini-2", "mini-3"], ["mini-4"], False)
    lines = models_status.lines(report, "inv.yml", cli=True)
    assert lines[0] == "mini-1: tiny at main (cccccccccccc): present, every byte verified"
    assert lines[2] == ("mini-3: tiny at main (cccccccccccc): not present: model.safetensors: other bytes; "
                        "10 B to copy, 5.0 kB free")
    assert lines[-1] == ("mini-2, mini-3 lack declared models (20 B to copy): copy them, every byte verified: "
                        "mlx-fleet models sync -i inv.yml")
    assert models_status.lines(report, "inv.yml", cli=False)[-1].endswith(
        "ansible-playbook -i inv.yml mlx_fleet.cluster.models")


def test_the_rows_say_what_is_wrong_as_the_audits_findings():
    """One judge for models status and the audit: the model absent, a file missing or differing, the ref."""
    two_files = dict(hub_lock_entry(), files=[{"path": "model.safetensors", "size": 10, "sha256": "1" * 64},
                                              {"path": "config.json", "size": 2, "git_sha1": "2" * 40}])
    expected = {"manifests": [two_files], "not_pinned": [], "changed_folders": {}}
    ok, missing, hashed = ({"path": "config.json", "state": s, "size": 2} for s in ("ok", "missing", "hash_differs"))
    weights_ok = {"path": "model.safetensors", "state": "ok", "size": 10}
    report = status.report(expected, {
        "mini-1": facts(True, [weights_ok, ok], deep=True),
        "mini-2": facts(False, [dict(weights_ok, state="missing", size=None), missing], ref=on_mac.REF_MISSING),
        "mini-3": facts(False, [weights_ok, hashed], deep=True),
        "mini-4": facts(False, [weights_ok, missing], ref=on_mac.REF_OTHER),
    }, unread=[], fix="mlx-fleet models sync -i inv")
    found = {row["mac"]: [(f["kind"], f["hosts"], f["fact"], f["found"]) for f in row["findings"]]
             for row in report["rows"]}
    assert found == {
        "mini-1": [],
        "mini-2": [("model-missing", ["mini-2"], "model tiny", "absent")],
        "mini-3": [("model-file-differs", ["mini-3"], "model tiny: config.json", "other bytes")],
        "mini-4": [("model-missing", ["mini-4"], "model tiny: config.json", "missing"),
                   ("model-file-differs", ["mini-4"], "model tiny: refs/main", f"commit {'c' * 40}")]}
    assert {f["fix"] for row in report["rows"] for f in row["findings"]} == {"mlx-fleet models sync -i inv"}
    assert all(f["fault"] for row in report["rows"] for f in row["findings"])


def test_the_last_line_says_what_to_run_next():
    complete = {"rows": [], "lacking": [], "unread": [], "not_pinned": [], "changed_folders": {}, "complete": True}
    assert models_status.lines(complete, "inv", cli=False)[-1].startswith("every declared model is present")
    unpinned = dict(complete, not_pinned=["tiny"], complete=False)
    assert models_status.lines(unpinned, "inv", cli=True)[-2:] == ["tiny: not pinned: run mlx-fleet lock -i inv",
                                                                   "pin the Hub models first: mlx-fleet lock -i inv"]


def cluster(models) -> ClusterView:
    return ClusterView.of({"groups": {"mlx_cluster": ["mini-1", "mini-2"]},
                           "hostvars": {m: {"mlx_fleet_models": models} for m in ("mini-1", "mini-2")}},
                          "mlx_cluster", models_step.SETTINGS)


@pytest.mark.parametrize("models", [[{"name": "x", "path": "/nonexistent/folder"}], [{"name": "x"}], "not a list"])
def test_a_declaration_or_folder_that_cannot_be_read_is_bad_input(models, tmp_path):
    with pytest.raises(StepFailed) as failed:
        models_step.manifests(cluster(models), Run(tmp_path, write=False, holder="test"), None)
    assert failed.value.bad_input and len(failed.value.lines) == 1


def test_the_step_gives_the_macs_their_manifests_and_folders(folder, tmp_path):
    run = Run(tmp_path / "out", write=True, holder="test")
    found = models_step.manifests(cluster([{"name": "m", "path": str(folder)}]), run, str(tmp_path / "no-lock"))
    assert [m["name"] for m in found["manifests"]] == ["m"] and found["not_pinned"] == []
    assert (found["hf_cache"], found["models_dir"]) == ("/opt/mlx-fleet/huggingface/hub", "/opt/mlx-fleet/models")


def test_the_converge_is_told_per_model_the_macs_the_bytes_and_the_command():
    expected = {"manifests": [hub_lock_entry()], "not_pinned": ["other"], "changed_folders": {}}
    report = status.report(expected, {
        "mini-1": facts(True, [{"path": "model.safetensors", "state": "ok", "size": 10}]),
        "mini-2": facts(False, [{"path": "model.safetensors", "state": "missing", "size": None}]),
        "mini-3": facts(False, [{"path": "model.safetensors", "state": "size_differs", "size": 3}]),
    }, unread=[])
    found = models_step.to_do(report, Run(Path("out"), write=False, holder="test", inventory="inv.yml", cli=True))
    assert found == [
        {"model": "tiny", "macs": ["mini-2", "mini-3"], "bytes": 20, "command": "mlx-fleet models sync -i inv.yml tiny"},
        {"model": "other", "not_pinned": True, "command": "mlx-fleet lock -i inv.yml"}]
    present = status.report(expected, {"mini-1": facts(True, [{"path": "model.safetensors", "state": "ok",
                                                                "size": 10}])}, unread=[])
    assert models_step.to_do(dict(present, not_pinned=[]), Run(Path("out"), write=False, holder="test")) == []

"""`mlx_fleet_models_source` without Ansible (issue 28): the plan makes the named Mac fetch the Hub entries no Mac
holds and the first source of the walk along the cables (the controller sends none of them), refuses a Mac no cable
reaches from it and a name not of the cluster; a Mac's fetch with huggingface_hub (this machine's interpreter as the
cluster's environment) through the sim's Hub stand-in on loopback puts every file in place only verified, refs
last, the token never in the interpreter's argv or environment nor in a file; a gated repo without a token is the
controller's own refusal, named in the report."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from test_models_sync import MANIFEST, facts, ring
from test_sim_hub import running_hub

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files, model_hub
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import ModelDeclaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import hub_pin, sync_plan
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed

HUB_ENTRY = dict(MANIFEST, name="h", source="hub", repo="acme/h", repo_type="model", revision="main", commit="c" * 40)
MACS = ["m1", "m2", "m3", "m4"]
TOKEN = "hf_unit_secret_token_0123456789"


def both_missing(macs=MACS) -> dict:
    """Every Mac lacking both files of the path entry `m` and of the Hub entry `h`."""
    return {mac: {"deep": True, "models": [facts({"a": "missing", "b": "missing"})["models"][0],
                                           dict(facts({"a": "missing", "b": "missing"})["models"][0], name="h")]}
            for mac in macs}


def test_the_source_fetches_the_hub_entry_and_feeds_the_cables_while_the_controller_sends_only_the_path_entry():
    plan = sync_plan.plan([MANIFEST, HUB_ENTRY], both_missing(), MACS, ring(*MACS), 47181, fetcher="m2")
    hub_senders = {mac: sorted(s for s, files in senders.items() if any(f["model"] == "h" for f in files))
                   for mac, senders in plan.pulls.items()}
    assert hub_senders == {"m2": ["hub"], "m1": ["m2"], "m3": ["m2"], "m4": ["m1"]}
    assert {f["model"] for f in plan.from_controller()} == {"m"}  # the controller fetches nothing of `h`
    assert plan.fetched == {"h": "m2"} and plan.cut_off == {}
    found = plan.to_json(sync_plan.cable_addresses(ring(*MACS)))
    assert [r for r in found["macs"]["m2"]["receive"] if r["sender"] == "hub"] == [
        {"sender": "hub", "address": None, "port": None, "files": [{"model": "h", "path": "a"},
                                                                     {"model": "h", "path": "b"}]}]
    assert found["fetched"] == {"h": "m2"}
    arguments = models_step.copy_arguments(dict(found, manifests=[MANIFEST, HUB_ENTRY]), "m2")
    assert models_step.fetches_from_hub(arguments) and models_step.from_controller(arguments) == []

    unchanged = sync_plan.plan([MANIFEST, HUB_ENTRY], both_missing(), MACS, ring(*MACS), 47181)
    assert unchanged.fetched == {"h": "controller"} and len(unchanged.from_controller()) == 4


def test_a_source_holding_the_file_serves_it_and_nothing_is_fetched():
    held = both_missing()
    held["m3"]["models"][1] = dict(facts({"a": "ok", "b": "ok"})["models"][0], name="h")
    plan = sync_plan.plan([HUB_ENTRY], held, MACS, ring(*MACS), 1, fetcher="m3")
    assert plan.fetched == {} and "m3" not in plan.pulls and sorted(plan.serves["m3"]) == ["m2", "m4"]


def test_macs_no_cable_reaches_from_the_source_and_a_silent_source_cut_the_hub_entry_off():
    plan = sync_plan.plan([MANIFEST, HUB_ENTRY], both_missing(["m1", "m2"]), ["m1", "m2"], [], 1, fetcher="m2")
    assert plan.cut_off == {"h": {"m1"}} and len(plan.pulls["m2"]["hub"]) == 2
    unread = sync_plan.plan([HUB_ENTRY], both_missing(["m1", "m3"]), MACS, ring(*MACS), 1, fetcher="m2")
    assert unread.cut_off == {"h": {"m1", "m3"}} and unread.fetched == {}


class View:
    names = MACS

    def __init__(self, **settings):
        self.settings = dict({"mlx_fleet_models": [], "mlx_fleet_models_hf_cache": "/c", "mlx_fleet_models_dir": "/d",
                              "mlx_fleet_models_source": "", "mlx_fleet_models_port": 1}, **settings)

    def setting(self, key):
        return self.settings[key]

    def having(self, wanted):
        return self

    def facts(self, fact):
        return both_missing(["m1", "m2"])


def test_a_source_not_of_the_cluster_is_bad_input_naming_it_and_a_named_mac_is_the_source(tmp_path):
    run = Run(tmp_path, write=False, holder="test")
    with pytest.raises(StepFailed) as refused:
        models_step.manifests(View(mlx_fleet_models_source="m9"), run, None)
    assert refused.value.bad_input and len(refused.value.lines) == 1 and "'m9'" in refused.value.lines[0]
    assert models_step.manifests(View(mlx_fleet_models_source="m2"), run, None)["source"] == "m2"
    assert models_step.manifests(View(), run, None)["source"] is None

    with pytest.raises(StepFailed) as cut:  # no cluster model: no cable from the source to m1
        models_step.sync_plan(View(), run, {"manifests": [HUB_ENTRY], "not_pinned": [], "source": "m2"}, [])
    assert not cut.value.bad_input and len(cut.value.lines) == 1


def test_the_report_says_where_the_entry_was_fetched_and_a_refusal_in_the_controllers_words():
    plan = {"manifests": [HUB_ENTRY], "fetched": {"h": "m2"}, "macs": {"m2": {"files": 2, "bytes": 15}}}
    failed = [{"model": "h", "path": p, "from": "hub", "why": "401 gated", "refusal": "gated",
               "endpoint": "http://hub"} for p in ("a", "b")]

    class Copied(View):
        names = ["m2"]

        def facts(self, fact):
            return {"m2": {"received": [], "failed": failed, "bytes": 0, "seconds": 1.0}}

    found = models_step.sync_report(Copied(), Run("/unused", write=True, holder="test"), plan)
    said = str(hub_pin.refusal("gated", "401 gated", "http://hub",
                               ModelDeclaration("h", repo="acme/h", revision="main"), "c" * 40))
    assert [f["why"] for f in found["report"]["rows"][0]["failed"]] == [said, said]
    assert found["report"]["fetched"] == {} and not found["report"]["complete"]  # refused: not fetched


@pytest.fixture
def hub_on_loopback(tmp_path):
    with running_hub(tmp_path) as hub:
        api = __import__("huggingface_hub").HfApi(endpoint=hub["endpoint"])
        manifest = hub_pin.pin(api, ModelDeclaration("tiny", repo="acme/tiny", revision="main")).to_json()
        yield hub, manifest


def fetch_on_a_mac(tmp_path, hub: dict, manifest: dict, token: str | None, monkeypatch) -> tuple[dict, list]:
    """model_copy's part of the Mac named by mlx_fleet_models_source, for every file of MANIFEST; what it found and
    the argv and environment of each interpreter it started."""
    from ansible_collections.mlx_fleet.cluster.plugins.modules import model_copy

    started = []
    real_popen = subprocess.Popen

    def watched(argv, **kwargs):
        started.append((list(argv), dict(kwargs.get("env") or {})))
        return real_popen(argv, **kwargs)

    monkeypatch.setattr(model_hub.subprocess, "Popen", watched)
    params = {"models": [manifest], "hf_cache": str(tmp_path / "mac-hub"), "models_dir": str(tmp_path / "models"),
              "token": "run-token", "timeout": 60, "serve": None, "progress": None,
              "hub": {"endpoint": hub["endpoint"], "etag_timeout": 10, "download_timeout": 10,
                      "python": sys.executable, "refusals": [list(entry) for entry in hub_pin.REFUSALS]},
              "hub_token": token,
              "receive": [{"sender": "hub", "address": None, "port": None,
                           "files": [{"model": "tiny", "path": f["path"]} for f in manifest["files"]]}]}
    return model_copy.copy(params), started


def test_a_mac_fetches_a_hub_entry_verified_into_its_cache_the_token_on_stdin_only(tmp_path, hub_on_loopback,
                                                                                    monkeypatch):
    hub, manifest = hub_on_loopback
    hub["faults"].gated.add("acme/tiny")
    found, started = fetch_on_a_mac(tmp_path, hub, manifest, TOKEN, monkeypatch)
    assert found["failed"] == [] and sorted(f["path"] for f in found["received"]) == sorted(
        f["path"] for f in manifest["files"]) and found["refs"] == ["tiny"]
    assert {f["from"] for f in found["received"]} == {"hub"}
    cache = str(tmp_path / "mac-hub")
    read = model_files.read_model(manifest, cache, "/unused", True)
    assert read["present"] is True and all(f["state"] == "ok" for f in read["files"])
    root = model_files.model_root(manifest, cache, "/unused")
    assert not os.path.exists(os.path.join(root, model_hub.STAGING))  # the staging cache went with the fetch
    assert len(started) == 1 and TOKEN not in " ".join(started[0][0]) and TOKEN not in str(started[0][1])
    assert [p for p in tmp_path.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()] == []


def test_a_gated_entry_without_a_token_fails_every_file_as_the_hubs_refusal_and_nothing_is_in_place(
        tmp_path, hub_on_loopback, monkeypatch):
    hub, manifest = hub_on_loopback
    hub["faults"].gated.add("acme/tiny")
    found, _ = fetch_on_a_mac(tmp_path, hub, manifest, None, monkeypatch)
    assert found["received"] == [] and found["refs"] == []
    assert [(f["path"], f["refusal"]) for f in found["failed"]] == [(f["path"], "gated") for f in manifest["files"]]
    root = model_files.model_root(manifest, str(tmp_path / "mac-hub"), "/unused")
    assert not os.path.exists(os.path.join(root, "blobs")) and not os.path.exists(os.path.join(root, "refs"))


def test_a_fetch_past_the_syncs_deadline_ends_and_a_missing_environment_is_said(tmp_path):
    manifest = {"name": "t", "source": "hub", "repo": "acme/t", "repo_type": "model", "commit": "c" * 40}
    hub = {"endpoint": "http://127.0.0.1:9", "etag_timeout": 10, "download_timeout": 10, "refusals": [],
           "python": str(tmp_path / "no-env" / "python")}
    with pytest.raises(model_hub.HubRefused) as missing:
        model_hub.fetch(hub, None, manifest, ["a"], str(tmp_path / "root"), time.monotonic() + 5, print)
    assert missing.value.kind is None
    sleeper = tmp_path / "python"  # an interpreter that never answers
    sleeper.write_text("#!/bin/sh\nexec sleep 60\n")
    sleeper.chmod(0o755)
    with pytest.raises(model_hub.HubRefused) as late:
        model_hub.fetch(dict(hub, python=str(sleeper)), None, manifest, ["a"], str(tmp_path / "root"),
                        time.monotonic() + 1, print)
    assert late.value.kind is None  # raised: killed at the deadline (it would have ended well after 60 s)


def test_a_fetched_file_that_does_not_hash_to_the_lock_is_never_put_in_place(tmp_path, hub_on_loopback, monkeypatch):
    hub, manifest = hub_on_loopback
    wrong = next(f for f in manifest["files"] if f["path"] == "model.safetensors")
    wrong["sha256"] = "0" * 64  # the lock pins other bytes than the Hub serves
    found, _ = fetch_on_a_mac(tmp_path, hub, manifest, None, monkeypatch)
    assert [f["path"] for f in found["failed"]] == ["model.safetensors"] and found["refs"] == []
    assert sorted(f["path"] for f in found["received"]) == sorted(
        f["path"] for f in manifest["files"] if f is not wrong)
    root = model_files.model_root(manifest, str(tmp_path / "mac-hub"), "/unused")
    assert not os.path.exists(model_files.blob_path(root, wrong))
    assert not os.path.exists(os.path.join(root, "refs")) and not os.path.exists(os.path.join(root, "snapshots"))
    staged = [p for p in (tmp_path / "mac-hub").rglob("*") if p.is_file() and p.stat().st_size == wrong["size"]]
    assert staged == []  # the sync's own download, removed: the next sync fetches it again


def test_the_sync_says_where_each_hub_entry_is_fetched_and_one_line_per_mac_and_model_the_hub_refused():
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import models_sync

    plan = {"fetched": {"h": "mini-2"}, "macs": {"mini-2": {"files": 2, "bytes": 15, "receive": [
        {"sender": "hub", "address": None, "port": None, "files": []}]}}}
    assert models_sync.plan_lines(plan) == ["model h: fetched from the Hub on mini-2",
                                            "mini-2: to receive 2 files, 15 B, from the Hub"]
    report = {"complete": False, "bytes": 0, "fetched": {}, "rows": [
        {"mac": "mini-2", "planned": 2, "received": 0, "bytes": 0, "seconds": 1.0, "senders": [], "done": False,
         "failed": [{"model": "h", "path": p, "from": "hub", "why": "model h: it is gated"} for p in ("a", "b")]}]}
    assert models_sync.report_lines(report, "inv.yml", cli=True) == [
        "mini-2: model h not fetched from the Hub (2 files): model h: it is gated",
        "not complete on mini-2: run mlx-fleet models sync -i inv.yml again to resume"]
    assert models_sync.cut_off("h", ["mini-1"], "mini-2", answered=False) == (
        "model h: mini-1 cannot get it from mlx_fleet_models_source mini-2, which fetches it from the Hub: it did "
        "not answer; nothing was copied")

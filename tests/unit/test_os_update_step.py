"""plugin_utils.steps.os_update: one Mac's update on the controller, its Mac stood in for (OnMac)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update as ou
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.os_update import OnMac, update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import StepFailed

OLD = {"version": "26.2", "build": "25C56", "rdma_enabled": True, "addresses": {"en2": ["10.9.0.1/30"]},
       "mlx_imports": True}
NEW = dict(OLD, version="26.5.2", build="25F84")
PLAN = {"target": {"version": "26.5.2", "build": "25F84"}, "labels": {"m2": "macOS Tahoe 26.5.2-25F84"},
        "current": {"m1": OLD, "m2": OLD}, "order": ["m2"], "install": ["m2"], "done": [], "rank0": "m1"}


def stand_in(reads, *, password="pw", back="back", installs=None):
    reads = list(reads)
    return OnMac(read=lambda checks: dict(reads.pop(0) if len(reads) > 1 else reads[0]), audit=lambda: [],
                 install=lambda pw: installs.append(pw) or {"changed": True}, wait=lambda *a: back,
                 password=lambda: password)


def step(tmp_path, mac):
    return update("m2", PLAN, mac, output_dir=tmp_path, timeout=60.0, inventory="inv.yml", location="rack 2",
                  cli=True)


def record(tmp_path) -> dict:
    return json.loads((tmp_path / ou.RECORD_FILE).read_text())["macs"]["m2"]


def test_a_mac_installs_once_comes_back_on_the_target_and_is_recorded_done(tmp_path):
    installs = []
    result = step(tmp_path, stand_in([OLD, NEW], installs=installs))
    assert (result["changed"], result.get("failed"), installs) == (True, None, ["pw"])
    assert record(tmp_path)["status"] == ou.DONE


def test_a_mac_that_never_restarts_fails_with_its_problem_recorded(tmp_path):
    result = step(tmp_path, stand_in([OLD], back="no-restart", installs=[]))
    assert result["failed"] is True and result["problem"]["visit"] is False
    assert record(tmp_path)["status"] == ou.FAILED


def test_addresses_lost_in_the_update_are_a_problem_after_it(tmp_path):
    result = step(tmp_path, stand_in([OLD, dict(NEW, addresses={})], installs=[]))
    assert result["failed"] is True and record(tmp_path)["status"] == ou.FAILED


def test_no_password_installs_nothing(tmp_path):
    installs = []
    with pytest.raises(StepFailed):
        step(tmp_path, stand_in([OLD], password=None, installs=installs))
    assert installs == [] and not (tmp_path / ou.RECORD_FILE).exists()

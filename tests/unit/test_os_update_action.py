"""The os_update action on a fake Mac: its waits stay bounded, and a rerun after an interrupt installs no Mac
twice (plugins/action/os_update.py; the Mac's reads and the install are stood in for)."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.mlx_fleet.cluster.plugins.action import os_update as action
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update as ou

OLD = {"version": "26.2", "build": "25C56", "rdma_enabled": True, "addresses": {}, "mlx_imports": True}
NEW = dict(OLD, version="26.5.2", build="25F84")
PLAN = {"target": {"version": "26.5.2", "build": "25F84"}, "labels": {"m2": "macOS Tahoe 26.5.2-25F84"},
        "current": {"m1": OLD, "m2": OLD}, "order": ["m2"], "install": ["m2"], "done": [], "rank0": "m1"}


class Clock:
    def __init__(self):
        self.now, self.slept = 0.0, []

    def sleep(self, seconds):
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def mac(monkeypatch, tmp_path):
    """The action for Mac m2, its reads answering from `builds` (one per read, the last repeated)."""
    clock = Clock()
    monkeypatch.setattr(action.time, "monotonic", lambda: clock.now)
    monkeypatch.setattr(action.time, "sleep", clock.sleep)
    monkeypatch.setattr(ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    act = action.ActionModule.__new__(action.ActionModule)
    act.installs, act.reads, act.clock = [], [OLD], clock
    act._connection = type("Conn", (), {"reset": lambda self: None})()

    def read(task_vars, checks):
        if not act.reads:
            raise AnsibleActionFail("not up yet")
        return dict(act.reads.pop(0) if len(act.reads) > 1 else act.reads[0])

    def execute(module_name, module_args, task_vars):
        act.installs.append(module_args["label"])
        return {"changed": True, "started": True}

    act._read, act._execute_module, act._audit = read, execute, lambda *a: []
    act.output_dir = tmp_path
    return act


def run(act, **args):
    act._task = type("Task", (), {"args": dict({"plan": PLAN, "output_dir": str(act.output_dir), "user": "admin"},
                                               **args)})()
    return act.run(task_vars={"inventory_hostname": "m2", action.PASSWORD_VAR: "pw"})



def test_the_wait_never_sleeps_past_its_deadline(mac):
    mac.reads = []  # never up again
    assert mac._wait({}, "25F84", "25C56", 5.0, 100.0, "pw") == "no-return"
    assert sum(mac.clock.slept) == 5.0


@pytest.mark.parametrize("key, value", [("poll", "nan"), ("poll", "-1"), ("timeout", "inf"), ("timeout", "-5")])
def test_a_wait_that_is_no_number_of_seconds_is_refused_before_the_install(mac, key, value):
    with pytest.raises(AnsibleActionFail, match=key):
        run(mac, **{key: value})
    assert mac.installs == [] and not (mac.output_dir / ou.RECORD_FILE).exists()


def test_a_rerun_after_an_interrupt_during_the_preparation_waits_and_installs_nothing_again(mac):
    record = ou.mark(ou.new_record(PLAN, None), "m2", ou.STARTED, before=OLD, installed=True)
    ou.write_record(mac.output_dir / ou.RECORD_FILE, record)
    mac.reads = [OLD, OLD, NEW]  # still preparing at the rerun's first look, then back on the target
    result = run(mac, poll=1, timeout=60)
    assert not result.get("failed"), result
    assert mac.installs == []
    assert json.loads((mac.output_dir / ou.RECORD_FILE).read_text())["macs"]["m2"]["status"] == ou.DONE


def test_a_mac_whose_install_failed_before_is_installed_again(mac):
    record = ou.mark(ou.new_record(PLAN, None), "m2", ou.FAILED, before=OLD, installed=True, reason="no-restart")
    ou.write_record(mac.output_dir / ou.RECORD_FILE, record)
    mac.reads = [OLD, OLD, NEW]
    assert not run(mac, poll=1, timeout=60).get("failed")
    assert mac.installs == ["macOS Tahoe 26.5.2-25F84"]

"""plugin_utils.checks.os_update: the target, the order, resuming from the record, the checks after a Mac came back."""

import shlex

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update as ou
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import secret_socket

NAMES = ["m1", "m2", "m3", "m4"]
OFFER = {"label": "macOS Tahoe 26.5.2-25F84", "title": "macOS Tahoe 26.5.2", "version": "26.5.2", "build": "25F84",
         "macos": True}
OLDER = {"label": "macOS Tahoe 26.3-25D125", "version": "26.3", "build": "25D125", "macos": True}
CLT = {"label": "Command Line Tools for Xcode-16.0", "version": "16.0", "build": None, "macos": False}


def mac(build="25C56", version="26.2", updates=(OFFER,), jobs=()):
    return {"build": build, "version": version, "updates": list(updates), "jobs": list(jobs)}


def test_newest_update_every_mac_offers_canary_first_rank0_last():
    macs = {n: mac(updates=(OLDER, OFFER, CLT)) for n in NAMES}
    macs["m4"] = mac(updates=(OLDER, CLT))  # m4 is not offered 26.5.2: the newest common one is 26.3
    p = ou.plan(NAMES, macs, wanted=None, canary=None, record=None)
    assert p["target"] == {"version": "26.3", "build": "25D125"}
    assert p["order"] == ["m2", "m3", "m4", "m1"]
    assert ou.plan(NAMES, {n: mac() for n in NAMES}, wanted=None, canary="m3", record=None)["order"] == ["m3", "m2", "m4", "m1"]


def test_a_target_one_mac_does_not_offer_stops_the_plan_naming_it():
    macs = {n: mac() for n in NAMES}
    macs["m3"] = mac(updates=(OLDER,))
    with pytest.raises(ou.Refused) as refused:
        ou.plan(NAMES, macs, wanted="26.5.2", canary=None, record=None)
    [line] = refused.value.lines  # m3 alone, with the target and what it offers instead
    assert line.startswith("m3: ") and all(build in line for build in ("26.5.2 (25F84)", "26.3 (25D125)"))
    assert not refused.value.bad_input


def test_rank0_cannot_be_the_canary_and_a_running_job_refuses():
    macs = {n: mac() for n in NAMES}
    with pytest.raises(ou.Refused, match="rank 0"):
        ou.plan(NAMES, macs, wanted=None, canary="m1", record=None)
    macs["m2"]["jobs"] = [{"pid": 42, "command": "/opt/mlx-fleet/venv/bin/python train.py"}]
    with pytest.raises(ou.Refused, match=r"^m2: an MLX job is running \(pid 42"):
        ou.plan(NAMES, macs, wanted=None, canary=None, record=None)


def test_resume_skips_done_macs_and_rechecks_a_failed_one_and_then_nothing_to_do():
    macs = {n: mac() for n in NAMES}
    first = ou.plan(NAMES, macs, wanted=None, canary=None, record=None)
    record = ou.new_record(first, None)
    for name in ("m2",):
        ou.mark(record, name, ou.DONE)
    ou.mark(record, "m3", ou.FAILED, reason="RDMA is off")
    macs["m2"] = mac(build="25F84", version="26.5.2", updates=())
    macs["m3"] = mac(build="25F84", version="26.5.2", updates=())
    again = ou.plan(NAMES, macs, wanted=None, canary=None, record=record)
    assert again["order"] == ["m3", "m4", "m1"] and again["install"] == ["m4", "m1"] and again["done"] == ["m2"]
    for name in ("m3", "m4", "m1"):
        ou.mark(record, name, ou.DONE)
    assert "finished_at" in record
    macs = {n: mac(build="25F84", version="26.5.2", updates=()) for n in NAMES}
    assert ou.plan(NAMES, macs, wanted=None, canary=None, record=record)["order"] == []


def test_checks_after_the_restart():
    before = {"build": "25C56", "version": "26.2", "rdma_enabled": True, "addresses": {"en2": ["192.168.0.1"]},
              "mlx_imports": True}
    good = dict(before, build="25F84", version="26.5.2")
    assert ou.check_after("m2", before, good, "25F84", True, converge="c") == []
    bad = dict(good, rdma_enabled=False, addresses={"en2": []}, mlx_imports=False, mlx_error="ImportError")
    converge = fixes.run_command("site", "lab/hosts.yml", cli=False)
    problems = ou.check_after("m2", before, bad, "25F84", True, converge=converge)
    assert [(p["kind"], p["visit"]) for p in problems] == [("rdma-off", True), ("addresses-lost", False),
                                                           ("mlx-broken", False)]
    assert "en2 192.168.0.1" in problems[1]["reason"]
    # The fix names the converge of the install in use: here the collection's playbook, no clone's site.yml.
    assert shlex.split(converge) == ["ansible-playbook", "-i", "lab/hosts.yml", "mlx_fleet.cluster.site"]
    assert len(problems[1]["steps"]) == 1 and converge in problems[1]["steps"][0]
    assert ou.wait_problem("no-return", timeout=60, build="25C56")["visit"] is True


def test_an_unfinished_update_holds_the_cluster(tmp_path):
    assert ou.hold_reason(tmp_path) is None
    macs = {n: mac() for n in NAMES}
    record = ou.new_record(ou.plan(NAMES, macs, wanted=None, canary=None, record=None), None)
    ou.mark(record, "m2", ou.DONE)
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    assert ou.unfinished(tmp_path) == ({"version": "26.5.2", "build": "25F84"}, NAMES, ["m2"])
    reason = ou.hold_reason(tmp_path)
    assert "\n" not in reason and "26.5.2 (25F84)" in reason and reason.endswith("mlx-fleet os-update")
    for name in ("m3", "m4", "m1"):
        ou.mark(record, name, ou.DONE)
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    assert ou.hold_reason(tmp_path) is None


def test_a_locked_mac_is_unlocked_over_ssh_only_when_it_takes_a_password():
    # ssh's own lines, as Ansible passes them on
    takes_a_password = ("Failed to connect to the host via ssh: admin@10.0.0.2: Permission denied "
                        "(publickey,password,keyboard-interactive).")
    keys_only = "admin@10.0.0.2: Permission denied (publickey)."
    refused = "ssh: connect to host 10.0.0.2 port 22: Connection refused"
    assert secret_socket.password_methods(takes_a_password)
    assert not secret_socket.password_methods(keys_only) and not secret_socket.password_methods(refused)


def test_a_refused_install_holds_nothing_and_says_to_check_the_password(tmp_path):
    macs = {n: mac() for n in NAMES}
    record = ou.new_record(ou.plan(NAMES, macs, wanted=None, canary=None, record=None), None)
    ou.mark(record, "m2", ou.FAILED, reason="softwareupdate --install failed: failed to authorize for installation")
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    assert ou.hold_reason(tmp_path) is None  # every Mac still on its build
    ou.mark(record, "m2", ou.STARTED, installed=True)
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    assert ou.hold_reason(tmp_path) is not None  # m2 may be on the new build: held
    said = "failed to authorize for installation"  # softwareupdate's line (tests/fixtures/macos/README.md)
    problem = ou.install_problem(f"softwareupdate --install failed: {said}", said)
    assert problem["visit"] is False and "volume owner's password" in problem["steps"][0]
    # What the step says for a person is not read back: only softwareupdate's own line counts.
    other = ou.install_problem("softwareupdate --install failed: failed to authorize for installation", "Error 5")
    assert "volume owner's password" not in other["steps"][0]


def test_the_hold_is_a_file_beside_the_hostfiles_from_the_first_install_until_every_mac_is_done(tmp_path):
    mlx_launch_hostfile = '{"backend": "ring", "hosts": []}'
    (tmp_path / "hostfile.json").write_text(mlx_launch_hostfile)
    macs = {n: mac() for n in NAMES}
    record = ou.new_record(ou.plan(NAMES, macs, wanted=None, canary=None, record=None), None)
    record["inventory"] = "inv/hosts.yml"
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    held = tmp_path / ou.HELD_FILE
    assert not held.exists() and ou.hold_line(tmp_path) is None  # planned, nothing installed yet
    # os-update marks the Macs before its first install (starting); the record holds from the install on.
    assert ou.unfinished(tmp_path, starting=True) == ({"version": "26.5.2", "build": "25F84"}, NAMES, [])
    starting = ou.hold_line(tmp_path, "inv/hosts.yml", starting=True)  # written once: no count to go stale
    assert "25F84" in starting and " of " not in starting
    ou.mark(record, "m2", ou.STARTED, installed=True)
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    ou.mark(record, "m2", ou.DONE)
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    assert ou.unfinished(tmp_path) == ({"version": "26.5.2", "build": "25F84"}, NAMES, ["m2"])
    # One line, with the count done and the command that finishes the update for this inventory.
    shown = held.read_text()
    assert shown.count("\n") == 1 and "1 of 4" in shown and "os-update -i inv/hosts.yml" in shown
    assert ou.hold_line(tmp_path, "x") == held.read_text().strip().replace("inv/hosts.yml", "x")
    for name in ("m3", "m4", "m1"):
        ou.mark(record, name, ou.DONE)
    ou.write_record(tmp_path / ou.RECORD_FILE, record)
    assert not held.exists() and ou.hold_line(tmp_path, starting=True) is None  # released
    assert (tmp_path / "hostfile.json").read_text() == mlx_launch_hostfile  # untouched


def test_a_target_no_mac_is_offered_is_bad_input():
    with pytest.raises(ou.Refused) as refused:
        ou.plan(NAMES, {n: mac() for n in NAMES}, wanted="27.0", canary=None, record=None)
    assert refused.value.bad_input and len(refused.value.lines) == 1 and " 27.0: " in refused.value.lines[0]
    macs = {n: mac() for n in NAMES}
    macs["m3"] = mac(updates=(OLDER,))
    with pytest.raises(ou.Refused) as refused:  # offered to some Macs: the cluster's state, not the input
        ou.plan(NAMES, macs, wanted="26.5.2", canary=None, record=None)
    assert not refused.value.bad_input


def test_a_mac_recorded_done_but_on_another_build_is_updated_again_on_resume():
    macs = {n: mac() for n in NAMES}
    record = ou.new_record(ou.plan(NAMES, macs, wanted=None, canary=None, record=None), None)
    ou.mark(record, "m2", ou.DONE)  # yet m2 is on 25C56 (rolled back, restored from a backup)
    again = ou.plan(NAMES, macs, wanted=None, canary=None, record=record)
    assert "m2" in again["install"] and again["done"] == []


def test_the_newest_macos_is_chosen_by_number_and_then_by_build():
    v9 = dict(OFFER, label="macOS Tahoe 26.9-25X99", version="26.9", build="25X99")
    v10 = dict(OFFER, label="macOS Tahoe 26.10-25Y12", version="26.10", build="25Y12")
    assert ou.plan(NAMES, {n: mac(updates=(v10, v9)) for n in NAMES}, wanted=None, canary=None,
                   record=None)["target"]["build"] == "25Y12"
    assert ou.plan(NAMES, {n: mac(updates=(v9, v10)) for n in NAMES}, wanted=None, canary=None,
                   record=None)["target"]["build"] == "25Y12"
    b99 = dict(OFFER, label="macOS Tahoe 26.5.2-25C99", build="25C99")
    b101 = dict(OFFER, label="macOS Tahoe 26.5.2-25C101", build="25C101")
    for offers in ((b99, b101), (b101, b99)):
        assert ou.plan(NAMES, {n: mac(updates=offers) for n in NAMES}, wanted=None, canary=None,
                       record=None)["target"]["build"] == "25C101"
    assert ou.plan(NAMES, {n: mac(updates=(b101, b99)) for n in NAMES}, wanted="26.5.2", canary=None,
                   record=None)["target"]["build"] == "25C101"
    assert ou.build_tuple("25C101") > ou.build_tuple("25C99") and ou.build_tuple("no build") == ()

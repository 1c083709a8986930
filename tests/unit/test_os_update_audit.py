"""After each Mac's update, its audit: plugin_utils.checks.audit on that one Mac's node_state read (as the os_update action
runs it), and only what the update brought stops the run."""

import shlex

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update as ou
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.audit import run_audit

from factories import INVENTORY, converged, node


def one_mac(state, host="mini-2"):
    hosts, observed, declared, controller = state
    audited = run_audit([host], {host: observed[host]}, {host: declared[host]}, controller, inventory=INVENTORY)
    return ou.own_findings(host, audited.drifted)


def updated(state, host="mini-2"):
    state[1][host]["mlx_fleet_macos"].update(product_version="26.5.2", build_version="25F84")
    return state


def test_a_mac_on_the_new_build_alone_is_clean():
    # Its build differs from the other Macs' mid-update: that is the update, not drift (the cluster is held).
    assert one_mac(updated(converged())) == []


def test_drift_the_update_brought_stops_the_run_with_one_line_and_the_fix():
    state = updated(converged())
    node(state)["pmset"]["AC Power"]["sleep"] = 10
    findings = one_mac(state)
    assert [(f["fact"], f["expected"], f["found"], shlex.split(f["fix"])) for f in findings] == [
        ("pmset sleep", "0", "10", ["ansible-playbook", "-i", "inv/hosts.yml", "mlx_fleet.cluster.node"])]
    problems = ou.audit_problems(findings, drift_before=[])
    assert [(p["kind"], p["fact"]) for p in problems] == [("audit", "pmset sleep")]
    assert "\n" not in problems[0]["reason"]
    assert problems[0]["visit"] is False
    assert problems[0]["steps"][0] == f"Fix: {findings[0]['fix']}"


def test_drift_already_there_before_the_update_does_not_stop_it():
    before = converged()
    node(before)["pmset"]["AC Power"]["sleep"] = 10
    drift_before = [f["fact"] for f in one_mac(before)]
    after = updated(before)
    node(after)["hostfiles"]["hostfile.json"] = "0" * 64  # new after the update
    problems = ou.audit_problems(one_mac(after), drift_before)
    assert [p["fact"] for p in problems] == ["hostfile.json"]


def test_findings_about_the_cluster_are_not_the_macs():
    state = converged()
    state[3]["lock"] = (None, "no lock")  # the cluster's lock: no Mac's update causes or fixes it
    assert one_mac(updated(state)) == []

"""plugin_utils.glue.actions: what the cluster-wide action plugins share."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import INPUT_ERRORS, OTHER_ERRORS, ClusterAction, refusal

FACT = "mlx_fleet_thunderbolt"


def task_vars(active: list[str]) -> dict:
    """mini-3 was never read: with `active` without it, it failed or did not answer earlier in the run."""
    return {"groups": {"mlx_cluster": ["mini-1", "mini-2", "mini-3"]}, "ansible_play_hosts": active,
            "hostvars": {"mini-1": {FACT: {}}, "mini-2": {FACT: {}}, "mini-3": {}}}


def test_a_mac_that_dropped_out_of_the_run_is_named_as_such():
    gone = task_vars(["mini-1", "mini-2"])
    view = ClusterAction.view(gone, "mlx_cluster")
    assert view.dropped((FACT,)) == ["mini-3"]
    with pytest.raises(AnsibleActionFail) as failed:
        ClusterAction.require(view, (FACT,))
    assert failed.value.message.split()[0] == "mini-3" and "\n" not in failed.value.message  # the Mac it lacks


def test_a_mac_in_the_play_but_never_read_needs_its_facts_read_first():
    unread = task_vars(["mini-1", "mini-2", "mini-3"])
    view = ClusterAction.view(unread, "mlx_cluster")
    assert view.dropped((FACT,)) == []
    with pytest.raises(AnsibleActionFail, match="^no mlx_fleet_thunderbolt facts for mini-3: run "
                                                "mlx_fleet.cluster.thunderbolt_facts on every Mac first"):
        ClusterAction.require(view, (FACT,))
    assert ClusterAction.require(ClusterAction.view(task_vars(["mini-1"]), "mlx_cluster"), ()).names == [
        "mini-1", "mini-2", "mini-3"]


def test_a_cluster_wide_setting_that_differs_between_hosts_is_refused_as_bad_input():
    differing = task_vars(["mini-1", "mini-2", "mini-3"])
    differing["hostvars"]["mini-2"]["mlx_fleet_backend"] = "ring"
    with pytest.raises(AnsibleActionFail) as refused:
        ClusterAction.view(differing, "mlx_cluster", {"mlx_fleet_backend": "auto"})
    assert refused.value.result_contribution[INPUT_ERRORS] == [refused.value.message]
    assert ClusterAction.view(differing, "mlx_cluster", {"mlx_fleet_envs": []}).setting("mlx_fleet_envs") == []


def test_a_refusal_marks_its_bad_input_lines():
    lines = ["mini-1: macOS 26.1 is too old", "mini-1 and mini-2: the same Mac"]
    assert refusal(lines, bad_input=lines[1:], result={"problems": lines}).result_contribution == {
        "problems": lines, INPUT_ERRORS: lines[1:], OTHER_ERRORS: lines[:1], "failed": True, "msg": "\n".join(lines)}
    assert refusal(lines).result_contribution[INPUT_ERRORS] == lines
    assert refusal(lines).result_contribution[OTHER_ERRORS] == []

"""The CLI's view of a run, from ansible-runner's events: what failed where, exit status, summary."""

from __future__ import annotations

import io

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import CLUSTER_STEP, refusal
from mlx_fleet import cli, runner
from mlx_fleet.errors import UserError


def _event(kind, host="mini-1", action="", task="a task", res=None, **data):
    return {"event": kind, "event_data": {"host": host, "task_action": action, "task": task, "res": res or {}, **data}}


def _report(*events):
    report = runner.RunReport(playbook="mlx_fleet.cluster.hostfile")
    handle = runner._Events(report, None)
    for event in events:
        assert handle(event) is True
    return report


def test_ok_run_is_exit_0_and_keeps_action_results():
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.fabric", res={"backend": "ring", "reason": "r"}),
                     _event("runner_on_ok", host="mini-1", res={"changed": True}),
                     _event("runner_on_ok", host="mini-2", res={"changed": False}))
    assert report.exit_status == 0
    assert report.result("mlx_fleet.cluster.fabric")["backend"] == "ring"
    assert report.changed == {"mini-1"}


def test_a_step_run_once_for_the_cluster_does_not_count_as_its_mac_changing():
    # rdma_readiness rewrote the checklist on the controller, under mini-1; only mini-2 itself changed.
    report = _report(_event("runner_on_ok", host="mini-1", action="mlx_fleet.cluster.rdma_readiness",
                            res={"changed": True, CLUSTER_STEP: True}),
                     _event("runner_on_ok", host="mini-2", action="mlx_fleet.cluster.macos_node", res={"changed": True}))
    assert report.changed == {"mini-2"}


def test_a_fabric_left_alone_for_a_mac_that_dropped_out_is_a_warning_in_the_summary():
    why = ("the fabric changed nothing and the hostfiles stay as they were: mini-3 failed or did not answer earlier "
           "in this run; fix that and run again")
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.fabric",
                            res={"changed": False, "dropped": ["mini-3"], "msg": why, "warnings": [why]}))
    assert report.warnings == [why]  # the summary's warning line says it, once
    assert cli._fabric_lines(report) == []


def test_failures_unreachable_and_bad_input_map_to_their_exit_status():
    failed = _report(_event("runner_on_failed", host="mini-2", task="Give each port its network", res={"msg": "boom"}))
    assert failed.exit_status == 1 and failed.failed == {"mini-2": ["Give each port its network: boom"]}
    ignored = _report(_event("runner_on_failed", res={"msg": "x"}, ignore_errors=True))
    assert ignored.exit_status == 0
    gone = _report(_event("runner_on_failed", host="mini-2", res={"msg": "boom"}),
                   _event("runner_on_unreachable", host="mini-3", res={"msg": "ssh: connect timed out\nmore"}))
    assert gone.exit_status == 4 and gone.unreachable == {"mini-3": "ssh: connect timed out"}
    lines = ["inventory: mlx_fleet_ip_pool: 10.0.0.1/8 has host bits set", "inventory: second problem"]
    bad = _report(_event("runner_on_failed", host="localhost", action="mlx_fleet.cluster.inventory_check",
                         res=refusal(lines).result_contribution))
    assert bad.exit_status == 2 and bad.input_errors == lines and bad.failed == {}


def test_bad_input_is_what_a_check_marks_and_a_line_two_macs_share_is_said_once():
    twins = "mini-1 and mini-3: the same Mac (serial number C02X) is listed twice; keep one of them in mlx_cluster"
    old = "mini-1: macOS 26.1 (25B78) is older than mlx_fleet_min_macos 26.2; update it in System Settings"
    task = "Check it can join the cluster"
    report = _report(
        _event("runner_on_failed", host="mini-1", action="mlx_fleet.cluster.preflight_check", task=task,
               res=refusal([old, twins], bad_input=[twins]).result_contribution),
        _event("runner_on_failed", host="mini-3", action="mlx_fleet.cluster.preflight_check", task=task,
               res=refusal([twins], bad_input=[twins]).result_contribution))
    assert report.input_errors == [twins]
    assert report.failed == {"mini-1": [f"{task}: {old}"]}  # not bad input: the Mac must be updated
    assert report.exit_status == 2  # nothing changed: the inventory is the first thing to fix
    unmarked = _report(_event("runner_on_failed", host="mini-1", task=task, res={"msg": twins}))
    assert unmarked.exit_status == 1 and unmarked.input_errors == []


def test_summary_names_what_to_act_on():
    report = _report(_event("runner_on_unreachable", host="mini-3", res={"msg": "timed out"}),
                     _event("runner_on_ok", res={"warnings": ["bridge0 is on"], "changed": True}))
    out = io.StringIO()
    assert runner.print_summary(report, stream=out, extra=["backend: ring (why)"]) == 4
    lines = out.getvalue().splitlines()
    assert lines[0] == "unreachable: mini-3: timed out"
    assert "backend: ring (why)" in lines and "warning: bridge0 is on" in lines and "changed: mini-1" in lines
    assert lines[-1] == "result: some Macs are unreachable (exit 4)"


def test_a_check_run_says_what_would_change_and_that_nothing_did():
    report = _report(_event("runner_on_ok", host="mini-1", res={"changed": True}),
                     _event("runner_on_ok", host="mini-2", res={"changed": True}))
    report.check = True
    out = io.StringIO()
    assert runner.print_summary(report, stream=out) == 0
    lines = out.getvalue().splitlines()
    assert "would change: mini-1, mini-2" in lines and not any(line.startswith("changed:") for line in lines)
    assert lines[-1] == "result: ok (--check: nothing was changed)"


def test_a_check_run_names_the_hostfiles_as_the_last_runs(tmp_path):
    for name in ("hostfile.json", "fabric.svg"):
        (tmp_path / name).write_text("{}")
    fabric = {"backend": "ring", "reason": "why", "hostfile": str(tmp_path / "hostfile.json"), "hostfile_dir": "/opt/x"}
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.fabric", res=fabric))
    assert cli._fabric_lines(report)[1:] == [f"hostfiles: {tmp_path / 'hostfile.json'} (on every Mac in /opt/x)",
                                             f"picture: {tmp_path / 'fabric.svg'}"]
    report.check = True
    assert cli._fabric_lines(report)[1:] == [
        f"hostfiles (the last run's; --check wrote none): {tmp_path / 'hostfile.json'} (on every Mac in /opt/x)",
        f"picture (the last run's; --check wrote none): {tmp_path / 'fabric.svg'}"]


def test_what_moved_since_the_last_converge_is_said_after_the_backend():
    fabric = {"backend": "ring", "reason": "why", "changes": ["cable mini-1:1 -- mini-2:1 moved to mini-1:1 -- mini-2:3"]}
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.fabric", res=fabric))
    assert cli._fabric_lines(report) == [
        "backend: ring (why)", "since the last converge: cable mini-1:1 -- mini-2:1 moved to mini-1:1 -- mini-2:3"]


def test_a_cluster_steps_failure_names_no_mac_and_indents_its_lines():
    why = "auto: no ring through all 3 hosts: connect mini-1 Thunderbolt 2 to mini-3 Thunderbolt 1"
    report = _report(
        _event("runner_on_failed", host="mini-1", action="mlx_fleet.cluster.fabric", task="Build the fabric",
               res={"msg": f"{why}\nthe picture, faults in red: /o/fabric.svg", CLUSTER_STEP: True}),
        _event("runner_on_failed", host="mini-2", task="Give each port its network", res={"msg": "boom\nexit 1"}))
    assert report.failed == {"mini-2": ["Give each port its network: boom\nexit 1"]} and report.exit_status == 1
    out = io.StringIO()
    runner.print_summary(report, stream=out)
    assert out.getvalue().splitlines()[:5] == [
        "failed: mini-2: Give each port its network: boom", "  exit 1",
        "failed: Build the fabric:", f"  {why}", "  the picture, faults in red: /o/fabric.svg"]


def test_progress_line_counts_hosts_and_failures():
    stream = io.StringIO()
    progress = runner.Progress(stream)
    handle = runner._Events(runner.RunReport(playbook="p"), progress)
    handle({"event": "playbook_on_task_start", "event_data": {"task": "Read the Mac"}})
    for host in ("mini-1", "mini-2"):
        handle(_event("runner_on_start", host=host))
    handle(_event("runner_on_ok", host="mini-1"))
    handle(_event("runner_on_failed", host="mini-2", res={"msg": "x"}))
    progress.finish()
    assert stream.getvalue() == "[1] Read the Mac: 2/2 Macs, 1 failed so far\n"


def test_limit_is_refused_for_commands_that_need_every_mac():
    args = cli.build_parser().parse_args(["hostfile", "-i", "inv.yml", "--limit", "mini-1"])
    with pytest.raises(UserError, match="--limit cannot apply to `mlx-fleet hostfile`"):
        runner.options_from(args, "hostfile", needs_every_mac=True)


def test_flags_pass_through():
    args = cli.build_parser().parse_args(["converge", "-i", "inv.yml", "-e", "a=1", "-e", "@vars.yml", "-vv",
                                          "--check", "--diff", "-K"])
    options = runner.options_from(args, "converge", needs_every_mac=False)
    assert options == runner.PlaybookOptions(extra_vars=["a=1", "@vars.yml"], limit=None, check=True, diff=True,
                                             verbosity=2, ask_become_pass=True)


def test_every_command_has_a_description_and_an_example(capsys):
    for command in ("converge", "hostfile", "checklist", "lock", "capture"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = capsys.readouterr().out
        assert "examples:\n  mlx-fleet " + command in text and "Exit status" in text


def test_version(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == "mlx-fleet 0.2.0"

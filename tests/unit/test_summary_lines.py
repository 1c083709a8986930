"""The end-of-run summary's wording, the renderer's own tests: the lines a person reads after a run
(plugin_utils.render.summary, mlx_fleet.runner.progress.print_summary), from ansible-runner's events."""

from __future__ import annotations

import io

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import summary
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import CLUSTER_STEP
from mlx_fleet import runner
from test_runner import CLUSTER_STEP_WHY, _event, _report, cluster_step_and_mac_failed


def test_a_macs_own_warning_names_the_mac_and_one_shared_by_several_is_one_line():
    said = "pmset: this Mac has no 'autorestart' setting; left alone"
    report = _report(*(_event("runner_on_ok", host=mac, action="mlx_fleet.cluster.macos_node", res={"warnings": [said]})
                       for mac in ("mbp-10", "mbp-2", "mbp-10")),
                     {"event": "warning", "event_data": {"warning": "a deprecation Ansible itself prints"}})
    assert [line for line in report.lines() if line.startswith("warning:")] == [
        f"warning: mbp-2, mbp-10: {said}", "warning: a deprecation Ansible itself prints"]


def test_summary_names_what_to_act_on():
    report = _report(_event("runner_on_unreachable", host="mini-3", res={"msg": "timed out"}),
                     _event("runner_on_ok", res={"warnings": ["bridge0 is on"], "changed": True}))
    out = io.StringIO()
    assert runner.print_summary(report, stream=out, extra=["backend: ring (why)"]) == 4
    lines = out.getvalue().splitlines()
    assert lines[0] == "unreachable: mini-3: timed out"
    assert "backend: ring (why)" in lines and "warning: mini-1: bridge0 is on" in lines and "changed: mini-1" in lines
    assert lines[-1] == "result: some Macs are unreachable (exit 4)"


def test_a_value_a_mac_reported_reaches_the_terminal_escaped():
    # A serial number or a message with a terminal escape, as a Mac could report it: it would clear the
    # screen or retitle the terminal; printed, it is its escape.
    report = _report(_event("runner_on_unreachable", host="mini-3", res={"msg": "no route \x1b]0;owned\x07"}),
                     _event("runner_on_ok", res={"warnings": ["serial C02X\x1b[2J\x1b[Hresult: ok"]}))
    out = io.StringIO()
    runner.print_summary(report, stream=out)
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "warning: mini-1: serial C02X\\x1b[2J\\x1b[Hresult: ok" in text.splitlines()
    assert "unreachable: mini-3: no route \\x1b]0;owned\\x07" in text.splitlines()


def test_terminal_text_keeps_a_message_s_own_lines_indented():
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text

    assert terminal_text(["failed: fabric", "serial X\nresult: ok\x1b[2J"]).splitlines() == [
        "failed: fabric", "serial X", "  result: ok\\x1b[2J"]


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
    assert summary._fabric_lines(report)[1:] == [f"hostfiles: {tmp_path / 'hostfile.json'} (on every Mac in /opt/x)",
                                             f"picture: {tmp_path / 'fabric.svg'}"]
    report.check = True
    assert summary._fabric_lines(report)[1:] == [
        f"hostfiles (the last run's; --check wrote none): {tmp_path / 'hostfile.json'} (on every Mac in /opt/x)",
        f"picture (the last run's; --check wrote none): {tmp_path / 'fabric.svg'}"]


def test_what_moved_since_the_last_converge_is_said_after_the_backend():
    fabric = {"backend": "ring", "reason": "why", "changes": ["cable mini-1:1 -- mini-2:1 moved to mini-1:1 -- mini-2:3"]}
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.fabric", res=fabric))
    assert summary._fabric_lines(report) == [
        "backend: ring (why)", "since the last converge: cable mini-1:1 -- mini-2:1 moved to mini-1:1 -- mini-2:3"]


def _summary(report) -> list[str]:
    out = io.StringIO()
    runner.print_summary(report, stream=out)
    return out.getvalue().splitlines()


def test_a_run_that_changed_nothing_says_so():
    assert "nothing changed" in _summary(_report(_event("runner_on_ok", res={"changed": False})))
    check = _report(_event("runner_on_ok", res={"changed": False}))
    check.check = True
    assert "nothing would change" in _summary(check)
    stopped = _report(_event("runner_on_ok", res={"changed": False}))
    stopped.rc = 254  # interrupted: what was in flight may have changed
    assert not [line for line in _summary(stopped) if line.startswith("nothing")]
    check.failed = {"mini-1": [("Read the Mac", "boom")]}
    assert not [line for line in _summary(check) if line.startswith("nothing")]  # it stopped: nobody knows
    controller_only = _report(_event("runner_on_ok", res={"changed": True, CLUSTER_STEP: True}))
    assert controller_only.changed == set()
    lines = _summary(controller_only)
    assert "no Mac changed (only the controller's files did)" in lines and "nothing changed" not in lines
    assert not any(line.startswith("nothing") for line in _summary(_report(_event("runner_on_ok",
                                                                                  res={"changed": True}))))


def test_mac_lists_are_in_natural_order():
    hosts = ["mini-10", "mini-2", "mini-1"]
    report = _report(*(_event("runner_on_ok", host=h, res={"changed": True}) for h in hosts),
                     *(_event("runner_on_unreachable", host=h, res={"msg": "gone"}) for h in hosts),
                     *(_event("runner_on_failed", host=h, res={"msg": "boom"}) for h in hosts))
    lines = _summary(report)
    assert "changed: mini-1, mini-2, mini-10" in lines
    assert [line.split(":")[1].strip() for line in lines if line.startswith("unreachable:")] == ["mini-1", "mini-2",
                                                                                                "mini-10"]
    assert [line.split(":")[1].strip() for line in lines if line.startswith("failed:")] == ["mini-1", "mini-2",
                                                                                           "mini-10"]


def test_check_says_which_bridges_it_would_turn_off_not_a_warning():
    fabric = {"backend": "jaccl", "reason": "full mesh", "bridges_off": ["mini-1", "mini-2"], "warnings": []}
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.fabric", res=fabric))
    report.check = True
    assert ("Thunderbolt Bridge: would turn off on mini-1, mini-2 (mlx_fabric_bridge: disabled; across the cables "
            "it breaks RDMA setup)") in summary._fabric_lines(report)
    report.check = False
    assert any(line.startswith("Thunderbolt Bridge: turned off on mini-1, mini-2") for line in summary._fabric_lines(report))


def test_rdma_enabled_but_not_working_points_below_where_the_details_are():
    rdma = {"summary": "no Mac needs the Recovery step; mini-1 has RDMA enabled but not working",
            "enabled_not_working": ["mini-1"], "needs_recovery": [],
            "warnings": ["mini-1: enabled but not working: Thunderbolt 2 is PORT_DOWN"], CLUSTER_STEP: True}
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.rdma_readiness", res=rdma))
    out = io.StringIO()
    runner.print_summary(report, stream=out, extra=summary._rdma_lines(report))
    lines = out.getvalue().splitlines()
    rdma_line = next(i for i, line in enumerate(lines) if line.startswith("RDMA: "))
    assert lines[rdma_line].endswith("(each says why in a warning below)") and "see above" not in out.getvalue()
    assert lines.index("warning: mini-1: enabled but not working: Thunderbolt 2 is PORT_DOWN") > rdma_line


def test_a_cluster_steps_failure_names_no_mac_and_indents_its_lines():
    out = io.StringIO()
    runner.print_summary(cluster_step_and_mac_failed(), stream=out)
    assert out.getvalue().splitlines()[:5] == [
        "failed: mini-2: Give each port its network: boom", "  exit 1",
        "failed: Build the fabric:", f"  {CLUSTER_STEP_WHY}", "  the picture, faults in red: /o/fabric.svg"]


def test_a_model_to_copy_is_a_line_to_act_on_with_its_command():
    to_do = [{"model": "tiny", "macs": ["mini-10", "mini-2"], "bytes": 2_500_000_000,
              "command": "mlx-fleet models sync -i inv tiny"},
             {"model": "hub", "not_pinned": True, "command": "mlx-fleet lock -i inv"}]
    report = _report(_event("runner_on_ok", action="mlx_fleet.cluster.models_status",
                            res={"to_do": to_do, CLUSTER_STEP: True}))
    assert summary._models_lines(report) == [
        "to do: model tiny is not on mini-2, mini-10 (2.5 GB to copy): mlx-fleet models sync -i inv tiny",
        "to do: model hub is not pinned: mlx-fleet lock -i inv"]
    out = io.StringIO()
    # Something to do, as a Recovery step is: a line, not a failure.
    assert runner.print_summary(report, stream=out, extra=summary._models_lines(report)) == 0

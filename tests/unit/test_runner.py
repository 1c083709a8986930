"""The CLI's view of a run, from ansible-runner's events: what failed where, exit status, summary."""

from __future__ import annotations

import io
import os

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import CLUSTER_STEP, refusal
from mlx_fleet import cli, runner
from mlx_fleet.runner import events as runner_events, progress as runner_progress, run as runner_run
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import summary
from mlx_fleet.errors import UserError


def _event(kind, host="mini-1", action="", task="a task", res=None, **data):
    return {"event": kind, "event_data": {"host": host, "task_action": action, "task": task, "res": res or {}, **data}}


def _report(*events):
    report = runner.RunReport(playbook="mlx_fleet.cluster.hostfile")
    handle = runner_events.EventHandler(report, None)
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
                            res={"changed": False, "dropped": ["mini-3"], "msg": why, "warnings": [why],
                                 CLUSTER_STEP: True}))
    assert report.lines() == [f"warning: {why}", "nothing changed"]  # said once, not as mini-1's
    assert summary._fabric_lines(report) == []


def test_a_macs_own_warning_names_the_mac_and_one_shared_by_several_is_one_line():
    said = "pmset: this Mac has no 'autorestart' setting; left alone"
    report = _report(*(_event("runner_on_ok", host=mac, action="mlx_fleet.cluster.macos_node", res={"warnings": [said]})
                       for mac in ("mbp-10", "mbp-2", "mbp-10")),
                     {"event": "warning", "event_data": {"warning": "a deprecation Ansible itself prints"}})
    assert [line for line in report.lines() if line.startswith("warning:")] == [
        f"warning: mbp-2, mbp-10: {said}", "warning: a deprecation Ansible itself prints"]


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
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.content import terminal_text

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


def test_a_cluster_steps_failure_names_no_mac_and_indents_its_lines():
    why = "auto: no ring through all 3 hosts: connect mini-1 Thunderbolt 2 to mini-3 Thunderbolt 1"
    report = _report(
        _event("runner_on_failed", host="mini-1", action="mlx_fleet.cluster.fabric", task="Build the fabric",
               res={"msg": f"{why}\nthe picture, faults in red: /o/fabric.svg", CLUSTER_STEP: True}),
        _event("runner_on_failed", host="mini-2", task="Give each port its network", res={"msg": "boom\nexit 1"}))
    assert report.failed == {"mini-2": ["Give each port its network: boom\nexit 1"]} and report.exit_status == 1
    assert report.cluster_failed == [("Build the fabric", f"{why}\nthe picture, faults in red: /o/fabric.svg")]
    out = io.StringIO()
    runner.print_summary(report, stream=out)
    assert out.getvalue().splitlines()[:5] == [
        "failed: mini-2: Give each port its network: boom", "  exit 1",
        "failed: Build the fabric:", f"  {why}", "  the picture, faults in red: /o/fabric.svg"]


def test_progress_line_counts_hosts_and_failures():
    stream = io.StringIO()
    progress = runner_progress.Progress(stream)
    handle = runner_events.EventHandler(runner.RunReport(playbook="p"), progress)
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


def test_the_runs_rotation_removes_only_old_runs_of_its_own(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep")
    idents = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(14)]
    for n, ident in enumerate(idents):
        (runs / ident).mkdir()
        os.utime(runs / ident, (1_000_000 + n, 1_000_000 + n))
    (runs / "00000000-0000-4000-8000-00000000ffff").symlink_to(victim)  # a run's name, but a link
    (runs / "notes").mkdir()  # the user's
    (runs / "ffffffff-0000-4000-8000-000000000000").write_text("a file")
    os.utime(runs / "notes", (1, 1))
    runner_run.rotate_runs(runs, keep=10)
    assert sorted(p.name for p in runs.iterdir() if p.name in idents) == idents[4:]
    assert (victim / "precious").read_text() == "keep" and (runs / "notes").is_dir()
    assert (runs / "00000000-0000-4000-8000-00000000ffff").is_symlink()
    assert (runs / "ffffffff-0000-4000-8000-000000000000").is_file()


@pytest.mark.parametrize("setup, words", [
    (lambda out: out.chmod(0o777), "can be written by group and others (mode 0777)"),
    (lambda out: (out / "runs").symlink_to("/"), "runs is a symlink"),
])
def test_an_output_folder_another_account_could_use_is_bad_input_in_one_line(tmp_path, setup, words):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    setup(out)
    with pytest.raises(UserError) as refused:
        runner.run_playbook("hostfile", [str(inventory)], output_dir=out, progress=False)
    assert words in str(refused.value) and "\n" not in str(refused.value)
    assert type(refused.value) is UserError  # exit 2 (cli.main), not Busy


def test_the_cli_names_an_output_folder_others_can_write_in_one_line_and_exits_2(tmp_path, capsys):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    out = tmp_path / "shared"
    out.mkdir()
    out.chmod(0o777)
    assert cli.main(["hostfile", "-i", str(inventory), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"mlx-fleet hostfile: {out} can be written by group and others (mode 0777), who could change the "
                   f"hostfiles and ledgers mlx-fleet reads there: run chmod go-w {out}\n")
    assert list(out.iterdir()) == []


# --- the terminal tells the truth (issue 19 item 8) -------------------------------------------------


def _progress(*events) -> str:
    stream = io.StringIO()
    progress = runner_progress.Progress(stream)
    handle = runner_events.EventHandler(runner.RunReport(playbook="p"), progress, io.StringIO())
    for event in events:
        handle(event)
    progress.finish()
    return stream.getvalue()


def _task(name, action=""):
    return {"event": "playbook_on_task_start", "event_data": {"task": name, "task_action": action}}


def test_progress_hides_argument_checks_and_says_controller_steps_run_there():
    out = _progress(
        _task("Validate hosts", "mlx_fleet.cluster.inventory_check"),
        _event("runner_on_start", host="localhost"), _event("runner_on_ok", host="localhost"),
        _task("Validating arguments against arg spec 'main' - Settings every Mac needs",
              "ansible.builtin.validate_argument_spec"),
        *(_event(kind, host=h) for h in ("mini-1", "mini-2") for kind in ("runner_on_start", "runner_on_ok")),
        _task("Keep the Mac awake", "mlx_fleet.cluster.macos_node"),
        *(_event(kind, host=h) for h in ("mini-1", "mini-2") for kind in ("runner_on_start", "runner_on_ok")),
        _task("Check the lock, plan every node", "mlx_fleet.cluster.mlx_env_plan"),
        _event("runner_on_start", host="mini-1"), _event("runner_on_ok", host="mini-1", res={CLUSTER_STEP: True}))
    assert out.splitlines() == ["[1] Validate hosts: on the controller", "[2] Keep the Mac awake: 2/2 Macs",
                                "[3] Check the lock, plan every node: on the controller"]
    assert "Validating arguments" not in out


def test_a_failed_argument_check_is_named_in_a_persons_words():
    report = _report(_event("runner_on_failed", host="mini-1", action="ansible.builtin.validate_argument_spec",
                            task="Validating arguments against arg spec 'main' - Settings", res={"msg": "bad x"}))
    assert report.failed == {"mini-1": ["the role's variables: bad x"]}


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
    check.failed = {"mini-1": ["Read the Mac: boom"]}
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


def test_diff_prints_each_changes_differences_as_ansible_playbook_does():
    diffs = io.StringIO()
    report = runner.RunReport(playbook="p", diff=True)
    handle = runner_events.EventHandler(report, None, diffs)
    handle(_event("runner_on_ok", host="mini-2", task="Keep the Mac awake", res={"changed": True, "diff": [
        {"before_header": "pmset -g custom", "after_header": "pmset -g custom",
         "before": "sleep 1\nwomp 1\n", "after": "sleep 0\nwomp 1\n"}]}))
    handle(_event("runner_on_ok", host="mini-1", task="Create the folders", res={"changed": True, "results": [
        {"changed": True, "item": {"path": "/opt/x"}, "_ansible_item_label": "/opt/x",
         "diff": {"before": {"path": "/opt/x", "state": "absent"}, "after": {"path": "/opt/x", "state": "directory"}}},
        {"changed": False, "_ansible_item_label": "/opt/y", "diff": {"before": "a\n", "after": "a\n"}}]}))
    handle(_event("runner_on_ok", host="mini-3", task="Unchanged", res={"changed": False, "diff": {
        "before": "a\n", "after": "b\n"}}))
    text = diffs.getvalue()
    assert text.startswith("mini-2: Keep the Mac awake\n--- before: pmset -g custom\n+++ after: pmset -g custom\n"
                           "@@ -1,2 +1,2 @@\n-sleep 1\n+sleep 0\n womp 1\n")
    assert "mini-1: Create the folders (/opt/x)\n--- before\n+++ after\n" in text
    assert '-    "state": "absent"\n+    "state": "directory"\n' in text
    assert "/opt/y" not in text and "mini-3" not in text  # unchanged: nothing to show, as ansible-playbook
    quiet = io.StringIO()
    runner_events.EventHandler(runner.RunReport(playbook="p"), None, quiet)(  # without --diff: nothing printed
        _event("runner_on_ok", res={"changed": True, "diff": {"before": "a\n", "after": "b\n"}}))
    assert quiet.getvalue() == ""


def test_a_diff_on_a_terminal_clears_the_live_line_first():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    line, diffs = Tty(), io.StringIO()
    progress = runner_progress.Progress(line)
    handle = runner_events.EventHandler(runner.RunReport(playbook="p", diff=True), progress, diffs)
    handle(_task("Keep the Mac awake"))
    handle(_event("runner_on_start", host="mini-1"))
    handle(_event("runner_on_ok", host="mini-1", res={"changed": True, "diff": {"before": "a\n", "after": "b\n"}}))
    assert "-a\n+b\n" in diffs.getvalue()
    assert line.getvalue().endswith("\r\033[K\r\033[K[1] Keep the Mac awake: 1/1 Macs")


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

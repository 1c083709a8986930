"""The CLI's view of a run, from ansible-runner's events: what failed where, exit status, summary."""

from __future__ import annotations

import io
import os

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import CLUSTER_STEP, refusal
from mlx_fleet import cli, runner
from mlx_fleet.runner import events as runner_events, progress as runner_progress, run as runner_run
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import summary
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


def test_failures_unreachable_and_bad_input_map_to_their_exit_status():
    task = "Give each port its network"
    failed = _report(_event("runner_on_failed", host="mini-2", task=task, res={"msg": "boom"}))
    assert failed.exit_status == 1 and failed.failed == {"mini-2": [(task, "boom")]}
    ignored = _report(_event("runner_on_failed", res={"msg": "x"}, ignore_errors=True))
    assert ignored.exit_status == 0
    first_line = "ssh: connect timed out"
    gone = _report(_event("runner_on_failed", host="mini-2", res={"msg": "boom"}),
                   _event("runner_on_unreachable", host="mini-3", res={"msg": f"{first_line}\nmore"}))
    assert gone.exit_status == 4 and gone.unreachable == {"mini-3": first_line}
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
    assert report.failed == {"mini-1": [(task, old)]}  # not bad input: the Mac must be updated
    assert report.exit_status == 2  # nothing changed: the inventory is the first thing to fix
    unmarked = _report(_event("runner_on_failed", host="mini-1", task=task, res={"msg": twins}))
    assert unmarked.exit_status == 1 and unmarked.input_errors == []


CLUSTER_STEP_WHY = "auto: no ring through all 3 hosts: connect mini-1 Thunderbolt 2 to mini-3 Thunderbolt 1"
CLUSTER_STEP_PICTURE = "the picture, faults in red: /o/fabric.svg"
MAC_STEP = "Give each port its network"


def cluster_step_and_mac_failed():
    """The fabric (run once for the cluster, under mini-1) and mini-2's own step failed, each in two lines."""
    return _report(
        _event("runner_on_failed", host="mini-1", action="mlx_fleet.cluster.fabric", task="Build the fabric",
               res={"msg": f"{CLUSTER_STEP_WHY}\n{CLUSTER_STEP_PICTURE}", CLUSTER_STEP: True}),
        _event("runner_on_failed", host="mini-2", task=MAC_STEP, res={"msg": "boom\nexit 1"}))


def test_a_cluster_steps_failure_names_no_mac():
    report = cluster_step_and_mac_failed()
    assert report.failed == {"mini-2": [(MAC_STEP, "boom\nexit 1")]} and report.exit_status == 1
    assert report.cluster_failed == [("Build the fabric", f"{CLUSTER_STEP_WHY}\n{CLUSTER_STEP_PICTURE}")]


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
    runner_run.rotate_runs(runs, keep=10).join()
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
    # One line that names the folder and ends with the command that fixes it (the wording: the test above).
    assert err.count("\n") == 1 and err.startswith(f"mlx-fleet hostfile: {out} ")
    assert err.endswith(f"chmod go-w {out}\n")
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
    assert report.failed == {"mini-1": [("the role's variables", "bad x")]}


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




def test_a_steps_detail_follows_the_macs_count_on_the_live_line_and_goes_with_the_step():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    line = Tty()
    progress = runner_progress.Progress(line)
    handle = runner_events.EventHandler(runner.RunReport(playbook="p"), progress, io.StringIO())
    handle(_task("Copy the models"))
    handle(_event("runner_on_start", host="mini-1"))
    progress.set_detail("mini-1 1.0 MB/2.0 MB")
    assert line.getvalue().endswith("\r\033[K[1] Copy the models: ...; mini-1 1.0 MB/2.0 MB")
    handle(_task("Say what moved"))
    assert line.getvalue().endswith("\r\033[K[2] Say what moved: ...")


def test_the_sync_progress_shows_each_mac_s_bytes_rate_and_time_left_from_its_datagrams():
    from mlx_fleet.models_cli import Transfers

    transfers = Transfers()
    transfers.heard(b'["mini-2", 0, 4000000]', 10.0)
    transfers.heard(b'["mini-1", 1000000, 3000000]', 10.0)
    transfers.heard(b'["mini-1", 2000000, 3000000]', 12.0)
    for odd in (b"not json", b'["mini-3", "1", 2]', b'{"a": 1}', b"5"):
        transfers.heard(odd, 12.0)  # only shown: anything else is left out
    assert transfers.line() == "mini-1 2.0 MB/3.0 MB 500.0 kB/s, 2 s left; mini-2 0 B/4.0 MB 0 B/s"

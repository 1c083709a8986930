"""The MLX jobs on a Mac without a Mac: `ps -axo pid,ppid,etime,rss,command` parsed (macos_parsers.parse_ps), the
jobs found in it with their trees, memory and launchers (module_utils.mlx_jobs), and the findings the watch and the
check before a run make of them (mlx_fleet.jobs); the stop's script under /bin/sh."""

import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_jobs import jobs
from mlx_fleet import jobs as mac_jobs

LISTING = (Path(__file__).parents[1] / "fixtures/ps/macos-ps-axo.txt").read_text().split("\n", 1)[1]
ENV = "/opt/mlx-fleet/venv"


@pytest.mark.parametrize("etime, seconds", [("00:03", 3), ("45:00", 2700), ("02:14:09", 8049),
                                            ("1-03:00:12", 97212), ("07-21:03:49", 680629)])
def test_elapsed_time_as_bsd_ps_prints_it(etime, seconds):
    assert parsers.parse_etime(etime) == seconds


@pytest.mark.parametrize("etime", ["3", "1:2:3:4", "-01:00", "01:aa", ""])
def test_an_elapsed_time_in_another_form_is_refused(etime):
    with pytest.raises(ValueError, match="^ps: "):
        parsers.parse_etime(etime)


def test_the_listing_parses_every_process():
    processes = parsers.parse_ps(LISTING)
    assert len(processes) == 15
    assert processes[0] == {"pid": 1, "ppid": 0, "age_seconds": 680629, "rss_kib": 12000, "command": "/sbin/launchd"}
    assert processes[8]["command"] == "sh -c nohup /opt/mlx-fleet/venv/bin/python -m mlx_lm.server"


def test_another_header_is_refused_and_an_odd_line_left_out_with_a_warning():
    with pytest.raises(ValueError, match="^ps: no"):
        parsers.parse_ps("  PID COMMAND\n    1 /sbin/launchd\n")
    warnings = []
    assert [p["pid"] for p in parsers.parse_ps(LISTING + "  12 x y z\n", warnings)] == [
        p["pid"] for p in parsers.parse_ps(LISTING)]
    assert len(warnings) == 1 and "12 x y z" in warnings[0]
    with pytest.raises(ValueError):
        parsers.parse_ps(LISTING + "  12 x y z\n")


def test_jobs_with_their_trees_memory_and_launchers():
    found = {job["pid"]: job for job in jobs(parsers.parse_ps(LISTING), ENV)}
    assert sorted(found) == [404, 778, 902]  # mlx.launch with its rank, the orphaned server, the job in tmux
    launch, server, tmux = found[404], found[778], found[902]
    assert launch["pids"] == [404, 405, 406] and launch["rss_kib"] == 51200 + 1536 + 8388608
    assert launch["launcher"] == "sshd-session: admin@notty" and not launch["orphan"]
    assert server["pids"] == [778, 779] and server["orphan"] and server["launcher"] is None
    assert server["age_seconds"] == 97212 and server["rss_kib"] == 313524224 + 204800
    assert tmux["launcher"] == "tmux new -d -s eval" and not tmux["orphan"]


def test_without_the_environment_only_mlx_launch_is_a_job():
    assert [job["pid"] for job in jobs(parsers.parse_ps(LISTING), "")] == [404]


def test_a_parent_missing_from_the_listing_is_not_called_an_orphan():
    processes = [{"pid": 10, "ppid": 9, "age_seconds": 1, "rss_kib": 1, "command": ENV + "/bin/python x.py"}]
    assert [(job["orphan"], job["launcher"]) for job in jobs(processes, ENV)] == [(False, None)]


def test_findings_of_the_jobs():
    listed = jobs(parsers.parse_ps(LISTING), ENV)
    [orphan] = mac_jobs.orphan_ranks("mini-2", listed)
    assert (orphan.kind, orphan.hosts, orphan.fix) == ("orphan-rank", ("mini-2",), mac_jobs.STOP_ORPHANS)
    assert "pid 778" in orphan.found and "299.2 GiB" in orphan.found
    running = mac_jobs.running("mini-2", listed)
    assert [(f.kind, f.fix) for f in running] == [("job-running", mac_jobs.STOP_JOB + f"mini-2:{pid}")
                                                  for pid in (404, 778, 902)]
    assert mac_jobs.orphan_ranks("mini-2", [job for job in listed if not job["orphan"]]) == []


def test_the_probe_section_gives_the_jobs_or_why_not():
    assert [j["pid"] for j in mac_jobs.jobs_in("m", {"ps": (0, LISTING)}, ENV).jobs] == [404, 778, 902]
    assert mac_jobs.jobs_in("m", {}, ENV).error == "ps: no output"
    assert mac_jobs.jobs_in("m", {"ps": (1, "")}, ENV).error == "ps: exit status 1"
    assert mac_jobs.jobs_in("m", {"ps": (0, "nonsense\n")}, ENV).error.startswith("ps: no")


def test_the_stop_script_terms_then_kills_what_is_left_then_lists():
    polite = subprocess.Popen(["sleep", "60"])
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"])
    time.sleep(0.3)
    done = subprocess.run(["/bin/sh", "-c", mac_jobs.stop_script([polite.pid, stubborn.pid], grace=0.6)],
                          capture_output=True, text=True, timeout=30)
    assert polite.wait(5) == -15 and stubborn.wait(5) == -9
    assert "@@mlx-fleet-verify-section ps" in done.stdout


@settings(deadline=None, database=None, derandomize=True, max_examples=200)
@given(st.lists(st.sampled_from(LISTING.splitlines()[1:]) | st.text(max_size=40), max_size=12), st.booleans())
def test_odd_listings_are_a_value_error_or_jobs_never_a_traceback(lines, header):
    text = "\n".join(([LISTING.splitlines()[0]] if header else []) + lines)
    warnings = []
    try:
        processes = parsers.parse_ps(text, warnings)
    except ValueError as exc:
        assert str(exc).startswith("ps: ")
        return
    for job in jobs(processes, ENV):
        assert job["pid"] in job["pids"] and job["rss_kib"] >= 0


def test_os_update_facts_lists_the_jobs_from_the_same_read():
    from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import READS
    from ansible_collections.mlx_fleet.cluster.plugins.modules import os_update_facts
    from module_runner import Commands, fixture, run_module

    def key(argv):
        return (argv[0].rsplit("/", 1)[-1], *argv[1:])

    answers = {key(READS["sw_vers"]): (0, fixture("sw_vers__sudo-is-man-pmset__1.txt"), ""),
               key(READS["softwareupdate"]): (0, fixture("softwareupdate-list__topgrade-rs-topgrade-issue-2123__1.txt"), ""),
               ("ps", "-axo", "pid,ppid,etime,rss,command"): (0, LISTING, "")}
    result = run_module(os_update_facts.main, {"env_path": ENV}, Commands(answers))
    listed = result["ansible_facts"]["mlx_fleet_os_update"]["jobs"]
    assert [(job["pid"], job["orphan"]) for job in listed] == [(404, False), (778, True), (902, False)]

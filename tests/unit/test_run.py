"""`mlx-fleet run` without Macs: the exit status from how the ranks ended, what is staged, the check before the
launch, and the shared launcher's pieces run here (the supervisor's stall, tree stop and lost launcher; the guard;
the tag reader a line at a time)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from mlx_fleet.run import job as jobrun
from mlx_fleet.verify import check_program as cp
from mlx_fleet.verify.jobs import Job, Rank

HOSTS = ["m1", "m2", "m3"]


def ended(rank: int, *events: dict) -> Rank:
    return Rank(rank, HOSTS[rank], events=[{"event": "start"}, *events])


def outcome(*ranks: Rank, first: int | None = None, **fields) -> jobrun.Outcome:
    job = Job("t", "t", "run", "ring", {"hosts": [{"ssh": h} for h in HOSTS]}, None, ranks=list(ranks),
              first_failure=first)
    return jobrun.Outcome(job, **fields)


EXIT_0 = {"event": "exit", "code": 0}
STOPPED = {"event": "stopped", "signal": 1}


@pytest.mark.parametrize("final, status, ending", [
    ({"event": "exit", "code": 3}, 3, "exited"),
    ({"event": "exit", "code": -9}, 128 + 9, "killed"),
    ({"event": "timeout", "deadline": 5}, jobrun.EXIT_TIMEOUT, "timed-out"),
    ({"event": "stall", "stall": 10}, jobrun.EXIT_STALL, "stalled"),
    ({"event": "orphaned", "launcher": 7}, jobrun.EXIT_LOST, "cut"),
])
def test_the_exit_status_is_the_first_failing_ranks(final, status, ending):
    result = outcome(ended(0, STOPPED), ended(1, EXIT_0), ended(2, final), first=2)
    assert (result.exit_status, result.first_failed.rank, result.first_failed.ending) == (status, 2, ending)


def test_a_rank_killed_by_a_signal_is_named_with_it():
    assert ended(0, {"event": "exit", "code": -9}).signal == "SIGKILL"
    assert ended(0, {"event": "exit", "code": 1}).signal is None


def test_every_rank_exiting_0_is_0_and_nothing_else_is():
    assert outcome(ended(0, EXIT_0), ended(1, EXIT_0), ended(2, EXIT_0)).exit_status == 0
    # no failure came in the stream: the lowest rank that did not exit 0
    assert outcome(ended(0, EXIT_0), ended(1, STOPPED), ended(2, EXIT_0)).first_failed.rank == 1
    interrupted = outcome(ended(0, STOPPED), interrupted=True)
    assert (interrupted.exit_status, interrupted.first_failed) == (130, None)
    assert jobrun.Outcome(findings=[Finding("hostfile-stale", found="x")]).exit_status == jobrun.EXIT_REFUSED


def test_a_script_on_the_controller_is_staged_anything_else_runs_as_given(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    files, command, as_is = jobrun.command_files([str(script), "--lr", "1"])
    assert sorted(files) == ["check_program.py", "script/train.py"] and command == ["script/train.py", "--lr", "1"]
    assert not as_is
    files, command, as_is = jobrun.command_files(["python", "-m", "mlx_lm.generate"])
    assert sorted(files) == ["check_program.py"] and command == ["python", "-m", "mlx_lm.generate"] and as_is


def test_the_tag_reader_gives_each_line_once_it_is_whole_with_when_it_came():
    reader = cp.TagReader()
    tag = cp.TAG
    assert reader.feed(f"{tag} 0 0 {cp.OUT}{cp.MORE} {json.dumps('a long ')}\n", 1.0) == []
    assert reader.feed(f"{tag} 0 1 {cp.OUT} {json.dumps('line')}\n", 2.0) == [(0, cp.OUT, "a long line")]
    assert reader.feed(f"{tag} 0 2 {cp.EVENT} {json.dumps({'event': 'exit', 'code': 0})}\n", 3.0) == [
        (0, cp.EVENT, {"event": "exit", "code": 0})]
    state = reader.result()[0]
    assert state["times"] == [2.0, 3.0] and state["garbled"] == 0


def start_supervisor(tmp_path: Path, body: str, *args: str) -> subprocess.Popen:
    program = tmp_path / "check_program.py"
    program.write_bytes(Path(cp.__file__).read_bytes())
    script = tmp_path / "task.py"
    script.write_text(body)
    return subprocess.Popen([sys.executable, str(program), "supervise", "--job", "j", "--deadline", "0", *args,
                             "--", str(script)], stdout=subprocess.PIPE, text=True,
                            env={"MLX_RANK": "0", "PATH": "/usr/bin:/bin"})


GRANDCHILD = ("import subprocess, sys, time\n"
              "child = subprocess.Popen(['sleep', '600'])\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(600)\n")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie awaiting its reaper is gone too
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_a_rank_silent_for_the_stall_is_stopped_with_its_whole_tree(tmp_path):
    supervisor = start_supervisor(tmp_path, GRANDCHILD, "--stall", "2")
    out, _ = supervisor.communicate(timeout=60)
    rank = cp.read_tagged(out.splitlines())[0]
    assert rank["events"][-1]["event"] == "stall" and rank["events"][-1]["stall"] == 2
    assert gone(int(rank["lines"][1][1]))  # the child's own child


def test_a_signal_stops_the_childs_whole_tree(tmp_path):
    supervisor = start_supervisor(tmp_path, GRANDCHILD)
    for line in supervisor.stdout:
        if f" {cp.OUT} " in line:
            break
    supervisor.send_signal(signal.SIGTERM)
    out, _ = supervisor.communicate(timeout=60)
    rank = cp.read_tagged([line, *out.splitlines()])[0]
    assert rank["events"][-1] == {"event": "stopped", "signal": signal.SIGTERM, "seconds": rank["events"][-1]["seconds"]}
    assert gone(int(json.loads(line.split(" ", 4)[4])))


def test_a_supervisor_whose_launcher_is_gone_stops_by_itself(tmp_path):
    program = tmp_path / "check_program.py"
    program.write_bytes(Path(cp.__file__).read_bytes())
    (tmp_path / "task.py").write_text("import time\ntime.sleep(600)\n")
    record = tmp_path / cp.OUTPUT_DIR / "j.0"
    # The launcher (a shell) starts the supervisor and goes away after a second, as an ssh session that closed.
    subprocess.run(["/bin/sh", "-c", f"MLX_RANK=0 {sys.executable} {program} supervise --job j --deadline 0 -- "
                                     f"{tmp_path / 'task.py'} >/dev/null 2>&1 & sleep 1"], timeout=30)
    ends = time.monotonic() + 30
    while time.monotonic() < ends and '"orphaned"' not in (record.read_text() if record.exists() else ""):
        time.sleep(0.2)
    events = cp.read_tagged(record.read_text().splitlines())[0]["events"]
    assert events[-1]["event"] == "orphaned" and gone(events[0]["child"])


def test_the_guard_stops_its_launcher_when_the_controller_is_gone():
    guard = subprocess.Popen([sys.executable, "-m", "mlx_fleet.verify.guard", "--", "sleep", "600"],
                             stdin=subprocess.PIPE, start_new_session=True)
    guard.stdin.close()  # what the controller's death does to the pipe
    guard.wait(timeout=30)
    with pytest.raises(ProcessLookupError):
        os.killpg(guard.pid, 0)


@pytest.mark.parametrize("launcher, status", [("exit 3", 3), ("kill -TERM $$", 128 + signal.SIGTERM)])
def test_the_guard_ends_with_its_launchers_status_and_says_nothing_itself(launcher, status):
    guard = subprocess.Popen([sys.executable, "-m", "mlx_fleet.verify.guard", "--", "sh", "-c", launcher],
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    err = guard.stderr.read()  # until it ended; its stdin still open: the controller is alive
    assert (guard.wait(timeout=30), err) == (status, b"")
    guard.stdin.close()


def test_record_diff_compares_two_runs(tmp_path):
    from mlx_fleet import record as records

    def run_record(name: str, status: int, first: int | None) -> str:
        facts = {"cluster": {"backend": "ring", "hostfile": None, "envs": [], "cables": [], "rdma": {}}, "macs": {}, "models": {}}
        record = records.build(facts, inventory=tmp_path / "inv.yml", output_dir=tmp_path, recorded_at=name,
                               not_recorded=[], command=["job.py"], cwd=tmp_path)
        record["run"] = {"id": name, "exit_status": status, "first_failure": first, "seconds": 1.0,
                         "ranks": [{"rank": 0, "mac": "m1", "ending": "exited", "exit_code": status}]}
        (tmp_path / name).mkdir()
        records.write(tmp_path / name / "record.json", record)
        return str(tmp_path / name / "record.json")

    a, b = records.load(run_record("a", 0, None)), records.load(run_record("b", 3, 0))
    assert [key for key, _, _ in records.changes(a, b)] == [records.TIME_KEY, "run.exit_status", "run.first_failure",
                                                            "run.id", "run.ranks"]


def test_a_failed_runs_cause_comes_from_explains_rules():
    from mlx_fleet.explain import RULES

    rule = RULES[0]
    failing = Rank(1, "m2", [(cp.ERR, "RuntimeError: " + rule.example)],
                   events=[{"event": "start"}, {"event": "exit", "code": 1}])
    result = outcome(ended(0, STOPPED), failing, first=1)
    assert result.cause().causes == list(rule.causes) and result.exit_status == 1
    assert outcome(ended(0, {"event": "exit", "code": 1})).cause().causes == []  # nothing known: unknown

"""`mlx-fleet run` on a simulated 4-Mac ring (real MLX over the simulated cables): exit statuses, rank logs, the
run record, and no process of the job left on any Mac (the Macs' own ps) after a failing rank, Ctrl-C, a stall,
or the launching process SIGKILLed; a hostfile changed since the converge is refused with nothing started."""

from __future__ import annotations

import calendar
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import RING
from simlib import BIN, REPO, Sim, node_python
from simlib import run_tool as run_cli

pytestmark = pytest.mark.sim
JOB = str(Path(__file__).parent / "scripts/ranks_job.py")
STOPPED_WITHIN = 15  # seconds: the bound for stopping every rank
ORPHANS_STOP_WITHIN = 30  # seconds: a rank whose launcher is gone stops itself within this


def env() -> dict:
    return os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def argv(sim: Sim, out: Path, *args: str) -> list[str]:
    python, _ = node_python()
    return [str(BIN / "mlx-fleet"), "run", "-i", str(sim.dir / "inventory.yml"), "--python", python,
            "--out", str(out), *args]


def run(sim: Sim, out: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(argv(sim, out, *args), 600)


def the_run(out: Path) -> tuple[Path, dict]:
    """The one run folder under out and its record."""
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    return folder, json.loads((folder / "record.json").read_text())


def job_processes(sim: Sim) -> dict[str, list[str]]:
    """Every Mac's processes of a run (its supervisors and their children), from the Mac's ps."""
    found = {}
    for node in RING:
        listed = sim.ssh(node, "ps -ax -o pid,command").stdout.splitlines()
        found[node] = [line for line in listed if "ranks_job.py" in line or "--job run-" in line]
    return found


def none_left_within(sim: Sim, seconds: float) -> dict[str, list[str]]:
    """Poll the Macs until no process of a run is left or SECONDS passed; what was left at the last look."""
    ends = time.monotonic() + seconds
    while True:
        left = {node: lines for node, lines in job_processes(sim).items() if lines}
        if not left or time.monotonic() > ends:
            return left
        time.sleep(1)


def started(process: subprocess.Popen) -> None:
    """Read the run's terminal (rank 0's output) until rank 0 is working."""
    for line in process.stdout:
        if "rank 0 working" in line:
            return
    raise AssertionError(f"the job never started: {process.stderr.read()}")


def test_all_sum_on_every_rank_exits_0_with_a_log_per_rank_and_the_record(ring, tmp_path):
    done = run(ring, tmp_path, "--", JOB)
    assert done.returncode == 0, done.stdout + done.stderr
    folder, record = the_run(tmp_path)
    assert sorted(p.name for p in folder.glob("rank-*.log")) == [f"rank-{n}-{mac}.log" for n, mac in enumerate(RING)]
    assert "rank 0 of 4: all_sum=10" in done.stdout  # the terminal shows rank 0
    assert record["command"]["argv"] == [JOB] and set(record["macs"]) == set(RING)
    run_fields = record["run"]
    assert run_fields["exit_status"] == 0 and run_fields["first_failure"] is None and run_fields["left_running"] == []
    assert [(r["rank"], r["mac"], r["exit_code"], r["ending"]) for r in run_fields["ranks"]] == [
        (n, mac, 0, "completed") for n, mac in enumerate(RING)]
    for rank in run_fields["ranks"]:
        log = Path(rank["log"])
        assert log.stat().st_size == rank["log_bytes"]
        assert f"[out] rank {rank['rank']} of 4: all_sum=10" in log.read_text()
    assert job_processes(ring) == {node: [] for node in RING}
    # Made from the check's own reads, the record says what the audit's read of the Macs says.
    audited = run_cli([str(BIN / "mlx-fleet"), "record", "-i", str(ring.dir / "inventory.yml"), "--out",
                       str(tmp_path / "audited.json"), "--", JOB], 600)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    from mlx_fleet import record as records

    changed = {key.split(".")[0] for key, _, _ in records.changes(records.load(str(tmp_path / "audited.json")), record)}
    assert changed <= {records.TIME_KEY, "run"}


def test_a_rank_exiting_3_stops_every_rank_and_names_rank_2(ring, tmp_path):
    done = run(ring, tmp_path, "--all-ranks", "--", JOB, "--exit-rank", "2", "--exit-code", "3", "--seconds", "600")
    ended = time.time()
    assert done.returncode == 3, done.stdout + done.stderr
    assert job_processes(ring) == {node: [] for node in RING}
    folder, record = the_run(tmp_path)
    ranks = record["run"]["ranks"]
    assert record["run"]["first_failure"] == 2 and record["run"]["exit_status"] == 3
    assert (ranks[2]["mac"], ranks[2]["exit_code"], ranks[2]["ending"]) == (RING[2], 3, "exited")
    assert all(r["ending"] != "completed" for r in ranks)  # the others were stopped, not left to finish
    assert f"[1 {RING[1]}] rank 1 working" in done.stdout  # --all-ranks: every rank, tagged
    exit_line = next(line for line in Path(ranks[2]["log"]).read_text().splitlines() if '"event": "exit"' in line)
    exited_at = calendar.timegm(time.strptime(exit_line.split(".", 1)[0], "%Y-%m-%dT%H:%M:%S"))
    assert ended - exited_at <= STOPPED_WITHIN


def test_ctrl_c_stops_every_rank(ring, tmp_path):
    process = subprocess.Popen(argv(ring, tmp_path, "--", JOB, "--seconds", "600"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env(), cwd="/", stdin=subprocess.DEVNULL)
    started(process)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 130
    assert none_left_within(ring, STOPPED_WITHIN) == {}
    _, record = the_run(tmp_path)
    assert record["run"]["interrupted"] and record["run"]["exit_status"] == 130
    assert record["run"]["first_failure"] is None and len(record["run"]["ranks"]) == 4


def test_a_silent_rank_is_stopped_as_a_stall(ring, tmp_path):
    done = run(ring, tmp_path, "--stall", "10", "--", JOB, "--silent-rank", "1", "--seconds", "600")
    assert done.returncode == 125, done.stdout + done.stderr
    _, record = the_run(tmp_path)
    stalled = record["run"]["ranks"][1]
    assert record["run"]["first_failure"] == 1 and stalled["ending"] == "stalled"
    assert stalled["final_event"]["event"] == "stall" and stalled["final_event"]["stall"] == 10
    assert job_processes(ring) == {node: [] for node in RING}


def test_ranks_stop_by_themselves_when_the_launching_process_is_killed(changed_ring, tmp_path):
    ring = changed_ring  # the killed run's folder stays on the Macs
    process = subprocess.Popen(argv(ring, tmp_path, "--", JOB, "--seconds", "600"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env(), cwd="/", stdin=subprocess.DEVNULL)
    started(process)
    process.kill()
    process.wait(timeout=10)
    assert none_left_within(ring, ORPHANS_STOP_WITHIN) == {}


def test_a_hostfile_changed_since_the_converge_is_refused_with_nothing_started(ring, tmp_path):
    hostfile = ring.dir / ".mlx-fleet" / "hostfile.json"
    published = os.readlink(hostfile)
    text = hostfile.read_text()
    hostfile.unlink()
    hostfile.write_text(text)  # the same content, but no longer the published file
    try:
        done = run(ring, tmp_path, "--", JOB)
    finally:
        hostfile.unlink()
        hostfile.symlink_to(published)
    assert done.returncode == 126, done.stdout + done.stderr
    assert list(tmp_path.iterdir()) == []  # no run folder, no record
    for node in RING:
        assert ring.ssh(node, "ls -d .mlx-fleet-run-* 2>/dev/null || true").stdout == ""

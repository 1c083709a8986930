"""The check before `mlx-fleet run`, `mlx-fleet ps`, `mlx-fleet stop` and the watch's orphan report on simulated
Macs (issue 29): the session's converged 4-Mac ring (conftest.shared_ring: its fabric configured, saved as a
snapshot, restored after each test that changes it). Each reason not to launch is one finding of its kind naming its Macs, and the
check starts nothing on any Mac; a rank planted detached from its ssh session is listed as an orphan, reported
by the watch and removed by `stop --orphans`, which the Mac's own ps confirms."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import CONVERGED_RING, RING
from conftest import RING_ENV as ENV
from simlib import BIN, REPO, Sim

pytestmark = pytest.mark.sim
COMMAND = ["python", "-m", "mlx_lm.generate", "--model", "tiny"]


def run(argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd="/",
                          stdin=subprocess.DEVNULL)


def inventory(sim: Sim) -> str:
    return str(sim.dir / "inventory.yml")


def cli(sim: Sim, *args: str) -> subprocess.CompletedProcess:
    done = run([str(BIN / "mlx-fleet"), args[0], "-i", inventory(sim), *args[1:]], timeout=180)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def jobs_on_macs(sim: Sim) -> dict[str, list[dict]]:
    done = cli(sim, "ps", "--json")
    assert done.returncode in (0, 1, 4), done.stdout + done.stderr
    return {host: mac["jobs"] for host, mac in json.loads(done.stdout).items()}


def pids(sim: Sim) -> dict[str, list[int]]:
    return {host: [job["pid"] for job in listed] for host, listed in jobs_on_macs(sim).items()}


def check(sim: Sim, backend: str = "auto", command: list[str] = COMMAND, inventory_file: str | None = None):
    """The check's findings as sorted (kind, Macs), after asserting it started nothing on any Mac."""
    from mlx_fleet.run.checks import before_launch

    before = pids(sim)
    found = before_launch(inventory_file or inventory(sim), backend, command).findings
    assert pids(sim) == before
    return sorted({(f.kind, f.hosts) for f in found})


def plant_orphan(sim: Sim, node: str) -> int:
    """A rank of the environment started over ssh and detached from its session (the session then ends): its
    parent becomes launchd."""
    done = sim.ssh(node, f"setsid nohup {ENV}/bin/python -c 'import time; time.sleep(900)' >/dev/null 2>&1 "
                         "< /dev/null & echo $!", own_config=True)
    time.sleep(0.5)
    return int(done.stdout.split()[-1])


def alive_on_mac(sim: Sim, node: str, pid: int) -> bool:
    listed = sim.ssh(node, "ps -axo pid,ppid,etime,rss,command", own_config=True).stdout.splitlines()[1:]
    return any(line.split()[0] == str(pid) for line in listed)


def test_a_converged_ring_may_launch(ring):
    assert check(ring) == []


def test_each_reason_not_to_launch_is_one_finding_and_nothing_starts(changed_ring):
    sim = changed_ring
    # RDMA off everywhere (the sim's Macs have none) matters only to an RDMA backend
    assert check(sim, "jaccl") == [("rdma-off", (node,)) for node in RING]
    # a declared model the command names, on no Mac; one it does not name is not asked for
    declared = yaml.safe_load(Path(inventory(sim)).read_text())
    declared["all"]["children"]["mlx_cluster"].setdefault("vars", {})["mlx_fleet_models"] = [
        {"name": "tiny", "path": "/var/tmp/tiny-model"}, {"name": "other", "path": "/var/tmp/other-model"}]
    with_models = sim.dir / "inventory-models.yml"
    with_models.write_text(yaml.safe_dump(declared))
    assert check(sim, inventory_file=str(with_models)) == [("model-missing", (node,)) for node in RING]
    # an unfinished macOS update's hold marker on a Mac
    sim.cli("exec", RING[1], "--", "sh", "-c", "echo 'held: os-update in progress' > /opt/mlx-fleet/hostfile.held")
    assert check(sim) == [("update-held", (RING[1],))]
    sim.cli("exec", RING[1], "--", "rm", "/opt/mlx-fleet/hostfile.held")
    # another MLX job already running (here an orphan)
    pid = plant_orphan(sim, RING[2])
    assert check(sim) == [("job-running", (RING[2],))]
    cli(sim, "stop", f"{RING[2]}:{pid}")
    # the hostfile changed by hand on the controller: no longer the one published, nor the cluster model's
    hostfile = sim.dir / ".mlx-fleet" / "hostfile.json"
    data = json.loads(hostfile.read_text())
    data["hosts"][0]["ips"] = ["10.99.0.1"]
    hostfile.unlink()
    hostfile.write_text(json.dumps(data))
    assert check(sim) == [("hostfile-stale", ()), *[("hostfile-stale", (node,)) for node in RING]]
    hostfile.unlink()
    assert check(sim) == [("hostfile-stale", ())]
    sim.cli("restore", CONVERGED_RING)
    # a cable out, then a Mac unreachable
    sim.cli("unplug", f"{RING[0]}:2")
    assert check(sim) == [("cable", (RING[0], RING[1]))]
    sim.cli("restore", CONVERGED_RING)
    sim.cli("link", RING[3], "down")
    assert check(sim) == [("unreachable", (RING[3],))]


def test_ps_lists_a_planted_orphan_the_watch_reports_it_and_stop_removes_it(changed_ring):
    sim = changed_ring
    pid = plant_orphan(sim, RING[1])
    listed = jobs_on_macs(sim)
    assert [(job["pid"], job["orphan"], job["launcher"]) for job in listed[RING[1]]] == [(pid, True, None)]
    assert listed[RING[1]][0]["rss_kib"] > 0 and all(not listed[n] for n in RING if n != RING[1])
    assert cli(sim, "ps").returncode == 1

    watched = cli(sim, "watch", "--once", "--out", str(sim.dir / "watch"))
    status = json.loads((sim.dir / "watch" / "status.json").read_text())
    assert watched.returncode == 1
    assert status["findings"][f"orphan-rank {RING[1]}"]["hosts"] == [RING[1]]

    stopped = cli(sim, "stop", "--orphans")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not alive_on_mac(sim, RING[1], pid)
    assert cli(sim, "ps").returncode == 0


def test_a_rank_under_its_ssh_session_has_its_launcher_and_stop_ends_its_tree(changed_ring):
    sim = changed_ring
    session = subprocess.Popen(["ssh", "-F", str(sim.dir / "ssh_config"), "-o", "BatchMode=yes", RING[0],
                                f"{ENV}/bin/python -c 'import subprocess, time; subprocess.Popen([\"{ENV}/bin/python\", "
                                f"\"-c\", \"import time; time.sleep(900)\"]); time.sleep(900)'"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        [job] = jobs_on_macs(sim)[RING[0]]
        assert not job["orphan"] and "sshd" in job["launcher"] and len(job["pids"]) == 2
        stopped = cli(sim, "stop", f"{RING[0]}:{job['pid']}", "--grace", "2")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert not any(alive_on_mac(sim, RING[0], p) for p in job["pids"])
    finally:
        session.kill()

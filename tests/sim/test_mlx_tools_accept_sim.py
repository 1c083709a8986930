"""MLX's own tools treat the simulated Macs as Macs: distributed_config discovers, launch runs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from simlib import BIN, node_python

pytestmark = pytest.mark.sim


def distributed_config(sim, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "mlx.distributed_config"), "--hosts", ",".join(sim.nodes), "--over", "thunderbolt", *args],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )


def cabled_devices(sim) -> dict[tuple[str, str], str]:
    """(node, peer) -> the node's rdma device on the cable to peer, from the sim's own cable list."""
    devices = {}
    for cable in sim.state()["cables"]:
        a, b = (end.strip().split(":") for end in cable.split("--"))
        devices[(a[0], b[0])] = sim.device(a[0], int(a[1]))
        devices[(b[0], a[0])] = sim.device(b[0], int(b[1]))
    return devices


def test_jaccl_hostfile_for_a_three_node_mesh(make_sim, tmp_path):
    sim = make_sim(nodes=3, topology="mesh", rdma="all")
    out = tmp_path / "h.json"
    result = distributed_config(sim, "--backend", "jaccl", "--auto-setup", "--output-hostfile", str(out))
    assert result.returncode == 0, result.stderr
    hostfile = json.loads(out.read_text())
    assert hostfile["backend"] == "jaccl"
    assert [h["ssh"] for h in hostfile["hosts"]] == sim.nodes
    devices = cabled_devices(sim)
    for i, host in enumerate(hostfile["hosts"]):
        expected = [None if j == i else f"rdma_{devices[(sim.nodes[i], peer)]}" for j, peer in enumerate(sim.nodes)]
        assert host["rdma"] == expected
        # The management address it found is the one the sim gave the Mac's en0.
        assert host["ips"] == [sim.state()["nodes"][sim.nodes[i]]["management_ip"]]


def test_auto_picks_the_ring_on_a_ring(make_sim, tmp_path):
    sim = make_sim(nodes=4, topology="ring", rdma="all")
    out = tmp_path / "h.json"
    result = distributed_config(sim, "--auto-setup", "--output-hostfile", str(out))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["backend"] == "jaccl-ring"


def test_unplugged_cable_is_reported_as_an_incomplete_mesh(make_sim, tmp_path):
    sim = make_sim(nodes=3, topology="mesh", rdma="all")
    cable = next(c for c in sim.state()["cables"] if c.startswith("mini-1:") and "mini-3:" in c)
    sim.cli("unplug", cable.split("--")[0].strip())
    result = distributed_config(sim, "--backend", "jaccl", "--output-hostfile", str(tmp_path / "h.json"))
    assert result.returncode == 1
    assert "Incomplete mesh, mini-1 is not connected to mini-3" in result.stderr


def test_ring_all_sum_runs_over_the_thunderbolt_cables(make_sim, tmp_path):
    sim = make_sim(nodes=3, topology="ring", rdma="none")
    ring = tmp_path / "ring.json"
    result = distributed_config(sim, "--backend", "ring", "--auto-setup", "--output-hostfile", str(ring))
    assert result.returncode == 0, result.stderr
    hostfile = json.loads(ring.read_text())
    assert all(ip.startswith("192.168.") for h in hostfile["hosts"] for ip in h["ips"])
    python, all_sum = node_python()

    ok = mlx_launch(ring, python, all_sum)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    lines = sorted(l for l in ok.stdout.splitlines() if l.startswith("rank "))
    assert lines == [f"rank {r} of 3: all_sum=6 expected=6" for r in range(3)]

    # A wrong address for one rank: it cannot bind there, so the job fails and no rank sums.
    # (mlx.launch itself exits 0 whatever its ranks did, so the ranks' output is the verdict.)
    hostfile["hosts"][1]["ips"] = ["192.168.250.9"]
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(hostfile))
    bad = mlx_launch(wrong, python, all_sum)
    assert bad.returncode != 124, "the job hung instead of failing"
    # ssh -tt merges the rank's stderr into mlx.launch's stdout.
    assert "Couldn't bind socket" in bad.stdout + bad.stderr
    assert "Node with rank 1 exited with code 1" in bad.stderr
    assert "all_sum=" not in bad.stdout


def mlx_launch(hostfile: Path, python: str, script: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            [str(BIN / "mlx.launch"), "--hostfile", str(hostfile), "--backend", "ring", "--", python, script],
            capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL, cwd="/",
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, 124, str(exc.stdout or ""), str(exc.stderr or ""))


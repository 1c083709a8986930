"""The Thunderbolt fabric on simulated Macs: hostfiles that match the cables and MLX's own tool,
addresses that work and survive reboots, wiring faults that stop the run and keep the last hostfile."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from simlib import BIN, Sim, cable_networks, changed_per_host, node_python, run_recorded

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]


def run(argv: list[str], timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    env = (env or os.environ) | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd="/",
                          stdin=subprocess.DEVNULL)


def hostfile_cmd(inventory: Path, out: Path) -> subprocess.CompletedProcess:
    return run([str(BIN / "mlx-fleet"), "hostfile", "-i", str(inventory), "--output-dir", str(out)])


def playbook(*argv: str) -> subprocess.CompletedProcess:
    """ansible-playbook, its results recorded as JSON (changed_per_host reads them)."""
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    return run_recorded([str(BIN / "ansible-playbook"), *argv], env, timeout=300, cwd="/", stdin=subprocess.DEVNULL)


def converge(inventory: Path, out: Path) -> subprocess.CompletedProcess:
    return playbook("-i", str(inventory), "-e", f"mlx_fleet_output_dir={out}", str(REPO / "playbooks/fabric.yml"))


def distributed_config(sim: Sim, backend: str, out: Path) -> subprocess.CompletedProcess:
    """MLX's own discovery (run after ours: its --auto-setup sets ifconfig addresses on the Macs)."""
    return run([str(BIN / "mlx.distributed_config"), "--hosts", ",".join(sim.nodes), "--over", "thunderbolt",
                "--backend", backend, "--auto-setup", "--output-hostfile", str(out)], timeout=120, env=sim.own_ssh_env())


def inventory_with(sim: Sim, path: Path, hosts: list[str] | None = None, **group_vars) -> Path:
    data = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    group = data["all"]["children"]["mlx_cluster"]
    group["vars"].update(group_vars)
    if hosts is not None:
        group["hosts"] = {h: group["hosts"][h] for h in hosts}
    path.write_text(yaml.safe_dump(data))
    return path


def cabled_device(sim: Sim, node: str, peer: str) -> str:
    for cable in sim.state()["cables"]:
        ends = dict((e.strip().split(":")[0], int(e.strip().split(":")[1])) for e in cable.split("--"))
        if set(ends) == {node, peer}:
            return sim.device(node, ends[node])
    raise AssertionError(f"{node} and {peer} are not cabled")


@pytest.mark.parametrize(
    ("nodes", "topology", "backend"),
    [(2, "mesh", "jaccl"), (3, "mesh", "jaccl"), (4, "mesh", "jaccl"), (4, "ring", "jaccl-ring"), (5, "ring", "jaccl-ring")],
    ids=["mesh2", "mesh3", "mesh4", "ring4", "ring5"],
)
def test_hostfile_matches_the_cables_and_mlx_distributed_config(make_sim, tmp_path, nodes, topology, backend):
    sim = make_sim(nodes=nodes, topology=topology, rdma="all")
    result = hostfile_cmd(sim.dir / "inventory.yml", tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr
    ours = json.loads((tmp_path / "out/hostfile.json").read_text())
    assert ours["backend"] == backend and ours["envs"] == []
    for i, host in enumerate(ours["hosts"]):
        node = host["ssh"]
        for j, device in enumerate(host["rdma"]):
            peer = ours["hosts"][j]["ssh"]
            if device is not None:
                assert device == f"rdma_{cabled_device(sim, node, peer)}"
            else:
                assert i == j or backend == "jaccl-ring"
    theirs_path = tmp_path / "theirs.json"
    theirs = distributed_config(sim, backend, theirs_path)
    assert theirs.returncode == 0, theirs.stderr
    theirs = json.loads(theirs_path.read_text())
    assert theirs["backend"] == ours["backend"]
    assert [h["ssh"] for h in theirs["hosts"]] == [h["ssh"] for h in ours["hosts"]]
    assert [h["rdma"] for h in theirs["hosts"]] == [h["rdma"] for h in ours["hosts"]]
    assert [h["ips"] for h in theirs["hosts"]] == [h["ips"] for h in ours["hosts"]]  # management addresses
    if topology == "ring":
        ring = json.loads((tmp_path / "out/hostfile-ring.json").read_text())
        assert ring["backend"] == "ring" and [h["ssh"] for h in ring["hosts"]] == sim.nodes
    # MLX's --auto-setup gave the ports addresses of its own (ifconfig, until a reboot): ours again gives every
    # cable end its own address back, live, and the same hostfile, rather than refusing until a reboot.
    again = hostfile_cmd(sim.dir / "inventory.yml", tmp_path / "out")
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads((tmp_path / "out/hostfile.json").read_text()) == ours
    for link in json.loads((tmp_path / "out/cluster.json").read_text())["links"]:
        for end in (link["a"], link["b"]):
            live = sim.cli("exec", end["host"], "--", "ifconfig", end["device"]).stdout
            assert re.findall(r"inet (\S+) netmask", live) == [end["address"]], (link["cable"], live)


def test_ring_all_sum_over_our_addresses_survives_reboots_and_reconverges_to_no_change(make_sim, tmp_path):
    sim = make_sim(nodes=4, topology="ring", rdma="none")
    out = tmp_path / "out"
    first = converge(sim.dir / "inventory.yml", out)
    assert first.returncode == 0, first.stdout
    ring = out / "hostfile-ring.json"
    assert json.loads((out / "hostfile.json").read_text())["backend"] == "ring"
    python, script = node_python()

    def all_sum() -> list[str]:
        done = run([str(BIN / "mlx.launch"), "--hostfile", str(ring), "--backend", "ring", "--", python, script],
                   timeout=120, env=sim.own_ssh_env())
        return sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))

    expected = [f"rank {r} of 4: all_sum=10 expected=10" for r in range(4)]
    assert all_sum() == expected
    # Every Mac has the same hostfile at the same path, as mlx.launch on a node needs.
    for node in sim.nodes:
        assert sim.ssh(node, "cat /opt/mlx-fleet/hostfile-ring.json", own_config=True).stdout == ring.read_text()

    for node in sim.nodes:
        sim.cli("reboot", node)
    assert all_sum() == expected, "the Thunderbolt addresses did not survive a reboot"

    again = converge(sim.dir / "inventory.yml", out)
    assert again.returncode == 0, again.stdout
    assert set(changed_per_host(again).values()) == {0}, again.stdout


@pytest.fixture(scope="module")
def planned():
    """A 3-Mac mesh whose inventory carries the cable plan, converged once (the last good hostfile)."""
    sim = Sim(nodes=3, topology="mesh", rdma="all")
    out = sim.dir / "out"
    inventory = inventory_with(sim, sim.dir / "planned.yml", mlx_fleet_cables=sim.state()["cables"])
    result = hostfile_cmd(inventory, out)
    assert result.returncode == 0, result.stdout
    yield sim, inventory, out
    sim.down()


@pytest.mark.parametrize(
    ("rewire", "lines"),
    [
        ([("unplug", "mini-2:2")],
         ["missing cable mini-2:2 -- mini-3:2: connect mini-2 Thunderbolt 2 to mini-3 Thunderbolt 2"]),
        ([("unplug", "mini-2:2"), ("plug", "mini-2:3", "mini-3:2")],
         ["wrong port: mini-2:2 -- mini-3:2 is cabled as mini-2:3 -- mini-3:2; move the cable in mini-2 "
          "Thunderbolt 3 to Thunderbolt 2"]),
        ([("unplug", "mini-2:2"), ("plug", "mini-2:2", "mini-3:2", "--speed", "40")],
         ["slow cable mini-2:2 -- mini-3:2: 40 Gb/s where both ends do 80 Gb/s; replace it with a Thunderbolt 5 cable"]),
        ([("unplug", "mini-2:2"), ("plug", "mini-2:2", "mini-3:2", "--dock", "CalDigit TS4")],
         ["missing cable mini-2:2 -- mini-3:2: connect mini-2 Thunderbolt 2 to mini-3 Thunderbolt 2",
          "warning: mini-2: Thunderbolt 2 reaches mini-3 through a dock or hub (CalDigit TS4), not a direct "
          "cable; cable them directly: only a direct cable carries RDMA and fabric addresses"]),
        ([("plug", "mini-1:3", "mini-2:3")],
         ["cable mini-1:3 -- mini-2:3 is not in the cable plan (mlx_fleet_cables); unplug it or add it to the plan"]),
    ],
    ids=["missing", "wrong-port", "tb4-speed", "behind-a-dock", "not-in-plan"],
)
def test_wiring_fault_stops_and_keeps_the_last_hostfile(planned, rewire, lines):
    sim, inventory, out = planned
    before = {name: (out / name).read_bytes() for name in ("hostfile.json", "cluster.json")}
    try:
        for action, *args in rewire:
            sim.cli(action, *args)
        result = hostfile_cmd(inventory, out)
    finally:  # put the cables back as planned for the next case
        for cable in list(sim.state()["cables"]):
            sim.cli("unplug", cable.split("--")[0].strip())
        for cable in yaml.safe_load(inventory.read_text())["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_cables"]:
            sim.cli("plug", *(end.strip() for end in cable.split("--")))
    assert result.returncode == 1, result.stdout  # the cluster needs attention
    output = [line.strip() for line in result.stdout.splitlines()]  # a failure's lines come indented
    for line in lines:
        assert line in output, result.stdout
    assert {name: (out / name).read_bytes() for name in before} == before
    # The picture is what helps now: written, the fault in red, and named.
    assert "color=red" in (out / "fabric.dot").read_text()
    assert f"the picture, faults in red: {out / 'fabric.svg'}" in result.stdout


def test_a_fourth_node_keeps_the_ring_addresses(make_sim, tmp_path):
    plan = tmp_path / "plan.yml"
    plan.write_text(yaml.safe_dump({
        "nodes": {f"mini-{i}": {"model": "mini-m4-pro"} for i in range(1, 5)},
        "cables": ["mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1", "mini-3:2 -- mini-1:2"],
    }))
    sim = make_sim(topology=str(plan), rdma="none")
    out = tmp_path / "out"
    three = inventory_with(sim, tmp_path / "three.yml", hosts=["mini-1", "mini-2", "mini-3"])
    assert hostfile_cmd(three, out).returncode == 0
    first = cable_networks(out)

    sim.cli("unplug", "mini-3:2")
    sim.cli("plug", "mini-3:2", "mini-4:1")
    sim.cli("plug", "mini-4:2", "mini-1:2")
    result = hostfile_cmd(sim.dir / "inventory.yml", out)
    assert result.returncode == 0, result.stdout
    second = cable_networks(out)
    for cable in ("mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1"):
        assert second[cable] == first[cable]
    assert "mini-1:2 -- mini-3:2" not in second and len(second) == 4


def test_the_fabric_comes_off_again(make_sim, tmp_path):
    sim = make_sim(nodes=2, topology="line")
    services = "networksetup -listnetworkserviceorder; ifconfig bridge0"
    before = {n: sim.ssh(n, services, own_config=True).stdout for n in sim.nodes}
    assert converge(sim.dir / "inventory.yml", tmp_path / "out").returncode == 0
    assert "(3) Thunderbolt 1" in sim.ssh("mini-1", services, own_config=True).stdout
    hostfiles = "ls /opt/mlx-fleet | grep -c hostfile || true"
    assert {n: sim.ssh(n, hostfiles, own_config=True).stdout for n in sim.nodes} == dict.fromkeys(sim.nodes, "2\n")
    undo = playbook("-i", str(sim.dir / "inventory.yml"), str(REPO / "playbooks/fabric_undo.yml"))
    assert undo.returncode == 0, undo.stdout
    assert {n: sim.ssh(n, services, own_config=True).stdout for n in sim.nodes} == before
    # No hostfile left naming the addresses the undo took away; the controller keeps its copy.
    assert {n: sim.ssh(n, hostfiles, own_config=True).stdout for n in sim.nodes} == dict.fromkeys(sim.nodes, "0\n")
    assert (tmp_path / "out" / "hostfile.json").exists()
    again = playbook("-i", str(sim.dir / "inventory.yml"), str(REPO / "playbooks/fabric_undo.yml"))
    assert again.returncode == 0 and set(changed_per_host(again).values()) == {0}, again.stdout

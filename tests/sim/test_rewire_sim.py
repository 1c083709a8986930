"""Cables moved on a converged cluster with no cable plan (issue 19): what moved is said once, the ports
follow the cables, the old ports are cleared, and no hostfile names an address its Mac does not have.

One 4-Mac cluster for the module (mini-1..3 a full mesh, mini-4 cabled to mini-1 and mini-3, so mini-2 has a
free port), converged once with site.yml; then, in order: a cable moved to mini-2's free port and one
`mlx-fleet converge`; two cables swapped in mini-2 and one `mlx-fleet hostfile`. After each: the hostfiles'
addresses read back on the Macs' ports, a ring all_sum over the written ring hostfile, and `audit` exits 0.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess

import pytest
import yaml

from simlib import BIN, MLX_FLEET, REPO, Sim, cable_networks, node_python

pytestmark = pytest.mark.sim

ENV_CACHE = "/var/tmp/mlx-fleet-env-cache"  # the warm download cache the env tests share
PLAN = {
    "nodes": {f"mini-{i}": {"model": "mini-m4-pro"} for i in range(1, 5)},
    "cables": ["mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1", "mini-3:2 -- mini-1:2",
               "mini-4:1 -- mini-1:3", "mini-4:2 -- mini-3:3"],
}


def run(argv: list[str], timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(env or os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd="/",
                          env=env)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    plan = tmp_path_factory.mktemp("plan") / "plan.yml"
    plan.write_text(yaml.safe_dump(PLAN))
    sim = Sim(topology=str(plan), rdma="none")
    try:
        first = run([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"), "-e",
                     f"mlx_env_cache_dir={ENV_CACHE}", str(REPO / "site.yml")])
        assert first.returncode == 0, first.stdout[-4000:]
        yield sim
    finally:
        sim.down()


def mlx_fleet(sim: Sim, command: str) -> subprocess.CompletedProcess:
    result = run([MLX_FLEET, command, "-i", str(sim.dir / "inventory.yml")])
    assert "Traceback" not in result.stderr, result.stderr
    return result


def move(sim: Sim, *cables: str) -> None:
    """Unplug the ends named first, then plug the cables as given ("a:1 -- b:3")."""
    for cable in cables:
        for end in cable.split(" -- "):
            if any(end in c.split(" -- ") for c in sim.state()["cables"]):
                sim.cli("unplug", end)
    for cable in cables:
        sim.cli("plug", *cable.split(" -- "))


def addresses_on_the_macs(sim: Sim) -> dict[str, set[str]]:
    """Every IPv4 address each Mac holds, read on the Mac (ifconfig)."""
    held = {}
    for node in sim.nodes:
        out = sim.ssh(node, "ifconfig", own_config=True).stdout
        held[node] = {line.split()[1] for line in out.splitlines() if line.strip().startswith("inet ")}
    return held


def check_the_hostfiles(sim: Sim) -> None:
    """No hostfile the controller published names an address missing from its Mac, and the ring one runs."""
    out = sim.dir / ".mlx-fleet"
    held = addresses_on_the_macs(sim)
    for name in ("hostfile.json", "hostfile-ring.json"):
        for host in json.loads((out / name).read_text())["hosts"]:
            missing = set(host["ips"]) - held[host["ssh"]]
            assert not missing, f"{name} names {missing} for {host['ssh']}, which holds {held[host['ssh']]}"
    python, script = node_python()
    done = run([str(BIN / "mlx.launch"), "--hostfile", str(out / "hostfile-ring.json"), "--backend", "ring", "--",
                python, script], timeout=120, env=sim.own_ssh_env())
    ranks = sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))
    assert ranks == [f"rank {r} of 4: all_sum=10 expected=10" for r in range(4)], done.stdout + done.stderr


def audit_is_clean(sim: Sim) -> None:
    result = mlx_fleet(sim, "audit")
    assert result.returncode == 0 and result.stdout.startswith("no drift: "), result.stdout


def test_a_cable_moved_to_a_free_port_needs_one_converge(cluster):
    old = ipaddress.ip_network(cable_networks(cluster.dir / ".mlx-fleet")["mini-1:1 -- mini-2:1"])
    move(cluster, "mini-1:1 -- mini-2:3")
    result = mlx_fleet(cluster, "converge")
    assert result.returncode == 0, result.stdout + result.stderr
    # The old port, configured by mlx-fleet and no longer cabled, holds no address of the old cable.
    held = addresses_on_the_macs(cluster)["mini-2"]
    assert not {a for a in held if ipaddress.ip_address(a) in old}, held
    check_the_hostfiles(cluster)
    audit_is_clean(cluster)
    assert "since the last converge: cable mini-1:1 -- mini-2:1 moved to mini-1:1 -- mini-2:3" in result.stdout


def test_two_cables_swapped_in_one_mac_and_hostfile(cluster):
    move(cluster, "mini-1:1 -- mini-2:2", "mini-2:3 -- mini-3:1")
    result = mlx_fleet(cluster, "hostfile")
    assert result.returncode == 0, result.stdout + result.stderr
    check_the_hostfiles(cluster)
    audit_is_clean(cluster)
    assert ("since the last converge: cables in mini-2 Thunderbolt 2 and 3 swapped: mini-1:1 -- mini-2:3 is now "
            "mini-1:1 -- mini-2:2, mini-2:2 -- mini-3:1 is now mini-2:3 -- mini-3:1") in result.stdout

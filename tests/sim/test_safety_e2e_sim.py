"""Safe on a real rack, end to end through `mlx-fleet converge` (site.yml), on one simulated 3-Mac mesh
whose mini-1 the controller reaches over its Thunderbolt Bridge (sim up --manage-over).

Reached that way, the run stops before any Mac changes, naming mini-1, bridge0 and the way out; the
same cluster with mini-1's ansible_host pointed at its Ethernet address converges. On that converged
cluster: the same Mac listed twice is bad input (exit 2); a Mac whose management link goes down is
named unreachable within 90 s while the others converge; a cable pulled between the fabric plan and
the network step rewrites no hostfile. Each test puts the cluster back as it found it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from simlib import CALLBACKS, ENV_CACHE, HOSTFILES, MLX_FLEET, Sim, digests, host_stats, listing, runner_events

pytestmark = pytest.mark.sim
FIX = "manage the Mac over Ethernet or Wi-Fi (its ansible_host)"


def converge(inventory: Path, env: dict | None = None, timeout: float = 300,
             command: tuple[str, ...] = ("converge", "-e", f"mlx_env_cache_dir={ENV_CACHE}")
             ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"} | (env or {})  # the packaged config
    return subprocess.run([MLX_FLEET, command[0], "-i", str(inventory), *command[1:]],
                          capture_output=True, text=True, env=env, timeout=timeout, cwd="/", stdin=subprocess.DEVNULL)


def ran_ok(result: subprocess.CompletedProcess) -> dict[str, set[str]]:
    """action -> the hosts it came through on, from the run's own events."""
    ok: dict[str, set[str]] = {}
    for data in runner_events(result, "runner_on_ok"):
        ok.setdefault(data.get("task_action", ""), set()).add(data.get("host", ""))
    return ok


def hostfiles_on_macs(sim: Sim, nodes: list[str]) -> dict[str, str]:
    return {node: sim.cli("exec", node, "--", "cat", *(f"/opt/mlx-fleet/{name}" for name in HOSTFILES[:2])).stdout
            for node in nodes}


class Cluster:
    """The module's cluster and its inventory over Ethernet (mini-1's ansible_host its en0 address)."""

    def __init__(self, sim: Sim):
        self.sim = sim
        data = yaml.safe_load((sim.dir / "inventory.yml").read_text())
        data["all"]["children"]["mlx_cluster"]["hosts"]["mini-1"]["ansible_host"] = (
            sim.profile("mini-1")["management"]["ip"])
        self.ethernet = sim.dir / "ethernet" / "inventory.yml"
        self.ethernet.parent.mkdir()
        self.ethernet.write_text(yaml.safe_dump(data, sort_keys=False))
        self.out = self.ethernet.parent / ".mlx-fleet"
        self._converged: subprocess.CompletedProcess | None = None

    def converged(self) -> subprocess.CompletedProcess:
        """The cluster converged over Ethernet, once for the module."""
        if self._converged is None:
            self._converged = converge(self.ethernet)
        assert self._converged.returncode == 0, self._converged.stdout + self._converged.stderr
        return self._converged


@pytest.fixture(scope="module")
def cluster():
    sim = Sim(nodes=3, topology="mesh", manage_over=["mini-1=bridge0"])
    try:
        yield Cluster(sim)
    finally:
        sim.down()


def test_a_mac_reached_over_its_thunderbolt_bridge_stops_the_run_before_any_change(cluster):
    sim = cluster.sim
    before = listing(sim)
    result = converge(sim.dir / "inventory.yml")
    assert result.returncode == 2, result.stdout + result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith(("error: ", "failed: "))] == [
        f"error: mini-1: managed over Thunderbolt Bridge (bridge0), which the fabric would turn off (mlx_fabric_bridge: "
        f"disabled); {FIX}, or keep the bridge with mlx_fabric_bridge: unchanged"], result.stdout
    assert listing(sim) == before, "a Mac changed before the run stopped"
    # Nothing on the controller either, but the run's own log and lock.
    assert sorted(p.name for p in (sim.dir / ".mlx-fleet").iterdir()) == ["run.lock", "runs"]

    # The same Macs and cables, mini-1 reached over Ethernet.
    over_ethernet = cluster.converged()
    assert over_ethernet.stdout.splitlines()[-1] == "result: ok"
    assert json.loads((cluster.out / "hostfile.json").read_text())["backend"] == "jaccl"
    # The bridges were on across the loop of cables and the run turned them off: no warning asks a person to;
    # the summary says what the run did.
    bridge_lines = [line for line in over_ethernet.stdout.splitlines() if "Thunderbolt Bridge" in line]
    assert len(bridge_lines) == 1 and bridge_lines[0].startswith("Thunderbolt Bridge: turned off on "), \
        over_ethernet.stdout


def test_the_same_mac_listed_twice_is_bad_input(cluster):
    sim = cluster.sim
    serial, own = sim.profile("mini-1")["serial"], sim.profile("mini-3")["serial"]
    before = listing(sim)
    sim.cli("set", "mini-3", f"serial={serial}")  # mini-3 answers as mini-1 would
    try:
        # converge (its preflight) and hostfile (no preflight: the fabric's own check) alike
        results = [converge(cluster.ethernet), converge(cluster.ethernet, command=("hostfile",))]
    finally:
        sim.cli("set", "mini-3", f"serial={own}")
    for result in results:
        assert result.returncode == 2, result.stdout + result.stderr
        assert [line for line in result.stdout.splitlines() if line.startswith(("error: ", "failed: "))] == [
            f"error: mini-1 and mini-3: the same Mac (serial number {serial}) is listed twice; keep one of them in "
            "mlx_cluster"], result.stdout
    assert listing(sim) == before


def test_a_mac_off_its_management_network_fails_alone_and_quickly(cluster):
    sim, out = cluster.sim, cluster.out
    cluster.converged()
    before, on_macs = digests(out), hostfiles_on_macs(sim, sim.nodes)
    for node in ("mini-1", "mini-2"):  # a setting drifted: their node step has work to do while mini-3 is off
        sim.cli("exec", node, "--", "pmset", "-a", "sleep", "10")
    sim.cli("link", "mini-3", "down")
    try:
        result = converge(cluster.ethernet, timeout=150)  # a bound so the test cannot hang
    finally:
        sim.cli("link", "mini-3", "up")
    assert result.returncode == 4, result.stdout + result.stderr
    unreachable = [line for line in result.stdout.splitlines() if line.startswith("unreachable: ")]
    assert len(unreachable) == 1 and unreachable[0].startswith("unreachable: mini-3: "), result.stdout
    assert result.stdout.splitlines()[-1] == "result: some Macs are unreachable (exit 4)"
    assert digests(out) == before
    assert hostfiles_on_macs(sim, sim.nodes) == on_macs
    # The others converged their own settings (put back), and their environment was planned against the lock and
    # matches it (nothing to install).
    ok = ran_ok(result)
    assert ok.get("mlx_fleet.cluster.macos_node") == {"mini-1", "mini-2"}, ok.get("mlx_fleet.cluster.macos_node")
    (plan,) = [data["res"] for data in runner_events(result, "runner_on_ok")
               if data.get("task_action") == "mlx_fleet.cluster.mlx_env_plan"]
    assert {host for host, planned in plan["hosts"].items() if planned["matches"]} == {"mini-1", "mini-2"}, plan
    summary = host_stats(result)
    assert summary["mini-3"]["unreachable"] == 1
    failed = {host: summary[host]["failures"] for host in ("mini-1", "mini-2") if summary[host]["failures"]}
    assert failed == {}, result.stdout
    # The fabric needs every Mac: it changes nothing and says why.
    assert ("the fabric changed nothing and the hostfiles stay as they were: mini-3 failed or did not answer earlier "
            "in this run; fix that and run again") in result.stdout, result.stdout


def test_a_cable_pulled_before_the_network_step_rewrites_no_hostfile(cluster):
    sim, out = cluster.sim, cluster.out
    cluster.converged()
    before, on_macs = digests(out), hostfiles_on_macs(sim, sim.nodes)
    # mini-1's end of the cable lost its address: the network step has work on mini-1 when the cable is pulled (on a
    # Mac where nothing differs the step does not run, and nothing is written from what it would have read).
    device = sim.device("mini-1", 1)
    address = re.search(r"\binet (\S+)", sim.cli("exec", "mini-1", "--", "ifconfig", device).stdout).group(1)
    sim.cli("exec", "mini-1", "--", "ifconfig", device, "inet", address, "-alias")
    pull = {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS), "ANSIBLE_CALLBACKS_ENABLED": "run_at_task",
            "MLX_FLEET_AT_TASK": "Give each cabled port its network",
            "MLX_FLEET_AT_TASK_RUN": shlex.join([MLX_FLEET, "sim", "unplug", "--dir", str(sim.dir), "mini-1:1"])}
    try:
        result = converge(cluster.ethernet, env=pull)
    finally:
        pulled = "mini-1:1 -- mini-2:1" not in sim.state()["cables"]
        if pulled:
            sim.cli("plug", "mini-1:1", "mini-2:1")
    assert pulled, "the cable was not pulled during the run"
    assert result.returncode == 1, result.stdout + result.stderr
    refusal = ("hostfiles not rewritten: the cabling changed while the ports were being configured (mini-1:1 -- "
               "mini-2:1 is gone); the last good hostfiles stay on the controller and the Macs: check the cables and "
               "run again")
    lines = result.stdout.splitlines()
    failures = [k for k, line in enumerate(lines) if line.startswith("failed: ")]
    # The cluster's step failed, not a Mac: no Mac is named, and the reason follows.
    assert len(failures) == 1 and re.fullmatch(r"failed: [^:]+:", lines[failures[0]]), result.stdout
    assert lines[failures[0] + 1] == "  " + refusal, result.stdout
    assert digests(out) == before
    assert hostfiles_on_macs(sim, sim.nodes) == on_macs

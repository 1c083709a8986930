"""site.yml's no-op converge at the floor (issue 27) on a 3-Mac mesh: a converged Mac costs one module run (the
preflight's read, which also compares what the node, environment and network steps compare); drift on one Mac
(a node setting, a cable port's address, the environment) is reported by --check on that Mac alone and repaired
there alone, by the step that owns it, and the next converge is back to one module run per Mac."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers
from simlib import BIN, changed_per_host, run_recorded, task_results

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]
# -vvv prints one line per command sent to a Mac; with pipelining, one per module run (as benchmarks/bench.py counts).
REMOTE_COMMAND = re.compile(r"^<([^>]+)> SSH: EXEC |^TASK \[(.*)\]", re.M)
NODE_STEP = "Keep the Mac awake"
ENV_READ = "Read the environment state"
NETWORK_STEP = "Give each cabled port its network"
ENV_INSTALL = "install the locked set offline"


def site(sim, out: Path, *args: str) -> subprocess.CompletedProcess:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    result = run_recorded([str(BIN / "ansible-playbook"), "-vvv", "-i", str(sim.dir / "inventory.yml"),
                           "-e", f"mlx_fleet_output_dir={out}", str(REPO / "site.yml"), *args],
                          env=env, timeout=900, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout[-4000:]
    return result


def module_runs(sim, result: subprocess.CompletedProcess) -> dict[str, list[str]]:
    """Per Mac, the tasks of the module runs the converge made on it."""
    hosts = sim.inventory["all"]["children"]["mlx_cluster"]["hosts"]
    address = {(variables or {}).get("ansible_host", name): name for name, variables in hosts.items()}
    runs, task = {node: [] for node in sim.nodes}, None
    for target, started in REMOTE_COMMAND.findall(result.stdout):
        if started:
            task = started
        else:
            runs.setdefault(address.get(target, target), []).append(task)
    return runs


def one_run_each(sim, result: subprocess.CompletedProcess) -> None:
    runs = module_runs(sim, result)
    assert {node: len(tasks) for node, tasks in runs.items()} == dict.fromkeys(sim.nodes, 1), runs


def in_run(result: subprocess.CompletedProcess, task: str) -> bool:
    """Whether the run started the task on any Mac (a play with no Mac to run on starts none of its tasks)."""
    return any(task in t["task"]["name"] for play in result.recorded["plays"] for t in play["tasks"])


def ran_on(result: subprocess.CompletedProcess, task: str) -> list[str]:
    """The Macs a task ran on (not skipped)."""
    if not in_run(result, task):
        return []
    return sorted(host for host, done in task_results(result.recorded, task).items() if not done.get("skipped"))


def a_cable_address(sim, node: str) -> tuple[str, str]:
    """(device, address) of one of NODE's cabled Thunderbolt ports, as its own tools show them."""
    run = lambda *argv: sim.cli("exec", node, "--", *argv).stdout  # noqa: E731
    devices = macos_parsers.thunderbolt_interfaces(macos_parsers.parse_hardware_ports(
        run("networksetup", "-listallhardwareports")))
    interfaces = macos_parsers.parse_ifconfig(run("ifconfig"))
    return next((device, inet["address"]) for device in devices.values()
                for inet in interfaces.get(device, {}).get("inet", []))


def test_a_converged_mac_costs_one_module_run_and_drift_is_repaired_on_its_mac(make_sim, tmp_path):
    sim = make_sim(nodes=3, topology="mesh", rdma="all")
    out = tmp_path / "out"
    site(sim, out)
    noop = site(sim, out)
    one_run_each(sim, noop)
    assert set(changed_per_host(noop).values()) == {0}
    for step in (NODE_STEP, ENV_READ, NETWORK_STEP):
        assert ran_on(noop, step) == [], step
    # Nothing to do: the node play has no Mac to run on, and the environment's install is skipped in one round.
    assert not in_run(noop, NODE_STEP) and not in_run(noop, ENV_INSTALL)

    settings, cabled, environment = sim.nodes
    exec_on = lambda node, *argv: sim.cli("exec", node, "--", *argv)  # noqa: E731
    exec_on(settings, "pmset", "-a", "sleep", "10")
    device, address = a_cable_address(sim, cabled)
    exec_on(cabled, "ifconfig", device, "inet", address, "-alias")
    exec_on(environment, "rm", "/opt/mlx-fleet/venv/mlx-fleet.fingerprint.json")
    drifted = {settings, cabled, environment}

    checked = site(sim, out, "--check", "--diff")
    assert {host for host, n in changed_per_host(checked).items() if n} == drifted, checked.stdout[-4000:]
    assert ran_on(checked, NODE_STEP) == [settings]
    assert ran_on(checked, NETWORK_STEP) == [cabled]

    repaired = site(sim, out)
    changed = changed_per_host(repaired)
    assert {host for host, n in changed.items() if n} == drifted, repaired.stdout[-4000:]
    assert changed[settings] == 1 and changed[cabled] == 1
    assert ran_on(repaired, NODE_STEP) == [settings] and ran_on(repaired, NETWORK_STEP) == [cabled]
    assert ran_on(repaired, ENV_INSTALL) == [environment]
    assert address in exec_on(cabled, "ifconfig", device).stdout
    assert re.search(r"^\s*sleep\s+0$", exec_on(settings, "pmset", "-g", "custom").stdout, re.M)

    again = site(sim, out)
    one_run_each(sim, again)
    assert set(changed_per_host(again).values()) == {0}


def test_a_role_run_without_the_preflight_reads_for_itself(make_sim, tmp_path):
    """playbooks/node.yml alone: the node step has no preflight read, so it reads, compares and writes itself."""
    sim = make_sim(nodes=1)
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    argv = [str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"), str(REPO / "playbooks" / "node.yml")]
    first = run_recorded(argv, env=env, timeout=600, stdin=subprocess.DEVNULL)
    assert first.returncode == 0 and ran_on(first, NODE_STEP) == sim.nodes, first.stdout[-4000:]
    again = run_recorded(argv, env=env, timeout=600, stdin=subprocess.DEVNULL)
    assert again.returncode == 0 and set(changed_per_host(again).values()) == {0}, again.stdout[-4000:]

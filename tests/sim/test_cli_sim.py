"""`mlx-fleet hostfile` as a person sees it: a summary at default verbosity, one line for a user error."""

from __future__ import annotations

import json

import pytest
import yaml
from simlib import Sim, changed_per_host, mlx_fleet, runner_events

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def cluster():
    sim = Sim(nodes=3)
    yield sim
    sim.down()


def test_check_and_diff_on_a_fresh_cluster_say_what_would_change(cluster):
    """First in this module: the cluster is still fresh (bridges on, nothing configured)."""
    result = mlx_fleet("converge", "-i", str(cluster.dir / "inventory.yml"), "--check", "--diff", timeout=600)
    out, progress = result.stdout, result.stderr.splitlines()
    # The differences, in the terminal, as ansible-playbook --diff prints them, under each Mac and step.
    for mac in cluster.nodes:
        assert f"{mac}: Keep the Mac awake, restarting after a power failure, named, with its GPU wired-memory " \
               "limit, no automatic macOS installs\n--- before: pmset -g custom\n+++ after: pmset -g custom\n" in out
        assert f"{mac}: Give each cabled port its network (persistent, through networksetup)\n" \
               "--- before: Thunderbolt Bridge (before)\n+++ after: Thunderbolt Bridge (after)\n@@ -1 +1 @@\n" \
               "-enabled: yes\n+enabled: no\n" in out
    assert "\033[" not in out  # no colour codes when the output is not a terminal
    lines = out.splitlines()
    # The bridges it would turn off (the fabric step's result) are said as such, not as warnings to act on.
    (bridges_off,) = {tuple(event["res"]["bridges_off"]) for event in runner_events(result, "runner_on_ok")
                      if event["res"].get("bridges_off")}
    assert bridges_off == tuple(cluster.nodes)
    (said,) = [line for line in lines if line.startswith("Thunderbolt Bridge: ")]
    assert ", ".join(bridges_off) in said
    assert not [line for line in lines if line.startswith("warning:") and "Thunderbolt Bridge" in line], out
    # Every Mac would change (the run's own events), and the summary ends with an ok that says --check.
    assert {host for host, changed in changed_per_host(result).items() if changed} == set(cluster.nodes)
    assert result.returncode == 0 and lines[-1].startswith("result: ok ") and "(--check:" in lines[-1].split()
    # Progress in a person's words: no role argument checks, controller steps said as such.
    assert not [line for line in progress if "Validating arguments" in line or "arg spec" in line]
    assert progress[0].startswith("[1] Validate hosts") and progress[0].endswith(": on the controller")
    assert not [line for line in progress if line.endswith("1/1 Macs")], progress
    assert all(cluster.ssh(mac, "networksetup -getnetworkserviceenabled 'Thunderbolt Bridge'").stdout.strip()
               == "Enabled" for mac in cluster.nodes)  # --check changed nothing


def test_hostfile_prints_backend_reason_and_paths(cluster):
    result = mlx_fleet("hostfile", "-i", str(cluster.dir / "inventory.yml"))
    out = result.stdout.splitlines()
    hostfile = cluster.dir / ".mlx-fleet" / "hostfile.json"
    model = json.loads((cluster.dir / ".mlx-fleet" / "cluster.json").read_text())
    assert model["backend"] == "jaccl" and model["reason"]  # the backend, and why, said as the model keeps them
    assert f"backend: {model['backend']} ({model['reason']})" in out
    assert any(line.startswith("hostfiles: ") and str(hostfile) in line for line in out)
    assert out[-1] == "result: ok"
    assert json.loads(hostfile.read_text())["backend"] == "jaccl"
    # The full Ansible output is kept with the run, not printed.
    (log_line,) = [line for line in out if line.startswith("full output: ")]
    assert "TASK [" in open(log_line.split()[2]).read()
    assert "TASK [" not in result.stdout


def test_wrong_inventory_path_is_one_line_and_exit_2(cluster):
    result = mlx_fleet("hostfile", "-i", str(cluster.dir / "no-such-inventory.yml"), check=False)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert str(cluster.dir / "no-such-inventory.yml") in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_limit_refused_where_every_mac_is_needed(cluster):
    result = mlx_fleet("hostfile", "-i", str(cluster.dir / "inventory.yml"), "--limit", "mini-1", check=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("mlx-fleet hostfile: ")
    assert "--limit" in result.stderr.split()


def test_unreachable_mac_is_named_and_exit_4(cluster):
    inventory = cluster.dir / "inventory-extra.yml"
    data = dict(cluster.inventory)
    hosts = dict(data["all"]["children"]["mlx_cluster"]["hosts"])
    # An address on the sim's own management network that no simulated Mac answers.
    silent = cluster.state()["nodes"]["mini-1"]["management_ip"].rsplit(".", 1)[0] + ".250"
    hosts["mini-9"] = {**hosts["mini-1"], "ansible_host": silent}
    data["all"]["children"]["mlx_cluster"]["hosts"] = hosts
    inventory.write_text(yaml.safe_dump(data))
    result = mlx_fleet("checklist", "-i", str(inventory), check=False)
    assert result.returncode == 4, result.stdout + result.stderr
    assert any(line.startswith("unreachable: mini-9: ") for line in result.stdout.splitlines())
    assert result.stdout.splitlines()[-1].startswith("result: ") and result.stdout.endswith("(exit 4)\n")

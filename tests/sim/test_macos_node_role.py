"""roles/macos_node (playbooks/node.yml) against a simulated cluster: settings applied, a second
run changes nothing, check mode touches nothing, and the wired limit survives a reboot."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from simlib import host_stats, run_recorded

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
PLAYBOOK = REPO / "tests" / "sim" / "playbooks" / "node_settings.yml"
LABEL = "org.mlx-fleet.wired-limit"
PLIST = f"/Library/LaunchDaemons/{LABEL}.plist"

# Per-group and per-host settings, as an inventory would give them.
NODE_VARS = """\
all:
  children:
    mlx_cluster:
      vars:
        macos_node_wired_limit_fraction: 0.85
        macos_node_power_extra_settings: {displaysleep: 0}
      hosts:
        mini-1:
          macos_node_computer_name: MLX mini 1
          macos_node_host_name: mini-1.lab.example
        mini-2:
          macos_node_wired_limit_mb: 40000
"""
EXPECTED_LIMIT = {"mini-1": 55705, "mini-2": 40000}  # 65536 MB * 0.85, and the host's own MB


def playbook(sim, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, dict[str, int]], float]:
    (sim.dir / "node-vars.yml").write_text(NODE_VARS)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"), "-i", str(sim.dir / "node-vars.yml"),
            str(PLAYBOOK), *args]
    start = time.monotonic()
    result = run_recorded(argv, env, cwd=REPO, timeout=600)
    elapsed = time.monotonic() - start
    assert result.returncode == 0, f"{' '.join(argv)}\n{result.stdout}\n{result.stderr}"
    return result, host_stats(result), elapsed


def ssh(sim, node: str, command: str, check: bool = True) -> subprocess.CompletedProcess:
    """ssh with this cluster's own ssh_config: other clusters on the machine may have the same node names."""
    result = subprocess.run(["ssh", "-F", str(sim.dir / "ssh_config"), "-o", "BatchMode=yes", node, command],
                            capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"ssh {node} {command!r} exited {result.returncode}: {result.stderr}")
    return result


def node_state(sim, node: str) -> str:
    """Everything the role could change on a node, as the node's own tools report it."""
    return ssh(sim, node, "pmset -g custom; for n in ComputerName LocalHostName HostName; do scutil --get $n 2>&1; done;"
                         " sysctl iogpu.wired_limit_mb; ls -l /Library/LaunchDaemons; launchctl list").stdout


def wired_limit(sim, node: str) -> int:
    return int(ssh(sim, node, "sysctl -n iogpu.wired_limit_mb").stdout)


def test_sim_has_the_mac_wheel_group(make_sim):
    sim = make_sim(nodes=1)
    out = ssh(sim, "mini-1", "python3 -c 'import grp; print(grp.getgrnam(\"wheel\").gr_gid)'").stdout
    assert out.strip() == "0"


def test_node_settings_converge_idempotently_and_survive_reboot(make_sim):
    sim = make_sim(nodes=2)
    times = {}

    # --check --diff on fresh nodes: reports what it would change, changes nothing.
    before = {node: node_state(sim, node) for node in sim.nodes}
    result, counts, times["check_fresh"] = playbook(sim, "--check", "--diff")
    assert all(c["changed"] > 0 and c["failures"] == 0 for c in counts.values()), counts
    assert "- sleep                1\n" in result.stdout and "+ sleep                0\n" in result.stdout  # pmset diff
    assert "+iogpu.wired_limit_mb: 55705" in result.stdout
    assert {node: node_state(sim, node) for node in sim.nodes} == before

    result, counts, times["converge"] = playbook(sim)
    assert all(c["changed"] > 0 and c["failures"] == 0 for c in counts.values()), counts
    for node in sim.nodes:
        custom = ssh(sim, node, "pmset -g custom").stdout
        for key, value in {"sleep": 0, "disksleep": 0, "womp": 1, "autorestart": 1, "displaysleep": 0}.items():
            assert re.search(rf"^ {key}\s+{value}$", custom, re.M), (node, key, custom)
        assert wired_limit(sim, node) == EXPECTED_LIMIT[node]
        plist = ssh(sim, node, f"stat -c '%a %u %g' {PLIST}; cat {PLIST}").stdout
        assert plist.startswith("644 0 0\n")
        assert f"<string>iogpu.wired_limit_mb={EXPECTED_LIMIT[node]}</string>" in plist
        assert "<string>/usr/sbin/sysctl</string>" in plist
        assert "state = " in ssh(sim, node, f"launchctl print system/{LABEL}").stdout
    names = ssh(sim, "mini-1", "scutil --get ComputerName; scutil --get LocalHostName; scutil --get HostName").stdout
    assert names == "MLX mini 1\nmini-1\nmini-1.lab.example\n"
    assert ssh(sim, "mini-2", "scutil --get ComputerName; scutil --get LocalHostName").stdout == "mini-2\nmini-2\n"
    assert ssh(sim, "mini-2", "scutil --get HostName", check=False).returncode == 1  # left alone: not set

    # A second run and a --check --diff run on the converged cluster change nothing.
    result, counts, times["rerun"] = playbook(sim)
    assert all(c["changed"] == 0 and c["failures"] == 0 for c in counts.values()), (counts, result.stdout)
    times["tasks_per_host"] = counts["mini-1"]["ok"]
    result, counts, _ = playbook(sim, "--check", "--diff")
    assert all(c["changed"] == 0 for c in counts.values()), (counts, result.stdout)

    # A plain `sysctl -w` is runtime only: after a reboot the LaunchDaemon's value is back.
    ssh(sim, "mini-2", "sudo sysctl -w iogpu.wired_limit_mb=12345")
    assert wired_limit(sim, "mini-2") == 12345
    for node in sim.nodes:
        sim.cli("reboot", node)
    deadline = time.time() + 10
    while any(wired_limit(sim, n) != EXPECTED_LIMIT[n] for n in sim.nodes) and time.time() < deadline:
        time.sleep(0.2)
    assert {n: wired_limit(sim, n) for n in sim.nodes} == EXPECTED_LIMIT
    assert re.search(r"^ sleep\s+0$", ssh(sim, "mini-1", "pmset -g custom").stdout, re.M)

    # Back to macOS's default: the daemon goes, the limit returns to 0, and that is idempotent too.
    off = ("-e", "macos_node_wired_limit_mb=0", "-e", "macos_node_wired_limit_fraction=0", "--limit", "mini-2")
    _, counts, _ = playbook(sim, *off)
    assert counts["mini-2"]["changed"] > 0
    assert wired_limit(sim, "mini-2") == 0
    assert ssh(sim, "mini-2", f"test -e {PLIST} || echo gone").stdout == "gone\n"
    assert ssh(sim, "mini-2", f"launchctl print system/{LABEL}", check=False).returncode == 113
    _, counts, _ = playbook(sim, *off)
    assert counts["mini-2"]["changed"] == 0
    print(f"\nmacos_node on 2 nodes: {times}")

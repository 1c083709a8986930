"""site.yml end to end on a fresh 3-Mac mesh: check mode touches nothing, a converge, then no change."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from simlib import BIN, STATE, changed_per_host, host_stats, run_recorded, task_results

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]
def site(sim, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    started = time.monotonic()
    result = run_recorded([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"),
                           "-e", f"mlx_fleet_output_dir={out}", str(REPO / "site.yml"), *args],
                          env=env, timeout=900, stdin=subprocess.DEVNULL)
    return result, time.monotonic() - started


def test_site_check_converge_and_no_change(make_sim, tmp_path):
    sim = make_sim(nodes=3, topology="mesh", rdma="all")
    out = tmp_path / "out"
    before = {n: sim.ssh(n, STATE, own_config=True).stdout for n in sim.nodes}

    checked, _ = site(sim, out, "--check", "--diff")
    assert checked.returncode == 0, checked.stdout[-4000:]
    assert {n: sim.ssh(n, STATE, own_config=True).stdout for n in sim.nodes} == before, "--check changed a Mac"
    assert not (out / "hostfile.json").exists()

    fresh, fresh_s = site(sim, out)
    assert fresh.returncode == 0, fresh.stdout[-4000:]
    again, again_s = site(sim, out)
    assert again.returncode == 0, again.stdout[-4000:]
    summary = host_stats(again)
    assert changed_per_host(again) == dict.fromkeys(summary, 0), again.stdout
    # A converged Mac's hostfiles are not sent again: the network step hashed them.
    push = task_results(again.recorded, "Put the hostfiles on every Mac whose copies differ")
    assert sorted(host for host, done in push.items() if done.get("skipped")) == sorted(sim.nodes), push
    diffed, _ = site(sim, out, "--check", "--diff")
    assert diffed.returncode == 0 and set(changed_per_host(diffed).values()) == {0}, diffed.stdout

    # A hostfile edited by hand on one Mac is put back there, and only there.
    sim.cli("exec", sim.nodes[1], "--", "sh", "-c", "echo '{}' > /opt/mlx-fleet/hostfile.json")
    repaired, _ = site(sim, out)
    assert repaired.returncode == 0, repaired.stdout[-4000:]
    assert {h: n for h, n in changed_per_host(repaired).items() if h in sim.nodes} == {
        n: int(n == sim.nodes[1]) for n in sim.nodes}, repaired.stdout
    assert sim.cli("exec", sim.nodes[1], "--", "cat", "/opt/mlx-fleet/hostfile.json").stdout == (
        out / "hostfile.json").read_text()
    print(f"\nsite.yml on 3 Macs: fresh converge {fresh_s:.1f}s, no-op re-run {again_s:.1f}s, "
          f"tasks per host in the no-op run: { {h: c['ok'] + c['skipped'] for h, c in summary.items()} }")

"""site.yml end to end on a fresh 3-Mac mesh: check mode touches nothing, a converge, then no change."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from simlib import BIN

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]
# What a run could change on a Mac, read through the Mac's own tools. Not ls's "total" lines: they count the
# blocks the files occupy, which the file system changes by itself after a write (a large file written by
# the last run, e.g. the store's uv, may get an extent block when its data is written back, ~30 s later).
STATE = ("ls -laR /opt /Library/LaunchDaemons /Library/Preferences/SystemConfiguration | grep -v '^total '; "
         "pmset -g custom; scutil --get ComputerName; networksetup -listnetworkserviceorder; ifconfig; "
         "sysctl iogpu.wired_limit_mb")


def site(sim, out: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    started = time.monotonic()
    result = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(sim.dir / "inventory.yml"),
                             "-e", f"mlx_fleet_output_dir={out}", str(REPO / "site.yml"), *args],
                            capture_output=True, text=True, env=env, timeout=900, stdin=subprocess.DEVNULL)
    return result, time.monotonic() - started


def recap(output: str) -> dict[str, dict[str, int]]:
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
            for m in re.finditer(r"^(\S+)\s+: (ok=.*)$", output, re.M)}


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
    summary = recap(again.stdout)
    assert {host: counts["changed"] for host, counts in summary.items()} == dict.fromkeys(summary, 0), again.stdout
    # A converged Mac's hostfiles are not sent again: the network step hashed them.
    push = again.stdout.split("Put the hostfiles on every Mac whose copies differ", 1)[1].split("\n\n", 1)[0]
    assert sorted(re.findall(r"^skipping: \[(\S+)\]$", push, re.M)) == sorted(sim.nodes), push
    diffed, _ = site(sim, out, "--check", "--diff")
    assert diffed.returncode == 0 and {c["changed"] for c in recap(diffed.stdout).values()} == {0}, diffed.stdout

    # A hostfile edited by hand on one Mac is put back there, and only there.
    sim.cli("exec", sim.nodes[1], "--", "sh", "-c", "echo '{}' > /opt/mlx-fleet/hostfile.json")
    repaired, _ = site(sim, out)
    assert repaired.returncode == 0, repaired.stdout[-4000:]
    assert {h: c["changed"] for h, c in recap(repaired.stdout).items() if h in sim.nodes} == {
        n: int(n == sim.nodes[1]) for n in sim.nodes}, repaired.stdout
    assert sim.cli("exec", sim.nodes[1], "--", "cat", "/opt/mlx-fleet/hostfile.json").stdout == (
        out / "hostfile.json").read_text()
    print(f"\nsite.yml on 3 Macs: fresh converge {fresh_s:.1f}s, no-op re-run {again_s:.1f}s, "
          f"tasks per host in the no-op run: { {h: c['ok'] + c['skipped'] for h, c in summary.items()} }")

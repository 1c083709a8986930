"""The backend auto picks, and the address pool, on simulated racks a new user has (issue 19, items 1, 5, 6).

auto never picks an RDMA backend over a Mac or a cable that cannot carry RDMA (a Thunderbolt 4 Mac in a
mesh, a Mac Studio cabled on the port beside Ethernet): it falls back to ring, says why, and the hostfile
it publishes runs an mlx.launch ring all_sum over addresses that are on their ports. A pool too small for
the cables is bad input before any Mac changes. With no pool set, a controller on 192.168.x still
converges, and the range chosen stays when the controller moves.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from simlib import BIN, MLX_FLEET, Sim, node_python
from test_audit_sim import ENV_CACHE
from test_safety_e2e_sim import listing

pytestmark = pytest.mark.sim


def mlx_fleet(*argv: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}  # the packaged config
    return subprocess.run([*prefix, MLX_FLEET, *argv], capture_output=True, text=True, env=env, timeout=600, cwd="/",
                          stdin=subprocess.DEVNULL)


def converge(inventory: Path, *extra: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return mlx_fleet("converge", "-i", str(inventory), "-e", f"mlx_env_cache_dir={ENV_CACHE}", *extra, prefix=prefix)


def lines(result: subprocess.CompletedProcess, *starts: str) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.startswith(starts)]


def plan_file(path: Path, nodes: dict[str, str], cables: list[str]) -> str:
    path.write_text(yaml.safe_dump({"nodes": {n: {"model": m} for n, m in nodes.items()}, "cables": cables}))
    return str(path)


def addresses_on(sim: Sim, node: str) -> set[str]:
    """The IPv4 addresses the Mac has, read through its own ifconfig at its console."""
    out = sim.cli("exec", node, "--", "ifconfig").stdout
    return {line.split()[1] for line in out.splitlines() if line.strip().startswith("inet ")}


def published_addresses_are_on_their_macs(sim: Sim, out: Path) -> None:
    for name in ("hostfile.json", "hostfile-ring.json"):
        if not (out / name).exists():
            continue
        for host in json.loads((out / name).read_text())["hosts"]:
            have = addresses_on(sim, host["ssh"])
            assert set(host["ips"]) <= have, f"{name}: {host['ssh']} lists {host['ips']}, the Mac has {sorted(have)}"


def ring_all_sum(hostfile: Path, n: int) -> None:
    python, script = node_python()
    done = subprocess.run([str(BIN / "mlx.launch"), "--hostfile", str(hostfile), "--backend", "ring", "--", python,
                           script], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd="/")
    total = n * (n + 1) // 2
    assert sorted(line for line in done.stdout.splitlines() if line.startswith("rank ")) == [
        f"rank {r} of {n}: all_sum={total} expected={total}" for r in range(n)], done.stdout + done.stderr


# Names no other test's cluster uses: mlx.launch reaches the Macs by a plain `ssh NAME`, which the first
# cluster up with that name answers.
MIXED = {"pro-1": "mini-m4-pro", "pro-2": "mini-m4-pro", "pro-3": "mini-m4-pro", "base-4": "mini-m4"}
MIXED_CABLES = ["pro-1:1 -- pro-2:1", "pro-1:2 -- pro-3:1", "pro-1:3 -- base-4:1", "pro-2:2 -- pro-3:2",
                "pro-2:3 -- base-4:2", "pro-3:3 -- base-4:3"]
STUDIOS = {"ultra-1": "studio-m3-ultra", "ultra-2": "studio-m3-ultra", "ultra-3": "studio-m3-ultra"}
# ultra-1's Thunderbolt 1 (beside Ethernet, where RDMA never comes up) carries the cable to ultra-2.
STUDIO_CABLES = ["ultra-1:1 -- ultra-2:2", "ultra-2:3 -- ultra-3:2", "ultra-3:3 -- ultra-1:2"]


@pytest.mark.parametrize(("nodes", "cables", "why"), [
    (MIXED, MIXED_CABLES, "but base-4 cannot do RDMA (a Thunderbolt 4 Mac)"),
    (STUDIOS, STUDIO_CABLES, "but ultra-1:1 -- ultra-2:2 cannot carry RDMA (ultra-1 Thunderbolt 1 is the Mac "
                             "Studio port beside Ethernet, where RDMA never comes up: move the cable to another port)"),
], ids=["thunderbolt-4-mac", "studio-port-1"])
def test_auto_falls_back_to_ring_where_rdma_cannot_run_and_the_hostfile_runs(make_sim, tmp_path, nodes, cables, why):
    sim = make_sim(topology=plan_file(tmp_path / "plan.yml", nodes, cables))
    # Every Mac has RDMA on and lists rdma_en* devices, the Thunderbolt 4 one too, as real ones do.
    assert all(sim.profile(n)["rdma_enabled"] for n in nodes)
    out = sim.dir / ".mlx-fleet"
    result = converge(sim.dir / "inventory.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    (backend,) = lines(result, "backend: ")
    ring = " -> ".join(sim.nodes)  # inventory order, which a mesh's ring follows
    assert backend == f"backend: ring (auto chose ring: the cables form a ring ({ring}) {why})", result.stdout
    (rdma_line,) = lines(result, "RDMA: ")
    assert "the cabling supports ring (no RDMA)" in rdma_line, result.stdout
    # No warning that the backend it chose will fail (a port beside Ethernet is still named, to move the cable).
    assert not [line for line in lines(result, "warning: ") if "JACCL" in line], result.stdout
    assert json.loads((out / "hostfile.json").read_text())["backend"] == "ring"
    published_addresses_are_on_their_macs(sim, out)
    ring_all_sum(out / "hostfile.json", len(nodes))

    # Asked for by name, jaccl on a Thunderbolt 4 Mac is refused with the Mac and the fix.
    if "base-4" in nodes:
        inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
        inventory["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_backend"] = "jaccl"
        (sim.dir / "jaccl.yml").write_text(yaml.safe_dump(inventory))
        refused = mlx_fleet("hostfile", "-i", str(sim.dir / "jaccl.yml"), "--output-dir", str(out))
        assert refused.returncode == 1, refused.stdout
        assert ("jaccl needs RDMA on every host: base-4 cannot do RDMA (a Thunderbolt 4 Mac): Mac mini "
                "(mini-m4) has Thunderbolt 4 ports, and RDMA over Thunderbolt needs Thunderbolt 5; use the ring "
                "backend for it (a Recovery visit cannot help); set mlx_fleet_backend: ring, or auto (it picks ring "
                "for such a Mac)") in [line.strip() for line in refused.stdout.splitlines()], refused.stdout
        assert json.loads((out / "hostfile.json").read_text())["backend"] == "ring"  # the last good one stays

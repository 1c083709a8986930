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
import subprocess
from pathlib import Path

import pytest
import yaml

from simlib import BIN, Sim, cable_networks, converge, lines, listing, mlx_fleet_packaged, node_python, plan_file

pytestmark = pytest.mark.sim


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
        refused = mlx_fleet_packaged("hostfile", "-i", str(sim.dir / "jaccl.yml"), "--output-dir", str(out))
        assert refused.returncode == 1, refused.stdout
        assert ("jaccl needs RDMA on every host: base-4 cannot do RDMA (a Thunderbolt 4 Mac): Mac mini "
                "(mini-m4) has Thunderbolt 4 ports, and RDMA over Thunderbolt needs Thunderbolt 5; use the ring "
                "backend for it (a Recovery visit cannot help); set mlx_fleet_backend: ring, or auto (it picks ring "
                "for such a Mac)") in [line.strip() for line in refused.stdout.splitlines()], refused.stdout
        assert json.loads((out / "hostfile.json").read_text())["backend"] == "ring"  # the last good one stays


def test_a_pool_too_small_for_the_cables_is_bad_input_before_any_mac_changes(make_sim):
    sim = make_sim(nodes=3, topology="mesh")  # three cables
    before = listing(sim)
    result = converge(sim.dir / "inventory.yml", "-e", "mlx_fleet_ip_pool=10.0.0.0/30")
    assert result.returncode == 2, result.stdout + result.stderr
    assert lines(result, "error: ", "failed: ") == [
        "error: mlx_fleet_ip_pool 10.0.0.0/30 holds 1 /30 networks for 3 cables; use a larger pool"], result.stdout
    assert listing(sim) == before, "a Mac changed before the pool was refused"
    assert not (sim.dir / ".mlx-fleet" / "cluster.json").exists()


class Controller:
    """A second controller on the cluster's management network, in its own network namespace, with an
    address in 192.168.1.0/24 (a home or lab LAN): no other test's controller sees that address."""

    def __init__(self, sim: Sim):
        index = sim.state()["index"]
        self.ns, self.veth = f"mfs{index}ctl", f"mfs{index}ctlv"
        steps = [["ip", "netns", "add", self.ns],
                 ["ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.ns],
                 ["ip", "link", "set", self.veth, "master", f"mfs{index}br", "up"],
                 ["ip", "-n", self.ns, "addr", "add", f"10.213.{index}.250/24", "dev", "eth0"],
                 ["ip", "-n", self.ns, "link", "set", "eth0", "up"],
                 ["ip", "-n", self.ns, "link", "set", "lo", "up"],
                 # A LAN interface of its own (a veth pair: this kernel has no dummy links).
                 ["ip", "-n", self.ns, "link", "add", "lan0", "type", "veth", "peer", "name", "lan1"],
                 ["ip", "-n", self.ns, "addr", "add", "192.168.1.77/24", "dev", "lan0"],
                 ["ip", "-n", self.ns, "link", "set", "lan0", "up"]]
        try:
            for step in steps:
                subprocess.run(step, check=True, capture_output=True)
        except subprocess.CalledProcessError:
            self.remove()
            raise

    @property
    def prefix(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.ns)

    def remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)


@pytest.fixture
def home_controller(make_sim):
    sim = make_sim(nodes=3, topology="mesh")
    controller = Controller(sim)
    try:
        yield sim, controller
    finally:
        controller.remove()


def test_no_pool_set_converges_from_a_192_168_controller_and_keeps_the_range_when_it_moves(home_controller):
    sim, controller = home_controller
    networks = subprocess.run([*controller.prefix, "ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    assert "192.168.1.77/24" in networks
    assert "mlx_fleet_ip_pool" not in (sim.dir / "inventory.yml").read_text()
    out = sim.dir / ".mlx-fleet"

    first = converge(sim.dir / "inventory.yml", prefix=controller.prefix)
    assert first.returncode == 0, first.stdout + first.stderr
    assert lines(first, "addresses: ") == [
        "addresses: mlx_fleet_ip_pool is not set: the cables' addresses come from 10.99.0.0/16, a private range "
        "neither this controller nor any Mac uses; cluster.json keeps it for the next runs"], first.stdout
    ledger = {"pool": json.loads((out / "cluster.json").read_text())["pool"], "cables": cable_networks(out)}
    assert ledger["pool"] == "10.99.0.0/16" and len(ledger["cables"]) == 3
    assert all(ipaddress.ip_network(n).subnet_of(ipaddress.ip_network("10.99.0.0/16")) for n in ledger["cables"].values())
    published_addresses_are_on_their_macs(sim, out)

    # The same cluster from the host's own namespace, which has no 192.168.1.x address (192.168.0.0/16 would
    # be free here): every cable keeps its /30, and no range is chosen again.
    second = converge(sim.dir / "inventory.yml")
    assert second.returncode == 0, second.stdout + second.stderr
    assert lines(second, "addresses: ") == [], second.stdout
    assert {"pool": json.loads((out / "cluster.json").read_text())["pool"], "cables": cable_networks(out)} == ledger
    published_addresses_are_on_their_macs(sim, out)

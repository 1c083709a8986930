"""mlx_fleet.fabric: cables, plan findings, backend, addresses and hostfiles, with the hostfiles
checked against what mlx.distributed_config's own code writes for the same cables."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from argparse import Namespace
from pathlib import Path

import pytest

from mlx._distributed_utils import config as mlx_config
from mlx._distributed_utils.common import Host
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import addresses as fabric_addresses
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import picture as fabric_picture
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import files
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import Why
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.against_plan import Rewiring
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge.fabric import build_fabric, write_outputs
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import read_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Port, hardware_port, port_name
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from mlx_fleet.sim.layout import generated_cables

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_parsers import parse_thunderbolt_json
from factories import Cluster, macos_fact

REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "macos"
MBP_CAPTURE = REFERENCE / "system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt"


# --- facts as thunderbolt_facts returns them ------------------------------------------------------


# --- mlx.distributed_config on the same cables ----------------------------------------------------


def without_rdma(fabric) -> tuple[str, ...]:
    """The Macs the backend's reason names as unable to carry RDMA."""
    return tuple(host for host, dummy in fabric.why.no_rdma)


def mlx_tb_hosts(facts):
    """ThunderboltHost/Port as mlx.distributed_config's extract_connectivity builds them."""
    tb_hosts = []
    for host, fact in facts.items():
        ports = [mlx_config.ThunderboltPort(p["device"], p["domain_uuid"],
                                            next((q["domain_uuid"] for q in p["peers"] if q["direct"]), None))
                 for p in fact["ports"]]
        tb_hosts.append(mlx_config.ThunderboltHost(host, sorted(ports, key=lambda x: x.iface)))
    index = {p.uuid: (i, j) for i, h in enumerate(tb_hosts) for j, p in enumerate(h.ports)}
    return tb_hosts, index


def mlx_hostfile(cluster, backend, monkeypatch, tmp_path):
    """Run mlx.distributed_config's prepare_tb_hostfile (backend None = its auto choice) with the
    SSH reads replaced by the cluster's facts; returns the hostfile it writes."""
    tb_hosts, index = mlx_tb_hosts(cluster.facts)
    monkeypatch.setattr(mlx_config, "extract_connectivity", lambda hosts, verbose: (tb_hosts, index))
    monkeypatch.setattr(mlx_config, "check_rdma", lambda hosts, verbose=False, strict=True: all(
        cluster.facts[h.ssh_hostname]["rdma_devices"] for h in hosts) or (strict and pytest.fail("no RDMA")))
    monkeypatch.setattr(mlx_config, "add_ips", lambda hosts, verbose=False: [
        h.ips.append(cluster.management[h.ssh_hostname]) for h in hosts])
    monkeypatch.setattr(mlx_config.IPConfigurator, "setup", lambda self, **kwargs: None)
    out = tmp_path / f"mlx-{backend}.json"
    args = Namespace(verbose=False, dot=False, backend=backend, env=[], auto_setup=False, output_hostfile=str(out))
    hosts = [Host(i, h, [], []) for i, h in enumerate(cluster.facts)]
    mlx_config.prepare_tb_hostfile(args, hosts, [mlx_config.SSHInfo(True, True)] * len(hosts))
    return json.loads(out.read_text())


def assert_same_up_to_ips(ours, theirs, fabric):
    assert ours["backend"] == theirs["backend"]
    assert [h["ssh"] for h in ours["hosts"]] == [h["ssh"] for h in theirs["hosts"]]
    assert [h["rdma"] for h in ours["hosts"]] == [h["rdma"] for h in theirs["hosts"]]
    assert ours["envs"] == theirs["envs"]
    if ours["backend"] != "ring":
        assert [h["ips"] for h in ours["hosts"]] == [h["ips"] for h in theirs["hosts"]]
        return
    assert [len(h["ips"]) for h in ours["hosts"]] == [len(h["ips"]) for h in theirs["hosts"]]
    # As in MLX, a ring host's addresses are its own on the cables to its left neighbour.
    for k, host in enumerate(ours["hosts"]):
        left = ours["hosts"][k - 1]["ssh"]
        mine = {c.address: c.peer.host for c in fabric.network[host["ssh"]]}
        assert all(mine[ip] == left for ip in host["ips"])


def check_against_mlx(cluster, monkeypatch, tmp_path, backend="auto"):
    fabric = cluster.fabric(backend=backend)
    assert fabric.ok, fabric.errors
    theirs = mlx_hostfile(cluster, None if backend == "auto" else backend, monkeypatch, tmp_path)
    assert_same_up_to_ips(fabric.hostfile.to_json(), theirs, fabric)
    assert_same_up_to_ips(fabric.ring_hostfile.to_json(), mlx_hostfile(cluster, "ring", monkeypatch, tmp_path), fabric)
    assert hostfile.Hostfile.from_json(fabric.hostfile.to_json()) == fabric.hostfile  # typed both ways alike
    return fabric


# --- equal to mlx.distributed_config --------------------------------------------------------------


@pytest.mark.parametrize(("model", "n"), [("mini-m4-pro", 2), ("mini-m4-pro", 3), ("mini-m4-pro", 4),
                                          ("studio-m3-ultra", 4)])
def test_full_mesh_is_jaccl_as_mlx_writes_it(model, n, monkeypatch, tmp_path):
    fabric = check_against_mlx(Cluster.of(model, n), monkeypatch, tmp_path)
    assert fabric.backend == "jaccl"
    assert (fabric.why.rule, fabric.why.backend) == ("mesh", "jaccl")
    assert [h.ssh for h in fabric.hostfile.hosts] == fabric.hosts  # rank = inventory order
    assert all(h.rdma[i] is None for i, h in enumerate(fabric.hostfile.hosts))
    assert len(fabric.links) == n * (n - 1) // 2
    assert fabric.warnings == []


def test_mesh_device_matrix_names_the_cables(monkeypatch, tmp_path):
    fabric = check_against_mlx(Cluster.of("mini-m4-pro", 3), monkeypatch, tmp_path)
    assert [str(link) for link in fabric.links] == ["mini-1:1 -- mini-2:1", "mini-1:2 -- mini-3:1",
                                                    "mini-2:2 -- mini-3:2"]
    assert [h.rdma for h in fabric.hostfile.hosts] == [
        [None, "rdma_en2", "rdma_en3"], ["rdma_en2", None, "rdma_en3"], ["rdma_en2", "rdma_en3", None]]
    assert fabric.hostfile.hosts[0].ips == ["10.0.0.11"]


@pytest.mark.parametrize(("model", "n"), [("mini-m4-pro", 4), ("mini-m4-pro", 5), ("mini-m4-pro", 8)])
def test_ring_is_jaccl_ring_as_mlx_writes_it(model, n, monkeypatch, tmp_path):
    fabric = check_against_mlx(Cluster.of(model, n, "ring"), monkeypatch, tmp_path)
    assert fabric.backend == "jaccl-ring"
    assert (fabric.why.rule, fabric.why.ring[:2], fabric.why.gap, fabric.why.unable) == (
        "ring-not-mesh", ("mini-1", "mini-2"), ("mini-1", "mini-3"), ())
    assert sorted(fabric.why.ring) == sorted(fabric.hosts)


@pytest.mark.parametrize("n", [4, 5, 8])
def test_ring_without_rdma_is_ring_as_mlx_writes_it(n, monkeypatch, tmp_path):
    cluster = Cluster.of("mini-m4-pro", n, "ring", no_rdma=["mini-2"])
    fabric = check_against_mlx(cluster, monkeypatch, tmp_path)
    assert fabric.backend == "ring"
    assert (fabric.why.rule, without_rdma(fabric)) == ("ring-no-rdma", ("mini-2",))
    assert fabric.hostfile == fabric.ring_hostfile
    several = Cluster.of("mini-m4-pro", n, "ring", no_rdma=["mini-1", "mini-2", "mini-3"]).fabric()
    assert (several.why.rule, without_rdma(several)) == ("ring-no-rdma", ("mini-1", "mini-2", "mini-3"))
    assert all(len(h.ips) == 1 and h.rdma == [] for h in fabric.hostfile.hosts)


def test_ring_ranks_follow_the_ring_as_mlx_does(monkeypatch, tmp_path):
    cluster = Cluster({f"m{i}": "mini-m4-pro" for i in range(1, 5)})
    for a, b in (("m1:1", "m3:1"), ("m3:2", "m2:1"), ("m2:2", "m4:1"), ("m4:2", "m1:2")):
        cluster.cable(a, b)
    fabric = check_against_mlx(cluster, monkeypatch, tmp_path)
    assert [h.ssh for h in fabric.hostfile.hosts] == ["m1", "m3", "m2", "m4"]


@pytest.mark.parametrize("backend", ["jaccl", "jaccl-ring", "ring"])
def test_requested_backend_as_mlx_writes_it(backend, monkeypatch, tmp_path):
    fabric = check_against_mlx(Cluster.of("studio-m3-ultra", 3), monkeypatch, tmp_path, backend)
    assert (fabric.backend, fabric.why) == (backend, Why("requested", backend))


def test_two_cables_between_a_pair_give_device_lists_as_mlx_does(monkeypatch, tmp_path):
    cluster = Cluster({"studio-1": "studio-m3-ultra", "studio-2": "studio-m3-ultra"})
    cluster.cable("studio-1:2", "studio-2:3").cable("studio-1:3", "studio-2:2")
    fabric = check_against_mlx(cluster, monkeypatch, tmp_path)
    assert [h.rdma for h in fabric.hostfile.hosts] == [[None, ["rdma_en3", "rdma_en4"]],
                                                             [["rdma_en4", "rdma_en3"], None]]
    assert [len(h.ips) for h in fabric.ring_hostfile.hosts] == [2, 2]


def test_hostfile_is_byte_for_byte_the_one_mlx_writes(monkeypatch, tmp_path):
    cluster = Cluster.of("studio-m3-ultra", 4)
    mlx_hostfile(cluster, None, monkeypatch, tmp_path)
    write_outputs(tmp_path / "ours", cluster.fabric())
    assert (tmp_path / "ours/hostfile.json").read_bytes() == (tmp_path / "mlx-None.json").read_bytes()


def test_one_doubled_pair_in_a_mesh_gives_single_devices_as_mlx_does(monkeypatch, tmp_path):
    cluster = Cluster.of("studio-m3-ultra", 3).cable("studio-1:5", "studio-2:5")
    fabric = check_against_mlx(cluster, monkeypatch, tmp_path)
    assert all(isinstance(d, str) for h in fabric.hostfile.hosts for d in h.rdma if d)


def test_real_capture_macbook_cabled_to_a_studio(monkeypatch, tmp_path):
    """The reference capture, read by the real parser and joined as thunderbolt_facts does."""
    text = MBP_CAPTURE.read_text().split("\n", 1)[1]
    devices = dict(MODELS["macbook-pro-m4-max"].thunderbolt_devices)
    ports = [dict(bus, hardware_port=f"Thunderbolt {bus['receptacle']}", device=devices[bus["receptacle"]],
                  rdma_device=f"rdma_{devices[bus['receptacle']]}", rdma_state=None)
             for bus in parse_thunderbolt_json(text)]
    macbook = {"ports": ports, "bridge": {"device": "bridge0", "active": False, "members": [],
                                          "service_enabled": False},
               "rdma_enabled": True, "rdma_devices": [p["rdma_device"] for p in ports]}

    alone = build_fabric({"macbook": macbook}, {"macbook": macos_fact("macbook-pro-m4-max")},
                         models={"macbook": "macbook-pro-m4-max"})
    assert alone.links == []
    assert [(f.kind, f.ports, f.expected, f.severity) for f in alone.cautions] == [
        ("outside", (Port("macbook", 1),), "a Mac of the inventory", "note")]
    assert alone.warnings == [alone.cautions[0].line]

    cluster = Cluster({"macbook": "macbook-pro-m4-max", "studio": "studio-m3-ultra"})
    cluster.facts["macbook"] = macbook
    studio_port = cluster.facts["studio"]["ports"][2]
    ports[0]["rdma_state"] = "PORT_ACTIVE"  # RDMA on at both ends of the cable
    studio_port.update(domain_uuid="28CA4C30-A263-4C55-B302-953416D0B209", connected=True, speed_gbps=80,
                       rdma_state="PORT_ACTIVE",
                       peers=[{"domain_uuid": ports[0]["domain_uuid"], "model": "Mac17,7", "name": "MacBook Pro",
                               "direct": True}])
    fabric = check_against_mlx(cluster, monkeypatch, tmp_path)
    assert [(str(link), link.speed_gbps) for link in fabric.links] == [("macbook:1 -- studio:3", 80)]
    assert [h.rdma for h in fabric.hostfile.hosts] == [[None, "rdma_en1"], ["rdma_en4", None]]


# --- the plan: wiring faults, exact messages ------------------------------------------------------


def ring_plan(cluster):
    return [str(link) for link in cluster.fabric().links]


def test_plan_matched_has_no_findings():
    cluster = Cluster.of("mini-m4-pro", 4, "ring")
    fabric = cluster.fabric(cables=ring_plan(cluster))
    assert (fabric.findings, fabric.errors) == ([], [])


def test_missing_cable():
    cluster = Cluster.of("mini-m4-pro", 4, "ring")
    plan = ring_plan(cluster)
    fabric = cluster.unplug("mini-2:2").unplug("mini-3:1").fabric(cables=plan)
    assert [(f.kind, f.cable, f.fault, f.gap) for f in fabric.findings] == [
        ("missing", parse_cable("mini-2:2 -- mini-3:1"), True, ("mini-2", "mini-3"))]
    # the plan's finding, then the backend's: no ring without that cable (each an error, one line each)
    assert fabric.findings[0].fix == "connect mini-2 Thunderbolt 2 to mini-3 Thunderbolt 1"
    assert [(f.kind, f.gap, f.fix) for f in fabric.model.findings if f.kind == "not-cabled"] == [
        ("not-cabled", ("mini-2", "mini-3"), "connect mini-2 Thunderbolt 2 to mini-3 Thunderbolt 1")]
    assert fabric.errors == [f.line for f in fabric.model.findings if f.fault]
    assert fabric.backend is None
    assert fabric.why == Why("none", None, 4)
    assert fabric.hostfile is None and fabric.ring_hostfile is None


def test_wrong_port_says_the_move():
    cluster = Cluster.of("studio-m3-ultra", 2)
    plan = ["studio-1:2 -- studio-2:4"]
    fabric = cluster.fabric(cables=plan)
    assert str(fabric.links[0]) == "studio-1:2 -- studio-2:2"
    (wrong,) = fabric.findings
    assert (wrong.cable, wrong.link) == tuple(cables(["studio-1:2 -- studio-2:4", "studio-1:2 -- studio-2:2"]))
    assert wrong.fix == f"move the cable in {port_name(Port('studio-2', 2))} to {hardware_port(4)}"
    assert fabric.errors == [wrong.line]
    assert fabric.findings[0].kind == "wrong-port" and fabric.hostfile is None


def test_wrong_port_at_both_ends():
    fabric = Cluster.of("studio-m3-ultra", 2).fabric(cables=["studio-1:3 -- studio-2:4"])
    (wrong,) = fabric.findings
    assert wrong.fix == (f"move the cable in {port_name(Port('studio-1', 2))} to {hardware_port(3)}, and its other end "
                         f"in {port_name(Port('studio-2', 2))} to {hardware_port(4)}")
    assert fabric.errors == [wrong.line]


def cables(texts: list[str]) -> list:
    return [parse_cable(text) for text in texts]


def said(findings) -> list[tuple]:
    """Each finding as data: its kind, the Macs it is about (its hosts, else those of its gap or its ports), its cable."""
    return [(f.kind, f.hosts or f.gap or tuple(dict.fromkeys(p.host for p in f.ports)), f.cable) for f in findings]


def faults(fabric) -> list[tuple]:
    """The findings that are errors (no hostfile), as data."""
    return said(f for f in fabric.model.findings if f.fault)


def gaps(fabric) -> list[tuple]:
    """Each pair of Macs the backend needs cabled, with its fix; every one an error."""
    assert all(f.kind == "not-cabled" and f.fault for f in fabric.model.findings)
    return [(f.gap, f.fix) for f in fabric.model.findings]


def connect(a: str, b: str) -> str:
    """The fix that names the two ports to cable ("mini-1:3", "mini-3:3")."""
    first, second = parse_cable(f"{a} -- {b}").a, parse_cable(f"{a} -- {b}").b
    return f"connect {port_name(first)} to {port_name(second)}"


def swapped_on_mini_2():
    """A ring of 4 whose two cables in mini-2 Thunderbolt 1 and 2 were swapped, and its cables before."""
    cluster = Cluster.of("mini-m4-pro", 4, "ring")
    before = ring_plan(cluster)
    cluster.unplug("mini-2:1").unplug("mini-2:2").cable("mini-1:1", "mini-2:2").cable("mini-2:1", "mini-3:1")
    assert {str(link) for link in cluster.fabric().links} == {
        "mini-1:1 -- mini-2:2", "mini-2:1 -- mini-3:1", "mini-1:2 -- mini-4:2", "mini-3:2 -- mini-4:1"}
    return cluster, before


def test_two_cables_swapped_on_one_mac_is_one_fix():
    cluster, plan = swapped_on_mini_2()
    fabric = cluster.fabric(cables=plan)
    # A finding per cable (the picture and the audit show each), the same fix in both: one error line.
    assert [(f.kind, f.cable, f.link) for f in fabric.findings] == [
        ("wrong-port", *cables(["mini-1:1 -- mini-2:1", "mini-1:1 -- mini-2:2"])),
        ("wrong-port", *cables(["mini-2:2 -- mini-3:1", "mini-2:1 -- mini-3:1"]))]
    assert {f.fix for f in fabric.findings} == {"swap the cables in mini-2 Thunderbolt 1 and 2"}
    assert fabric.errors == [fabric.findings[0].line]


def test_without_a_plan_the_last_cables_are_the_reference_for_what_moved():
    cluster, before = swapped_on_mini_2()
    ledger = fabric_addresses.assign_addresses(cables(before), "10.0.0.0/24")
    fabric = cluster.fabric(previous=ledger)
    assert fabric.ok and fabric.findings == []
    assert fabric.rewired == Rewiring([], [("mini-2", 1, 2, (tuple(cables(["mini-1:1 -- mini-2:1", "mini-1:1 -- mini-2:2"])),
                                                        tuple(cables(["mini-2:2 -- mini-3:1", "mini-2:1 -- mini-3:1"]))))],
                                      [], [])

    moved = Cluster.of("mini-m4-pro", 3, "mesh")
    ledger = fabric_addresses.assign_addresses(cables(ring_plan(moved)), "10.0.0.0/24")
    moved.unplug("mini-2:1").cable("mini-1:1", "mini-2:3")
    assert moved.fabric(previous=ledger).rewired == Rewiring(
        [tuple(cables(["mini-1:1 -- mini-2:1", "mini-1:1 -- mini-2:3"]))], [], [], [])
    moved.unplug("mini-1:1").unplug("mini-2:3")
    assert moved.fabric(previous=ledger).rewired == Rewiring([], [], cables(["mini-1:1 -- mini-2:1"]), [])
    # No ledger (the first converge), or nothing changed: nothing to say.
    assert (moved.fabric().rewired, moved.fabric().changes) == (None, [])
    assert Cluster.of("mini-m4-pro", 3, "mesh").fabric(previous=ledger).rewired == Rewiring([], [], [], [])


def test_a_move_that_is_no_swap_stays_a_move():
    """Two cables each moved on studio-2, but not into each other's port: two moves, each said."""
    cluster = Cluster.of("studio-m3-ultra", 4, "ring")
    before = ring_plan(cluster)
    cluster.unplug("studio-1:2").unplug("studio-2:2").unplug("studio-2:3").unplug("studio-3:2")
    cluster.cable("studio-1:2", "studio-2:4").cable("studio-2:5", "studio-3:2")
    rewired = cluster.fabric(previous=fabric_addresses.assign_addresses(cables(before), "10.0.0.0/24")).rewired
    assert rewired == Rewiring([tuple(cables(["studio-1:2 -- studio-2:2", "studio-1:2 -- studio-2:4"])),
                                tuple(cables(["studio-2:3 -- studio-3:2", "studio-2:5 -- studio-3:2"]))], [], [], [])


def test_cable_to_a_port_not_in_the_plan():
    cluster = Cluster.of("mini-m4-pro", 3, "line")
    plan = ring_plan(cluster)
    cluster.cable("mini-1:2", "mini-3:2")
    fabric = cluster.fabric(cables=plan)
    assert [(f.kind, f.cable, f.link, f.expected) for f in fabric.findings] == [
        ("extra", parse_cable("mini-1:2 -- mini-3:2"), parse_cable("mini-1:2 -- mini-3:2"), "no cable")]
    assert fabric.errors == [fabric.findings[0].line]
    assert fabric.hostfile is None


def test_slow_cable_between_thunderbolt_5_macs_is_a_fault():
    cluster = Cluster({"mini-1": "mini-m4-pro", "mini-2": "mini-m4-pro"}).cable("mini-1:1", "mini-2:1", speed=40)
    fabric = cluster.fabric(cables=["mini-1:1 -- mini-2:1"])
    assert [(f.kind, f.fault, f.cable, f.expected) for f in fabric.findings] == [
        ("slow-cable", True, parse_cable("mini-1:1 -- mini-2:1"), "80 Gb/s")]
    assert fabric.errors == [fabric.findings[0].line]


def test_thunderbolt_4_mac_is_slow_but_not_a_fault_and_auto_never_gives_it_jaccl():
    cluster = Cluster({"mini-1": "mini-m4-pro", "mini-2": "mini-m4"}).cable("mini-1:1", "mini-2:1")
    # A Thunderbolt 4 Mac lists rdma devices and its port is PORT_ACTIVE, as a real one does.
    assert cluster.facts["mini-2"]["ports"][0]["rdma_state"] == "PORT_ACTIVE"
    fabric = cluster.fabric(cables=["mini-1:1 -- mini-2:1"])
    assert [(f.kind, f.cable, f.expected, f.fault) for f in fabric.findings] == [
        ("thunderbolt-4-cable", parse_cable("mini-1:1 -- mini-2:1"), "40 Gb/s", False)]
    assert fabric.errors == [] and fabric.warnings == [] and fabric.backend == "ring"
    assert (fabric.why.rule, fabric.why.ring, without_rdma(fabric)) == ("ring-no-rdma", ("mini-1", "mini-2"), ("mini-2",))
    assert fabric.links[0].speed_gbps == 40
    # Asked for by name, jaccl is refused, naming the Mac and the fix.
    jaccl = cluster.fabric(backend="jaccl")
    assert faults(jaccl) == [("no-rdma", ("mini-2",), None)]
    assert jaccl.errors == [f.line for f in jaccl.model.findings if f.fault]
    assert said(jaccl.cautions) == [("thunderbolt-4", ("mini-1", "mini-2"), parse_cable("mini-1:1 -- mini-2:1"))]
    assert jaccl.cautions[0].found.startswith("40 Gb/s ")


def test_a_thunderbolt_4_link_between_thunderbolt_5_macs_is_no_rdma_link_for_auto():
    cluster = Cluster.of("mini-m4-pro", 3, "ring")
    slow = str(cluster.fabric().links[0])
    cluster.cable(*slow.split(" -- "), speed=40)
    fabric = cluster.fabric()
    assert fabric.backend == "ring"
    assert (fabric.why.rule, without_rdma(fabric), [c for c, dummy in fabric.why.unable]) == (
        "ring-no-rdma", (), [parse_cable(slow)])


def test_mac_behind_a_dock():
    cluster = Cluster.of("mini-m4-pro", 3, "line").dock("mini-1:2", "mini-3:2")
    fabric = cluster.fabric(cables=["mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1", "mini-1:2 -- mini-3:2"])
    assert [(f.kind, f.ports, f.gap, f.note) for f in fabric.cautions] == [
        ("dock", (Port("mini-1", 2),), ("mini-1", "mini-3"), "via TS4"),
        ("dock", (Port("mini-3", 2),), ("mini-1", "mini-3"), "via TS4")]
    assert faults(fabric) == [("missing", ("mini-1", "mini-3"), parse_cable("mini-1:2 -- mini-3:2")),
                              ("not-cabled", ("mini-1", "mini-3"), None)]
    assert {f.fix for f in fabric.model.findings if f.fault} == {connect("mini-1:2", "mini-3:2")}
    assert len(fabric.links) == 2


def test_bad_plan_is_an_error_not_a_crash():
    fabric = Cluster.of("mini-m4-pro", 2).fabric(cables=["mini-1:4 -- mini-2:1"])
    (plan,) = fabric.model.findings
    assert (plan.kind, plan.fault, fabric.errors) == ("plan", True, [plan.found]) and plan.found.endswith(", not 4")


# --- the backend's topology: each missing pair and the ports to connect ---------------------------


def test_jaccl_on_a_ring_names_each_missing_pair():
    fabric = Cluster.of("mini-m4-pro", 4, "ring").fabric(backend="jaccl")
    assert fabric.backend is None
    assert fabric.why == Why("cannot-run", "jaccl")
    # Every mini's three ports: two are in the ring, one is free.
    assert gaps(fabric) == [(("mini-1", "mini-3"), connect("mini-1:3", "mini-3:3")),
                            (("mini-2", "mini-4"), connect("mini-2:3", "mini-4:3"))]
    assert {f.expected for f in fabric.model.findings} == {"jaccl needs a full mesh"}


def test_jaccl_needs_rdma_everywhere():
    fabric = Cluster.of("mini-m4-pro", 2, no_rdma=["mini-2"]).fabric(backend="jaccl")
    assert faults(fabric) == [("no-rdma", ("mini-2",), None)]
    assert "rdma_ctl enable" in fabric.model.findings[0].found and fabric.errors == [fabric.model.findings[0].line]


def test_ring_on_a_line_names_the_closing_cable():
    fabric = Cluster.of("mini-m4-pro", 5, "line").fabric(backend="ring")
    assert gaps(fabric) == [(("mini-1", "mini-5"), connect("mini-1:2", "mini-5:2"))]


def test_studio_suggestions_avoid_port_1_for_rdma():
    fabric = Cluster.of("studio-m3-ultra", 3, "line").fabric(backend="jaccl-ring")
    assert gaps(fabric) == [(("studio-1", "studio-3"), connect("studio-1:3", "studio-3:3"))]


def test_no_free_port_is_said():
    cluster = Cluster.of("mini-m4-pro", 4, "line").cable("mini-1:2", "mini-3:3").cable("mini-1:3", "mini-2:3")
    fabric = cluster.fabric(backend="ring")
    ((gap, fix),) = gaps(fabric)
    assert gap == ("mini-1", "mini-4") and fix.endswith(f"to {port_name(Port('mini-4', 2))}") and "no free" in fix


def test_auto_with_nothing_cabled():
    fabric = Cluster.of("mini-m4-pro", 3, "line").unplug("mini-1:1").unplug("mini-2:1").fabric()
    assert fabric.why == Why("none", None, 3)
    assert gaps(fabric) == [(("mini-1", "mini-2"), connect("mini-1:1", "mini-2:1")),
                            (("mini-1", "mini-3"), connect("mini-1:2", "mini-3:2"))]


def test_unknown_backend():
    (refused,) = Cluster.of("mini-m4-pro", 2).fabric(backend="mpi").model.findings
    assert refused.kind == "backend" and refused.found.startswith("mlx_fleet_backend: 'mpi' ")


def test_one_host_is_no_fabric():
    fabric = Cluster.of("mini-m4-pro", 1).fabric()
    assert [f.kind for f in fabric.model.findings] == ["backend"] and fabric.backend is None and not fabric.ok


# --- warnings -------------------------------------------------------------------------------------


def test_studio_port_1_on_an_rdma_link():
    cluster = Cluster({"studio-1": "studio-m3-ultra", "studio-2": "studio-m3-ultra"})
    fabric = cluster.cable("studio-1:1", "studio-2:2").fabric()
    assert fabric.backend == "ring" and fabric.ok and fabric.warnings == []
    assert (fabric.why.rule, fabric.why.ring, [c for c, dummy in fabric.why.unable]) == (
        "ring-no-rdma", ("studio-1", "studio-2"), [parse_cable("studio-1:1 -- studio-2:2")])
    fabric = cluster.fabric(backend="jaccl")
    assert fabric.backend == "jaccl" and fabric.ok
    assert [(f.kind, f.ports, f.cable, f.severity) for f in fabric.cautions] == [
        ("dead-rdma-port", (Port("studio-1", 1),), parse_cable("studio-1:1 -- studio-2:2"), "warning")]
    assert cluster.fabric(backend="ring").warnings == []


def test_active_bridge_across_a_loop():
    ring = Cluster.of("mini-m4-pro", 3, "ring", bridge=True).fabric()
    assert said(ring.cautions) == [("bridge-loop", (f"mini-{i}",), None) for i in (1, 2, 3)]
    assert ring.warnings == [f.line for f in ring.cautions]
    assert Cluster.of("mini-m4-pro", 3, "line", bridge=True).fabric(backend="ring").warnings == []


# --- addresses ------------------------------------------------------------------------------------


def test_addresses_follow_the_rule():
    fabric = Cluster.of("mini-m4-pro", 2).fabric()
    cable = parse_cable("mini-1:1 -- mini-2:1")
    slot = fabric_addresses.preferred_slot(cable, 2 ** 14)
    assert fabric.addresses == {cable: f"192.168.{slot // 64}.{slot % 64 * 4}/30"}
    low, high = fabric.network["mini-1"][0], fabric.network["mini-2"][0]
    assert (low.address, low.peer_address) == (high.peer_address, high.address)
    assert low == fabric_addresses.PortConfig(Port("mini-1", 1), "en2", f"192.168.{slot // 64}.{slot % 64 * 4 + 1}", 30,
                                              Port("mini-2", 1), f"192.168.{slot // 64}.{slot % 64 * 4 + 2}")
    assert low.hardware_port == "Thunderbolt 1"


def test_addresses_same_across_runs_and_inventory_order():
    cluster = Cluster.of("mini-m4-pro", 4)
    first = cluster.fabric().addresses
    reordered = dict(reversed(list(cluster.facts.items())))
    assert build_fabric(reordered, cluster.macos, models=cluster.models).addresses == first == cluster.fabric().addresses
    assert len(set(first.values())) == 6


def test_fourth_node_keeps_the_ring_addresses():
    three = Cluster.of("mini-m4-pro", 3, "ring")
    before = three.fabric().addresses
    four = Cluster.of("mini-m4-pro", 4, "ring")  # mini-3 -- mini-1 becomes mini-3 -- mini-4 -- mini-1
    after = four.fabric(previous=before).addresses
    kept = before.keys() & after.keys()
    assert kept == set(cables(["mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1"]))
    assert {c: after[c] for c in kept} == {c: before[c] for c in kept}
    assert four.fabric(previous=before).ok


def test_changing_one_cable_moves_no_other():
    cluster = Cluster.of("studio-m3-ultra", 4)
    before = cluster.fabric().addresses
    cluster.unplug("studio-1:2").unplug("studio-2:2").cable("studio-1:6", "studio-2:6")
    after = cluster.fabric(previous=before).addresses
    assert set(before) - set(after) == {parse_cable("studio-1:2 -- studio-2:2")}
    assert set(after) - set(before) == {parse_cable("studio-1:6 -- studio-2:6")}
    assert all(after[c] == before[c] for c in before.keys() & after.keys())


def test_taken_slot_probes_forward_and_previous_wins():
    pool = "10.9.0.0/28"  # four slots
    newcomer, holding = cables(["x:1 -- y:1", "a:1 -- b:1"])
    slot = fabric_addresses.preferred_slot(newcomer, 4)
    holder = {holding: f"10.9.0.{4 * slot}/30"}  # already holds the newcomer's slot
    grown = fabric_addresses.assign_addresses([holding, newcomer], pool, holder)
    assert grown == {**holder, newcomer: f"10.9.0.{4 * ((slot + 1) % 4)}/30"}
    full = fabric_addresses.assign_addresses([holding, *cables(["a:2 -- c:1", "b:2 -- c:2"]), newcomer], pool, holder)
    assert set(full.values()) == {f"10.9.0.{4 * k}/30" for k in range(4)}


def test_previous_outside_the_pool_is_dropped_and_a_full_pool_is_an_error():
    cable = parse_cable("a:1 -- b:1")
    assert fabric_addresses.assign_addresses([cable], "10.9.0.0/24", {cable: "192.168.0.4/30"}) == {
        cable: f"10.9.0.{4 * fabric_addresses.preferred_slot(cable, 64)}/30"}
    with pytest.raises(ValueError, match=r"^mlx_fleet_ip_pool 10.9.0.0/30 holds 1 /30 networks for 2 cables; "
                                         "use a larger pool$"):
        fabric_addresses.assign_addresses([cable, parse_cable("a:2 -- c:1")], "10.9.0.0/30")
    fabric = Cluster.of("mini-m4-pro", 3).fabric(ip_pool="10.9.0.0/30")
    assert fabric.errors == ["mlx_fleet_ip_pool 10.9.0.0/30 holds 1 /30 networks for 3 cables; use a larger pool"]


# --- files ----------------------------------------------------------------------------------------


def test_write_outputs(tmp_path):
    fabric = Cluster.of("mini-m4-pro", 3).fabric(envs=["MLX_LOG=1"])
    written = write_outputs(tmp_path, fabric)
    assert sorted(p.name for p in written.paths) == ["cluster.json", "fabric.dot", "fabric.svg",
                                                     "hostfile-ring.json", "hostfile.json"]
    assert written.skipped == []
    assert json.loads((tmp_path / "hostfile.json").read_text()) == fabric.hostfile.to_json()
    assert fabric.hostfile.envs == ["MLX_LOG=1"]
    assert json.loads((tmp_path / "hostfile-ring.json").read_text())["backend"] == "ring"
    assert read_model(tmp_path).addresses() == fabric.addresses
    assert (tmp_path / "fabric.svg").read_text().lstrip().startswith("<?xml")
    assert oct((tmp_path / "hostfile.json").stat().st_mode & 0o777) == "0o644"
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in written.paths)  # no temporary left


def test_rewriting_the_same_fabric_changes_no_file(tmp_path):
    fabric = Cluster.of("mini-m4-pro", 3).fabric()
    assert write_outputs(tmp_path, fabric).changed
    stamps = {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()}
    again = write_outputs(tmp_path, fabric)
    assert not again.changed and len(again.paths) == 5
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.iterdir()} == stamps


def test_a_fabric_without_a_ring_removes_the_ring_hostfile(tmp_path):
    fabric = Cluster.of("mini-m4-pro", 3).fabric()
    write_outputs(tmp_path, fabric)
    assert (tmp_path / "hostfile-ring.json").exists()
    written = write_outputs(tmp_path, dataclasses.replace(fabric, ring_hostfile=None))
    assert written.changed and not (tmp_path / "hostfile-ring.json").exists()
    assert "hostfile-ring.json" not in [p.name for p in written.paths]


def test_an_invalid_fabric_writes_only_the_picture(tmp_path):
    fabric = Cluster.of("mini-m4-pro", 3, "line").fabric(backend="jaccl")
    written = write_outputs(tmp_path, fabric)
    assert sorted(os.listdir(tmp_path)) == ["fabric.dot", "fabric.svg"]
    assert '"mini-1" -- "mini-3" [label="needed", style=dashed, color=red, fontcolor=red];' in fabric.dot
    assert not written.changed and written.paths[-1].name == "fabric.svg"


def test_a_failed_run_leaves_the_last_good_hostfile(tmp_path):
    cluster = Cluster.of("mini-m4-pro", 3, "ring")
    plan = ring_plan(cluster)
    write_outputs(tmp_path, cluster.fabric(cables=plan))
    good = {name: (tmp_path / name).read_text()
            for name in ("hostfile.json", "hostfile-ring.json", "cluster.json")}
    broken = cluster.unplug("mini-1:1").unplug("mini-2:1").fabric(cables=plan)
    written = write_outputs(tmp_path, broken)
    assert written.skipped == ["hostfile.json, hostfile-ring.json, cluster.json: left as they were "
                               "(2 errors)"]
    assert {name: (tmp_path / name).read_text() for name in good} == good
    assert "color=red" in (tmp_path / "fabric.dot").read_text()


def test_svg_skipped_without_dot(tmp_path, monkeypatch):
    monkeypatch.setattr(fabric_picture.shutil, "which", lambda name: None)
    written = write_outputs(tmp_path, Cluster.of("mini-m4-pro", 2).fabric())
    assert written.skipped == ["fabric.svg: skipped, Graphviz 'dot' is not installed"]
    assert (tmp_path / "fabric.dot").exists() and not (tmp_path / "fabric.svg").exists()


def test_atomic_write_json_keeps_the_old_file_when_validation_fails(tmp_path):
    path = tmp_path / "hostfile.json"
    files.atomic_write_json(path, {"old": True})
    with pytest.raises(ValueError, match="hostfile: backend must be jaccl, jaccl-ring or ring"):
        files.atomic_write_json(path, {"backend": "mpi"}, hostfile.Hostfile.from_json)
    assert json.loads(path.read_text()) == {"old": True}
    assert os.listdir(tmp_path) == ["hostfile.json"]


def test_dot_draws_problems_in_red():
    cluster = Cluster.of("mini-m4-pro", 3, "line").cable("mini-1:2", "mini-3:3", speed=40)
    fabric = cluster.fabric(cables=["mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1", "mini-1:3 -- mini-3:2"])
    lines = fabric.dot.splitlines()
    assert lines[0] == "graph fabric {"
    ok = next(line for line in lines if "taillabel=\"TB1 en2\", headlabel=\"TB1 en2\"" in line)
    assert '"mini-1" -- "mini-2"' in ok and "80 Gb/s" in ok and "red" not in ok
    wrong = next(line for line in lines if "TB2 en3" in line and "TB3 en4" in line)
    assert "40 Gb/s" in wrong and "wrong port" in wrong and "color=red" in wrong


def test_hostfiles_are_written_only_where_the_macs_copies_differ():
    texts = {"hostfile.json": '{"backend": "jaccl"}', "hostfile-ring.json": None}
    same = hashlib.sha256(b'{"backend": "jaccl"}').hexdigest()
    reported = {
        "studio-1": {"hostfile.json": same, "hostfile-ring.json": None},       # already the built ones
        "studio-2": {"hostfile.json": same, "hostfile-ring.json": "stale"},    # a ring hostfile to remove
        "studio-3": {"hostfile.json": "edited by hand", "hostfile-ring.json": None},
        "studio-4": {"hostfile.json": None, "hostfile-ring.json": None},       # never written
        "studio-5": None,                                                     # reported nothing
    }
    assert hostfile.macs_to_write(texts, reported) == ["studio-2", "studio-3", "studio-4", "studio-5"]


def test_a_hold_is_written_where_its_mark_differs_and_released_where_one_is_left():
    texts = {"hostfile.json": '{"backend": "jaccl"}', "hostfile-ring.json": None}
    same = hashlib.sha256(b'{"backend": "jaccl"}').hexdigest()
    line = "held: os-update in progress"
    marked = hashlib.sha256((line + "\n").encode()).hexdigest()
    reported = {
        "studio-1": {"hostfile.json": same, "hostfile-ring.json": None, "hostfile.held": None},
        "studio-2": {"hostfile.json": same, "hostfile-ring.json": None, "hostfile.held": marked},
        "studio-3": {"hostfile.json": "old", "hostfile-ring.json": None, "hostfile.held": marked},
    }
    # Held: only the mark counts (the hostfiles stay as they are); released: a mark left is a difference.
    assert hostfile.macs_to_write(texts, reported, line) == ["studio-1"]
    assert hostfile.macs_to_write(texts, reported, "") == ["studio-2", "studio-3"]


def test_auto_follows_the_rdma_line_on_a_mesh_with_a_thunderbolt_4_mac():
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma

    cluster = Cluster({"mini-1": "mini-m4-pro", "mini-2": "mini-m4-pro", "mini-3": "mini-m4-pro", "mini-4": "mini-m4"})
    for c in generated_cables({h: MODELS[m] for h, m in cluster.models.items()}, "mesh"):
        cluster.cable(str(c.a), str(c.b))
    fabric = cluster.fabric()
    line = rdma.assess(cluster.macos, cluster.facts, models=cluster.models)
    assert fabric.backend == line.current == "ring" and fabric.warnings == []
    assert line.hosts(rdma.NOT_CAPABLE) == ["mini-4"]
    assert (fabric.why.rule, fabric.why.ring, without_rdma(fabric)) == (
        "ring-no-rdma", ("mini-1", "mini-2", "mini-3", "mini-4"), ("mini-4",))


def test_bridges_the_network_step_turned_off_or_would():
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge.fabric import bridges_turned_off

    off = {"bridge": {"service": "Thunderbolt Bridge", "enabled": False},
           "commands": [["-setnetworkserviceenabled", "Thunderbolt Bridge", "off"],
                        ["-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1"]]}
    already = {"bridge": {"service": "Thunderbolt Bridge", "enabled": False}, "commands": []}
    other = {"bridge": {"service": "Thunderbolt Bridge", "enabled": True},
             "commands": [["-setnetworkserviceenabled", "Thunderbolt 1", "off"]]}
    assert bridges_turned_off({"mini-1": off, "mini-2": already, "mini-3": other, "mini-4": None,
                               "mini-10": off}) == ["mini-1", "mini-10"]


def test_rank_envs_add_the_models_cache_offline_only_when_models_are_declared():
    declared = ["OMP_NUM_THREADS=4"]
    assert hostfile.rank_envs(declared, None, "/opt/hf") == declared  # no models: the hostfiles stay as they were
    assert hostfile.rank_envs(declared, [], "/opt/hf") == declared
    models = [{"name": "tiny", "path": "/data/tiny"}]
    assert hostfile.rank_envs(declared, models, "/opt/hf") == [
        "OMP_NUM_THREADS=4", "HF_HUB_CACHE=/opt/hf", "HF_HUB_OFFLINE=1"]
    # A name the inventory sets itself stays as it says, once.
    assert hostfile.rank_envs(["HF_HUB_OFFLINE=0"], models, "/opt/hf") == ["HF_HUB_OFFLINE=0", "HF_HUB_CACHE=/opt/hf"]

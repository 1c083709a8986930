"""plugin_utils.steps.fabric, rdma_step and onboard_step: the controller's steps on the cluster's typed view, as
the action plugins run them (the fabric judged once before the network step; publishing checks the read-back
against that judgement)."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import fabric as fabric_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import onboard as onboard_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import rdma as rdma_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed
from factories import MESH, Cluster, joining, minis


def view_of(macos: dict, thunderbolt: dict, *, active=None, **settings) -> ClusterView:
    hosts = list(thunderbolt)
    hostvars = {h: {"mlx_fleet_macos": macos[h], "mlx_fleet_thunderbolt": thunderbolt[h], **settings} for h in hosts}
    return ClusterView.of({"groups": {"mlx_cluster": hosts}, "hostvars": hostvars,
                           "ansible_play_hosts": hosts if active is None else active},
                          "mlx_cluster", fabric_step.SETTINGS)


def ring(serials=("A", "B", "C")) -> tuple[ClusterView, Cluster]:
    cluster = Cluster.of("mini-m4-pro", 3, "ring")
    macos = {h: dict(cluster.macos[h], serial_number=s, management_address=cluster.management[h])
             for h, s in zip(cluster.facts, serials)}
    return view_of(macos, cluster.facts, mlx_fleet_ip_pool="192.168.250.0/24"), cluster


def run_in(tmp_path, *, write=True) -> Run:
    return Run(tmp_path, write=write, holder="test", inventory="inv.yml")


def read_back(judged: dict, facts: dict) -> dict:
    """The network step's results: each Mac's ports holding the addresses the fabric gave them."""
    steps = {}
    for host, ports in judged["network"].items():
        tb = copy.deepcopy(facts[host])
        for port in tb["ports"]:
            port["addresses"] = [f"{p['address']}/{p['prefix']}" for p in ports if p["device"] == port["device"]]
        steps[host] = {"ansible_facts": {"mlx_fleet_thunderbolt": tb}}
    return steps


def test_the_fabric_is_judged_once_and_publishing_writes_that_judgement(tmp_path):
    view, cluster = ring()
    judged = fabric_step.judge(view, run_in(tmp_path), bridge="disabled", hostfiles=False, hostfile_dir=None)
    assert judged["backend"] == "jaccl" and len(judged["cables"]) == 3 and not judged["errors"]
    assert judged["configure_on"] == view.names and judged["write_on"] == view.names
    assert not (tmp_path / "hostfile.json").exists()  # before the network step: the picture only
    carried = json.loads(json.dumps(judged))  # as a registered result carries it
    published = fabric_step.publish(view, run_in(tmp_path), carried, read_back(judged, cluster.facts), "")
    assert published["changed"] is True and published["network"] == judged["network"]
    assert (tmp_path / "hostfile.json").read_text() == judged["hostfiles"]["hostfile.json"]


def test_a_cable_pulled_during_the_network_step_keeps_the_last_hostfiles(tmp_path):
    view, cluster = ring()
    judged = fabric_step.judge(view, run_in(tmp_path), bridge="disabled", hostfiles=False, hostfile_dir=None)
    steps = read_back(judged, cluster.facts)
    pulled = {port["domain_uuid"] for port in cluster.facts["mini-1"]["ports"]}
    for step in steps.values():  # both ends of mini-1's cables see nothing any more
        for port in step["ansible_facts"]["mlx_fleet_thunderbolt"]["ports"]:
            if port["domain_uuid"] in pulled or {p["domain_uuid"] for p in port["peers"]} & pulled:
                port["peers"] = []
    with pytest.raises(StepFailed) as failed:
        fabric_step.publish(view, run_in(tmp_path), judged, steps, "")
    assert not failed.value.bad_input and not (tmp_path / "hostfile.json").exists()


def test_a_cable_pulled_while_only_one_end_is_configured_keeps_the_last_hostfiles(tmp_path):
    """Only mini-1 had work in the network step (the others skipped it, their ports as read before): its read-back
    no longer shows its cable to mini-2, which mini-2's older read still does. The fresh end wins."""
    view, cluster = ring()
    judged = fabric_step.judge(view, run_in(tmp_path), bridge="disabled", hostfiles=False, hostfile_dir=None)
    steps = {"mini-1": read_back(judged, cluster.facts)["mini-1"]}
    mini_2 = {port["domain_uuid"] for port in cluster.facts["mini-2"]["ports"]}
    for port in steps["mini-1"]["ansible_facts"]["mlx_fleet_thunderbolt"]["ports"]:
        port["peers"] = [p for p in port["peers"] if p["domain_uuid"] not in mini_2]
    with pytest.raises(StepFailed) as failed:
        fabric_step.publish(view, run_in(tmp_path), judged, steps, "")
    assert not failed.value.bad_input and not (tmp_path / "hostfile.json").exists()
    assert failed.value.lines[0].startswith("hostfiles not rewritten: the cabling changed")


def test_check_mode_publishes_nothing(tmp_path):
    view, cluster = ring()
    judged = fabric_step.judge(view, run_in(tmp_path, write=False), bridge=None, hostfiles=True, hostfile_dir=None)
    published = fabric_step.publish(view, run_in(tmp_path, write=False), judged, {}, "")
    assert published["changed"] is False and list(tmp_path.iterdir()) == []


def test_one_mac_named_twice_is_bad_input(tmp_path):
    view, dummy = ring(serials=("A", "A", "C"))
    with pytest.raises(StepFailed) as failed:
        fabric_step.judge(view, run_in(tmp_path), bridge=None, hostfiles=True, hostfile_dir=None)
    assert failed.value.bad_input and len(failed.value.lines) == 1


def test_a_mac_that_dropped_out_leaves_the_fabric_alone(tmp_path):
    cluster = Cluster.of("mini-m4-pro", 3, "ring")
    view = view_of(cluster.macos, cluster.facts, active=["mini-1", "mini-2"])
    view = ClusterView(view.group, view.hosts[:2] + (type(view.hosts[2])("mini-3", {}),), view.active, view.settings)
    judged = fabric_step.judge(view, run_in(tmp_path), bridge=None, hostfiles=True, hostfile_dir=None)
    assert judged["dropped"] == ["mini-3"] and judged["changed"] is False and "publication" not in judged
    published = fabric_step.publish(view, run_in(tmp_path), judged, {}, "")
    assert published["skipped"] is True and published["write_on"] == ["mini-1", "mini-2"]
    assert list(tmp_path.iterdir()) == []


def test_one_mac_has_no_fabric(tmp_path):
    cluster = Cluster({"mini-1": "mini-m4-pro"})
    judged = fabric_step.judge(view_of(cluster.macos, cluster.facts), run_in(tmp_path), bridge=None, hostfiles=True,
                               hostfile_dir=None)
    assert judged["skipped"] is True


def test_rdma_readiness_writes_the_checklist_for_the_macs_that_need_the_recovery_step(tmp_path):
    cluster = minis(3, disabled=("mini-3",)).mesh()
    view = view_of(cluster.macos, cluster.tb)
    result = rdma_step.readiness(view, run_in(tmp_path))
    assert result["needs_recovery"] == ["mini-3"] and result["ready"] == ["mini-1", "mini-2"]
    assert (tmp_path / rdma.LEDGER_FILE).is_file() and result["changed"] is True


def test_rdma_readiness_of_one_mac_named_twice_is_bad_input(tmp_path):
    cluster = minis(2).mesh()
    macos = {h: dict(m, serial_number="SAME") for h, m in cluster.macos.items()}
    with pytest.raises(StepFailed) as failed:
        rdma_step.readiness(view_of(macos, cluster.tb), run_in(tmp_path))
    assert failed.value.bad_input and list(tmp_path.iterdir()) == []


def test_a_joining_mac_gets_its_visit_sheet_with_the_recovery_step_afterwards(tmp_path):
    cluster, macos = joining()
    view = view_of(macos, cluster.facts, mlx_fleet_cables=MESH)
    run = run_in(tmp_path)
    result = onboard_step.plan(view, "new", run, ["after"])
    assert result["needs_recovery"] is True and result["add"]
    assert {p.name for p in tmp_path.iterdir()} == {"onboard-new.html", "onboard-new.txt"}
    with pytest.raises(StepFailed):
        onboard_step.plan(view, "stranger", run, [])

"""plugin_utils.model.cluster: one typed, versioned record of the cluster, read from the old ledger once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model import cluster as cluster_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, Port, parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge.fabric import Publication, write_outputs
from factories import Cluster

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cluster"


def v0_cluster() -> Cluster:
    """The cabling fabric-addresses-v0.json was written for (tests/fixtures/cluster/README.md)."""
    cluster = Cluster.of("studio-m3-ultra", 4, "mesh")
    return cluster.unplug("studio-1:1").unplug("studio-2:1").cable("studio-1:1", "studio-2:5")


def texts(addresses: dict) -> dict[str, str]:
    return {str(cable): network for cable, network in addresses.items()}


@pytest.mark.parametrize("key", ["studio-m3-ultra", "mini-m4-pro"])
def test_a_cable_keeps_its_golden_address(key):
    golden = json.loads((FIXTURES / "golden-addresses.json").read_text())["cables"]
    fabric = Cluster.of(key, 4, "mesh").fabric()
    mine = {cable: network for cable, network in golden.items() if cable.startswith(key.split("-")[0])}
    assert len(mine) == 6
    assert {cable: texts(fabric.addresses)[cable] for cable in mine} == mine
    assert fabric.model.addresses() == fabric.addresses


def test_every_cable_of_a_ledger_written_before_the_model_keeps_its_address(tmp_path):
    ledger = json.loads((FIXTURES / "fabric-addresses-v0.json").read_text())
    shutil.copy(FIXTURES / "fabric-addresses-v0.json", tmp_path / "fabric-addresses.json")
    previous = cluster_model.read_model(tmp_path)
    assert previous.pool == "10.9.0.0/27" and texts(previous.addresses()) == ledger["cables"]
    cluster = v0_cluster()
    # Assigned afresh, some cable would get another /30: the ledger is what keeps them.
    assert texts(cluster.fabric(ip_pool="10.9.0.0/27").addresses) != ledger["cables"]
    fabric = cluster.fabric(ip_pool="10.9.0.0/27", previous=previous)
    assert texts(fabric.addresses) == ledger["cables"] and fabric.changes == []
    write_outputs(tmp_path, fabric)
    assert not (tmp_path / "fabric-addresses.json").exists()  # read once: the model replaces it
    again = cluster_model.read_model(tmp_path)
    assert again == fabric.model and texts(again.addresses()) == ledger["cables"]
    assert texts(cluster.fabric(ip_pool="10.9.0.0/27", previous=again).addresses) == ledger["cables"]


def test_the_model_holds_both_ends_with_their_addresses(tmp_path):
    fabric = Cluster.of("mini-m4-pro", 3, "ring").fabric()
    write_outputs(tmp_path, fabric)
    data = json.loads((tmp_path / "cluster.json").read_text())
    assert data["version"] == cluster_model.VERSION and data["backend"] == fabric.backend
    model = cluster_model.read_model(tmp_path)
    assert model == fabric.model and model.reason == fabric.reason
    assert [h.name for h in model.hosts] == ["mini-1", "mini-2", "mini-3"]
    assert {p.port: p.rdma_device for p in model.hosts[0].ports}[Port(model.hosts[0].name, 1)] == "rdma_en2"
    for link in model.links:
        first, second = cluster_model.ends(link.network)
        assert (link.a.address, link.b.address) == (first, second) and link.a.device and link.speed_gbps
        assert link.cable == Cable(Port(link.a.host, link.a.receptacle), Port(link.b.host, link.b.receptacle))
    # The network step's addresses are the model's, end for end.
    assert {p.port: f"{p.address}/{p.prefix}" for ports in fabric.network.values() for p in ports} == \
        model.port_addresses()
    assert cluster_model.last_links(tmp_path) == model.links


def test_a_newer_or_damaged_model_is_one_line(tmp_path):
    assert cluster_model.read_model(tmp_path) is None and cluster_model.last_links(tmp_path) == []
    (tmp_path / "cluster.json").write_text(json.dumps({"version": cluster_model.VERSION + 1}))
    with pytest.raises(ValueError, match="newer than this mlx-fleet's"):
        cluster_model.read_model(tmp_path)
    link = {"a": {"host": "a", "port": 1, "address": "10.0.0.2"}, "b": {"host": "b", "port": 1, "address": "10.0.0.1"},
            "network": "10.0.0.0/30"}
    (tmp_path / "cluster.json").write_text(json.dumps({"version": 1, "pool": None, "links": [link]}))
    with pytest.raises(ValueError, match="cluster.json: not a cluster.json .*remove it"):
        cluster_model.read_model(tmp_path)


def test_the_publication_carries_the_judged_fabric_to_the_step_that_writes_it(tmp_path):
    """fabric_publish writes what the fabric judged before the network step, not a second judgment."""
    fabric = Cluster.of("mini-m4-pro", 3, "ring").fabric()
    carried = json.loads(json.dumps(Publication.of(fabric).to_dict()))  # as a registered result carries it
    write_outputs(tmp_path / "judged", fabric)
    write_outputs(tmp_path / "carried", Publication.from_dict(carried))
    for name in ("hostfile.json", "hostfile-ring.json", "cluster.json", "fabric.dot"):
        assert (tmp_path / "carried" / name).read_bytes() == (tmp_path / "judged" / name).read_bytes(), name


def test_the_model_keeps_its_findings_typed_and_reads_them_back_equal():
    cluster = Cluster.of("mini-m4-pro", 4, "ring")
    plan = [str(link.cable) for link in cluster.fabric().links]
    model = cluster.unplug("mini-2:2").unplug("mini-3:1").fabric(cables=plan).model
    assert [(f.kind, f.cable, f.ports) for f in model.findings if f.kind == "missing"] == [
        ("missing", parse_cable("mini-2:2 -- mini-3:1"), (Port("mini-2", 2), Port("mini-3", 1)))]
    assert cluster_model.from_dict(json.loads(json.dumps(model.to_dict()))) == model

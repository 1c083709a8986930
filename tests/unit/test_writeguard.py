"""plugin_utils.fabric.write_guard: the hostfiles are rewritten only when every Mac came through the run and the
cables are still the ones the network step configured."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.addresses import to_configure
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.write_guard import Refusal, refusal
from factories import HOSTS, Cluster, plan, planned

def configured(cluster: Cluster, network: dict | None = None) -> dict:
    """The cluster's facts with every planned address on its port, as after the network step."""
    for host, ports in (network or planned(cluster)).items():
        for config in ports:
            port = next(p for p in cluster.facts[host]["ports"] if p["device"] == config["device"])
            port["addresses"] = [f"{config['address']}/{config['prefix']}"]
    return cluster.facts


def test_every_mac_through_and_the_same_cables_writes():
    mesh = Cluster.of("mini-m4-pro", 3)
    before = plan(mesh)
    facts = configured(mesh)
    assert refusal(HOSTS, HOSTS, before, before["cable_ends"], before["network"], facts) is None
    assert refusal(HOSTS, None, None, {}, {}, {}) is None


def test_a_mac_that_failed_its_network_step_keeps_the_last_hostfiles():
    assert refusal(HOSTS, ["mini-1", "mini-3"], None, {}, {}, {}) == Refusal(dropped=("mini-2",))
    assert refusal(HOSTS, ["mini-1"], None, {}, {}, {}) == Refusal(dropped=("mini-2", "mini-3"))


def test_a_cable_pulled_between_the_plan_and_the_network_step_keeps_the_last_hostfiles():
    mesh = Cluster.of("mini-m4-pro", 3)
    before = plan(mesh)
    gone = next(iter(before["cables"]))
    for end in gone.split(" -- "):
        mesh.unplug(end)
    now = plan(mesh)
    assert refusal(HOSTS, HOSTS, before, now["cable_ends"], now["network"], configured(mesh)) == Refusal(
        gone=(parse_cable(gone),))


def test_a_cable_moved_to_another_port_is_named_both_ways():
    line = Cluster.of("mini-m4-pro", 2, "line")
    before = plan(line)
    line.unplug("mini-1:1").unplug("mini-2:1").cable("mini-1:2", "mini-2:1")
    now = plan(line)
    assert refusal(["mini-1", "mini-2"], None, before, now["cable_ends"], now["network"], configured(line)) == Refusal(
        gone=(parse_cable("mini-1:1 -- mini-2:1"),), new=(parse_cable("mini-1:2 -- mini-2:1"),))


def test_no_hostfile_names_an_address_its_port_does_not_hold():
    """A cable moved since the ports were configured: its new /30 is on no port, so nothing is written."""
    line = Cluster.of("mini-m4-pro", 2, "line")
    configured(line)
    ledger = line.fabric().addresses  # the address ledger of that converge
    line.unplug("mini-1:1").unplug("mini-2:1").cable("mini-1:1", "mini-2:3")
    network = planned(line)  # the moved cable's /30 as the ledger has none for it
    one, two = network["mini-1"][0], network["mini-2"][0]
    assert two["hardware_port"] == "Thunderbolt 3"
    assert refusal(["mini-1", "mini-2"], None, None, {}, network, line.facts) == Refusal(
        unplaced=(("mini-1", one), ("mini-2", two)))
    # Both Macs need their ports configured: the new port, and on mini-2 the old one still holds the
    # ledger's address; a Mac whose ports are as planned does not.
    assert to_configure(network, line.facts, ledger) == ["mini-1", "mini-2"]
    configured(line, network)
    assert to_configure(network, line.facts, ledger) == ["mini-2"]  # Thunderbolt 1 still holds the old cable's
    line.facts["mini-2"]["ports"][0]["addresses"] = []
    assert to_configure(network, line.facts, ledger) == []
    assert refusal(["mini-1", "mini-2"], None, None, {}, network, line.facts) is None

"""plugin_utils.fabric.write_guard: the hostfiles are rewritten only when every Mac came through the run and the
cables are still the ones the network step configured."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.addresses import to_configure
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.write_guard import refusal
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
    assert refusal(HOSTS, HOSTS, before, before["cable_ends"], before["network"], facts, "inv.yml") is None
    assert refusal(HOSTS, None, None, {}, {}, {}, "inv.yml") is None


def test_a_mac_that_failed_its_network_step_keeps_the_last_hostfiles():
    assert refusal(HOSTS, ["mini-1", "mini-3"], None, {}, {}, {}, "inv.yml") == (
        "hostfiles not rewritten: mini-2 failed or did not answer earlier in this run; the last good hostfiles "
        "stay on the controller and the Macs: fix it and run again")
    assert refusal(HOSTS, ["mini-1"], None, {}, {}, {}, "inv.yml").startswith(
        "hostfiles not rewritten: mini-2 and mini-3 failed or did not answer")


def test_a_cable_pulled_between_the_plan_and_the_network_step_keeps_the_last_hostfiles():
    mesh = Cluster.of("mini-m4-pro", 3)
    before = plan(mesh)
    gone = next(iter(before["cables"]))
    for end in gone.split(" -- "):
        mesh.unplug(end)
    now = plan(mesh)
    assert refusal(HOSTS, HOSTS, before, now["cable_ends"], now["network"], configured(mesh), "inv.yml") == (
        f"hostfiles not rewritten: the cabling changed while the ports were being configured ({gone} is gone); "
        "the last good hostfiles stay on the controller and the Macs: check the cables and run again")


def test_a_cable_moved_to_another_port_is_named_both_ways():
    line = Cluster.of("mini-m4-pro", 2, "line")
    before = plan(line)
    line.unplug("mini-1:1").unplug("mini-2:1").cable("mini-1:2", "mini-2:1")
    now = plan(line)
    assert "(mini-1:1 -- mini-2:1 is gone; mini-1:2 -- mini-2:1 is new)" in refusal(
        ["mini-1", "mini-2"], None, before, now["cable_ends"], now["network"], configured(line), "inv.yml")


def test_no_hostfile_names_an_address_its_port_does_not_hold():
    """A cable moved since the ports were configured: its new /30 is on no port, so nothing is written."""
    line = Cluster.of("mini-m4-pro", 2, "line")
    configured(line)
    ledger = line.fabric().addresses  # the address ledger of that converge
    line.unplug("mini-1:1").unplug("mini-2:1").cable("mini-1:1", "mini-2:3")
    network = planned(line)  # the moved cable's /30 as the ledger has none for it
    one, two = network["mini-1"][0], network["mini-2"][0]
    assert two["hardware_port"] == "Thunderbolt 3"
    stop = refusal(["mini-1", "mini-2"], None, None, {}, network, line.facts, "inv.yml", cli=True)
    assert stop.startswith("hostfiles not rewritten: they would name addresses no port holds (mini-1 Thunderbolt 1 "
                           f"({one['device']}) has no {one['address']}/30; mini-2 Thunderbolt 3 ({two['device']}) "
                           f"has no {two['address']}/30); ")
    assert stop.endswith("mlx-fleet converge -i inv.yml configures the ports")
    assert refusal(["mini-1", "mini-2"], None, None, {}, network, line.facts, "inv.yml").endswith(
        "ansible-playbook -i inv.yml mlx_fleet.cluster.site configures the ports")  # the collection's form
    # Both Macs need their ports configured: the new port, and on mini-2 the old one still holds the
    # ledger's address; a Mac whose ports are as planned does not.
    assert to_configure(network, line.facts, ledger) == ["mini-1", "mini-2"]
    configured(line, network)
    assert to_configure(network, line.facts, ledger) == ["mini-2"]  # Thunderbolt 1 still holds the old cable's
    line.facts["mini-2"]["ports"][0]["addresses"] = []
    assert to_configure(network, line.facts, ledger) == []
    assert refusal(["mini-1", "mini-2"], None, None, {}, network, line.facts, "inv.yml") is None

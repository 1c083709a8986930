"""plugin_utils.writeguard: the hostfiles are rewritten only when every Mac came through the run and the
cables are still the ones the network step configured."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.writeguard import refusal
from test_fabric import Cluster
from test_management import planned

HOSTS = ["mini-1", "mini-2", "mini-3"]


def plan(cluster: Cluster) -> dict:
    """The plan stage's result as the write stage gets it (cables and network)."""
    return {"cables": {str(link): link.speed_gbps for link in cluster.fabric().links}, "network": planned(cluster)}


def test_every_mac_through_and_the_same_cables_writes():
    mesh = Cluster.of("mini-m4-pro", 3)
    before = plan(mesh)
    assert refusal(HOSTS, HOSTS, before, before["cables"], before["network"]) is None
    assert refusal(HOSTS, None, None, {}, {}) is None


def test_a_mac_that_failed_its_network_step_keeps_the_last_hostfiles():
    assert refusal(HOSTS, ["mini-1", "mini-3"], None, {}, {}) == (
        "hostfiles not rewritten: mini-2 failed or did not answer earlier in this run; the last good hostfiles "
        "stay on the controller and the Macs: fix it and run again")
    assert refusal(HOSTS, ["mini-1"], None, {}, {}).startswith(
        "hostfiles not rewritten: mini-2 and mini-3 failed or did not answer")


def test_a_cable_pulled_between_the_plan_and_the_network_step_keeps_the_last_hostfiles():
    mesh = Cluster.of("mini-m4-pro", 3)
    before = plan(mesh)
    gone = next(iter(before["cables"]))
    for end in gone.split(" -- "):
        mesh.unplug(end)
    now = plan(mesh)
    assert refusal(HOSTS, HOSTS, before, now["cables"], now["network"]) == (
        f"hostfiles not rewritten: the cabling changed while the ports were being configured ({gone} is gone); "
        "the last good hostfiles stay on the controller and the Macs: check the cables and run again")


def test_a_cable_moved_to_another_port_is_named_both_ways():
    line = Cluster.of("mini-m4-pro", 2, "line")
    before = plan(line)
    line.unplug("mini-1:1").unplug("mini-2:1").cable("mini-1:2", "mini-2:1")
    now = plan(line)
    assert "(mini-1:1 -- mini-2:1 is gone; mini-1:2 -- mini-2:1 is new)" in refusal(
        ["mini-1", "mini-2"], None, before, now["cables"], now["network"])

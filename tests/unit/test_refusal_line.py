"""render.write_guard: the write guard's refusal in words, one line per kind of refusal."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.write_guard import Refusal
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.write_guard import refusal_line

KEPT = "the last good hostfiles stay on the controller and the Macs"


def test_macs_that_did_not_come_through():
    assert refusal_line(Refusal(dropped=("mini-2",)), "inv.yml") == (
        f"hostfiles not rewritten: mini-2 failed or did not answer earlier in this run; {KEPT}: fix it and run again")
    assert refusal_line(Refusal(dropped=("mini-2", "mini-3")), "inv.yml").endswith("fix them and run again")


def test_the_cabling_changed_names_each_cable_both_ways_or_the_addresses():
    moved = Refusal(gone=(parse_cable("mini-1:1 -- mini-2:1"),), new=(parse_cable("mini-1:2 -- mini-2:1"),))
    assert refusal_line(moved, "inv.yml") == (
        "hostfiles not rewritten: the cabling changed while the ports were being configured (mini-1:1 -- mini-2:1 "
        f"is gone; mini-1:2 -- mini-2:1 is new); {KEPT}: check the cables and run again")
    assert "(the ports' addresses differ from the ones configured)" in refusal_line(Refusal(readdressed=True), "inv")


def test_addresses_no_port_holds_name_the_command_that_configures_the_ports():
    port = {"hardware_port": "Thunderbolt 3", "device": "en3", "address": "192.168.77.2", "prefix": 30}
    refused = Refusal(unplaced=(("mini-2", port),))
    assert refusal_line(refused, "inv.yml", cli=True) == (
        "hostfiles not rewritten: they would name addresses no port holds (mini-2 Thunderbolt 3 (en3) has no "
        f"192.168.77.2/30); {KEPT}: mlx-fleet converge -i inv.yml configures the ports")
    assert refusal_line(refused, "inv.yml").endswith(  # the collection's form
        "ansible-playbook -i inv.yml mlx_fleet.cluster.site configures the ports")

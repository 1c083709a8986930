"""plugin_utils.fabric.management: the fabric's network plan never cuts the connection a Mac is managed over."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import LEGACY_FILE as ADDRESSES_FILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import read_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.management import lockout_problems
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.preflight import network_problems
from factories import Cluster, planned

FIX = "manage the Mac over Ethernet or Wi-Fi (its ansible_host)"


def macos(cluster: Cluster, **managed_over) -> dict:
    """mlx_fleet_macos facts: every Mac on en0 (Ethernet) unless managed_over names another device."""
    return {h: {"management_interface": managed_over.get(h.replace("-", "_"), "en0"),
                "management_address": cluster.management[h]} for h in cluster.facts}


@pytest.fixture
def line():
    """mini-1 Thunderbolt 1 -- mini-2 Thunderbolt 1; mini-1's Thunderbolt 2 (en3) idle; the bridge on."""
    return Cluster.of("mini-m4-pro", 2, "line", bridge=True)


@pytest.mark.parametrize(
    ("managed_over", "bridge", "message"),
    [
        ({}, "disabled", None),
        ({"mini_1": "bridge0"}, "disabled",
         f"mini-1: managed over Thunderbolt Bridge (bridge0), which the fabric would turn off (mlx_fabric_bridge: "
         f"disabled); {FIX}, or keep the bridge with mlx_fabric_bridge: unchanged"),
        ({"mini_1": "bridge0"}, "unchanged", None),
        ({"mini_2": "en2"}, "unchanged",
         "mini-2: managed over Thunderbolt 1 (en2), which the fabric would re-address to {address} for its "
         f"Thunderbolt cable; {FIX}, or leave that port out of the plan (unplug the cable and drop it from "
         "mlx_fleet_cables)"),
        ({"mini_1": "en3"}, "disabled", None),  # an idle port the plan leaves alone
        ({"mini_1": "en1"}, "enabled", None),  # Wi-Fi
    ],
    ids=["ethernet", "bridge-turned-off", "bridge-kept", "cabled-port", "idle-port", "wifi"],
)
def test_the_plan_leaves_the_management_interface_alone(line, managed_over, bridge, message):
    network = planned(line)
    problems = lockout_problems(macos(line, **managed_over), line.facts, network, bridge)
    address = next((p["address"] for p in network["mini-2"] if p["device"] == "en2"), None)
    assert problems == ([message.format(address=address)] if message else [])


def test_turning_the_bridge_on_takes_the_address_of_a_port_it_manages_over():
    cluster = Cluster.of("mini-m4-pro", 2, "line")  # the bridge off
    problems = lockout_problems(macos(cluster, mini_1="en3"), cluster.facts, planned(cluster), "enabled")
    assert problems == [
        f"mini-1: managed over Thunderbolt 2 (en3), which turning the Thunderbolt Bridge on (mlx_fabric_bridge: "
        f"enabled) would make a bridge member without an address of its own; {FIX}, or keep the bridge with "
        "mlx_fabric_bridge: unchanged"]


def test_the_hardware_port_name_macos_facts_gives_is_used(line):
    facts = macos(line, mini_1="bridge0")
    facts["mini-1"]["management_hardware_port"] = "Thunderbolt Bridge"
    assert lockout_problems(facts, line.facts, planned(line), "disabled")[0].startswith(
        "mini-1: managed over Thunderbolt Bridge (bridge0), which")


def test_facts_without_the_management_interface_are_not_judged(line):
    assert lockout_problems({h: {} for h in line.facts}, line.facts, planned(line), "disabled") == []


@pytest.mark.parametrize(
    ("managed_over", "bridge", "refused"),
    [({"mini_1": "bridge0"}, "disabled", 1), ({"mini_2": "en2"}, "unchanged", 1),
     ({"mini_2": "en2", "mini_1": "bridge0"}, "disabled", 2), ({"mini_1": "en3"}, "enabled", 0), ({}, "disabled", 0)],
    ids=["bridge-turned-off", "cabled-port", "two-macs", "bridge-already-on", "ethernet"],
)
def test_the_preflight_judges_the_plan_the_fabric_will_make(line, tmp_path, managed_over, bridge, refused):
    # A ledger from an earlier run keeps the cable on another /30 than a fresh plan would pick.
    previous = {"mini-1:1 -- mini-2:1": "192.168.7.0/30"}
    atomic_write_json(tmp_path / ADDRESSES_FILE, {"pool": "192.168.0.0/16", "cables": previous})
    facts = macos(line, **managed_over)
    fabric = {host: [{"device": p.device, "address": p.address} for p in ports]
              for host, ports in line.fabric(previous=read_model(tmp_path)).network.items()}
    expected = lockout_problems(facts, line.facts, fabric, bridge)
    assert [problem for host in line.facts
            for problem in network_problems(host, facts[host], line.facts, bridge, "192.168.0.0/16", tmp_path)] == expected
    assert len(expected) == refused
    assert all("192.168.7.2 for its Thunderbolt cable" in p for p in expected if "re-address" in p)


def test_a_plan_that_cannot_be_addressed_still_judges_the_bridge(line):
    facts = macos(line, mini_1="bridge0", mini_2="en2")
    # A /31 pool holds no /30: said once, on the first Mac; a bridge turned off is still refused.
    assert network_problems("mini-2", facts["mini-2"], line.facts, "disabled", "10.9.9.0/31", None) == []
    assert network_problems("mini-1", facts["mini-1"], line.facts, "disabled", "10.9.9.0/31", None) == [
        f"mlx_fleet_ip_pool 10.9.9.0/31 holds 0 /30 networks for {len(line.fabric().links)} cables; use a larger pool",
        f"mini-1: managed over Thunderbolt Bridge (bridge0), which the fabric would turn off (mlx_fabric_bridge: "
        f"disabled); {FIX}, or keep the bridge with mlx_fabric_bridge: unchanged"]

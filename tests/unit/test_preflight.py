"""Preflight: judging a Mac (its mlx_fleet_macos facts). The inventory: test_inventory_table.py;
how macos_facts reads a Mac: test_module_macos_facts.py."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.preflight import same_macs
from factories import GOOD, check_node

@pytest.mark.parametrize(
    ("change", "host_vars", "become_password", "message"),
    [
        ({}, {"mlx_fleet_model": "mini-m4-pro"}, False, None),
        ({"apple_silicon": False, "model_name": "Mac mini", "model_identifier": "Macmini8,1"}, {}, False,
         "m1: Mac mini (Macmini8,1) is not Apple Silicon; MLX distributed needs an M-series Mac: remove it from mlx_cluster"),
        ({"product_version": "26.1", "build_version": "25B78"}, {}, False,
         "m1: macOS 26.1 (25B78) is older than mlx_fleet_min_macos 26.2; update it in System Settings > General > Software Update"),
        ({"product_version": "26.10"}, {"mlx_fleet_min_macos": "26.9"}, False, None),
        # A declared model the Mac contradicts is bad input, judged by the action (models.mismatch, test_models).
        ({}, {"mlx_fleet_model": "studio-m3-ultra"}, False, None),
        ({"sudo": "none"}, {}, False,
         "m1: admin is not an administrator, so it cannot sudo; connect as an admin account (ansible_user) "
         "or tick 'Allow this user to administer this computer' in Users & Groups"),
        ({"sudo": "password"}, {}, False,
         "m1: sudo asks admin for a password; run with --ask-become-pass (-K) or set ansible_become_password in a vault"),
        ({"sudo": "password"}, {}, True, None),
        ({}, {"macos_node_wired_limit_mb": 57344}, False, None),
        ({}, {"macos_node_wired_limit_mb": 60000}, False,
         "m1: macos_node_wired_limit_mb 60000 leaves macOS 5536 MB of this Mac's 65536 MB; keep at least 8192 MB "
         "for macOS: use at most 57344"),
        ({"management_address": "192.168.4.2"}, {"mlx_fleet_ip_pool": "192.168.0.0/16"}, False,
         "m1: management address 192.168.4.2 is inside mlx_fleet_ip_pool 192.168.0.0/16; pick a pool the Macs do not already use"),
    ],
)
def test_node_rules(change, host_vars, become_password, message):
    problems = check_node("m1", GOOD | change, host_vars, become_password=become_password)
    assert problems == ([message] if message else [])


def test_the_same_mac_under_two_names_is_named_by_both():
    read = {"m1": GOOD, "m2": GOOD | {"serial_number": "OTHER"}, "m3": GOOD}
    [(names, line)] = same_macs(read).items()  # the names of the one Mac, and its serial number in the line
    assert names == ("m1", "m3") and "H7X2K4QW9Y)" in line.split() and "\n" not in line
    assert list(same_macs(read | {"m4": GOOD})) == [("m1", "m3", "m4")]
    assert same_macs({"m1": GOOD, "m2": read["m2"]}) == {}

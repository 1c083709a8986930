"""Preflight: judging a Mac (its mlx_fleet_macos facts) and the inventory.

How macos_facts reads a Mac is tested in test_module_macos_facts.py."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.inventory import check_inventory
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.preflight import check_node

GOOD = {
    "product_version": "26.2", "build_version": "25C56", "model_identifier": "Mac16,11", "model_name": "Mac mini",
    "chip": "Apple M4 Pro", "apple_silicon": True, "user": "admin", "sudo": "passwordless",
    "management_address": "10.0.1.21",
}


@pytest.mark.parametrize(
    ("change", "host_vars", "become_password", "message"),
    [
        ({}, {"mlx_fleet_model": "mini-m4-pro"}, False, None),
        ({"apple_silicon": False, "model_name": "Mac mini", "model_identifier": "Macmini8,1"}, {}, False,
         "m1: Mac mini (Macmini8,1) is not Apple Silicon; MLX distributed needs an M-series Mac: remove it from mlx_cluster"),
        ({"product_version": "26.1", "build_version": "25B78"}, {}, False,
         "m1: macOS 26.1 (25B78) is older than mlx_fleet_min_macos 26.2; update it in System Settings > General > Software Update"),
        ({"product_version": "26.10"}, {"mlx_fleet_min_macos": "26.9"}, False, None),
        ({}, {"mlx_fleet_model": "studio-m3-ultra"}, False,
         "m1: the inventory says studio-m3-ultra (Mac15,14) but the Mac is a Mac mini (Mac16,11); fix mlx_fleet_model"),
        ({"sudo": "none"}, {}, False,
         "m1: admin is not an administrator, so it cannot sudo; connect as an admin account (ansible_user) "
         "or tick 'Allow this user to administer this computer' in Users & Groups"),
        ({"sudo": "password"}, {}, False,
         "m1: sudo asks admin for a password; run with --ask-become-pass (-K) or set ansible_become_password in a vault"),
        ({"sudo": "password"}, {}, True, None),
        ({"management_address": "192.168.4.2"}, {}, False,
         "m1: management address 192.168.4.2 is inside mlx_fleet_ip_pool 192.168.0.0/16; pick a pool the Macs do not already use"),
    ],
)
def test_node_rules(change, host_vars, become_password, message):
    problems = check_node("m1", GOOD | change, host_vars, become_password=become_password)
    assert problems == ([message] if message else [])


HOSTS = {
    "s1": {"ansible_host": "10.0.1.11", "mlx_fleet_model": "studio-m3-ultra"},
    "s2": {"ansible_host": "10.0.1.12", "mlx_fleet_model": "studio-m3-ultra"},
    "m1": {"ansible_host": "mini-1.local", "mlx_fleet_model": "mini-m4-pro"},
}


@pytest.mark.parametrize(
    ("hosts", "group_vars", "message"),
    [
        (HOSTS, {"mlx_fleet_cables": ["s1:2 -- s2:2", "s1:3 -- m1:1"]}, None),
        (HOSTS | {"s3": {"ansible_host": "10.0.1.11"}}, {},
         "s1 and s3: the same address 10.0.1.11 twice; each Mac needs its own ansible_host"),
        (HOSTS | {"s3": {"mlx_fleet_model": "studio-m2"}}, {},
         "s3: unknown model 'studio-m2' in mlx_fleet_model; use one of studio-m3-ultra, mini-m4-pro, mini-m4, macbook-pro-m4-max"),
        (HOSTS, {"mlx_fleet_backend": "mpi"},
         "mlx_fleet_backend: unknown backend 'mpi'; use one of jaccl, jaccl-ring, ring, auto"),
        (HOSTS, {"mlx_env_mlx_version": "0.32"}, None),
        (HOSTS, {"mlx_fleet_min_macos": 26.2}, None),
        (HOSTS, {"mlx_env_mlx_version": "latest"},
         "mlx_env_mlx_version: malformed version 'latest'; write it like 26.2 or 0.32.4 (quoted in YAML)"),
        (HOSTS, {"mlx_fleet_cables": ["s1:2 -- s9:2"]}, "mlx_fleet_cables: cable s1:2 -- s9:2: unknown host 's9'"),
        (HOSTS, {"mlx_fleet_cables": ["s1:2 -- m1:4"]},
         "mlx_fleet_cables: cable s1:2 -- m1:4: m1 has Thunderbolt ports 1-3, not 4"),
        (HOSTS, {"mlx_fleet_cables": ["s1:2 -- s2:2", "s1:2 -- m1:1"]},
         "mlx_fleet_cables: cable s1:2 -- m1:1: port s1:2 is already used by cable s1:2 -- s2:2"),
        (HOSTS, {"mlx_fleet_ip_pool": "10.0.1.8/30"},
         "s1: management address 10.0.1.11 is inside mlx_fleet_ip_pool 10.0.1.8/30; pick a pool the Macs do not already use"),
        (HOSTS, {"mlx_fleet_management_network": "192.168.10.0/24"},
         "mlx_fleet_ip_pool: 192.168.0.0/16 overlaps the management network 192.168.10.0/24; pick a pool the Macs do not already use"),
        (HOSTS, {"mlx_fleet_ip_pool": "192.168.0.0/31"},
         "mlx_fleet_ip_pool: 192.168.0.0/31 must be an IPv4 network of at least 4 addresses (/30)"),
    ],
)
def test_inventory_rules(hosts, group_vars, message):
    assert check_inventory(hosts, group_vars) == ([message] if message else [])


def test_inventory_reports_every_problem_at_once():
    problems = check_inventory(HOSTS, {"mlx_fleet_backend": "x", "mlx_fleet_cables": ["s1:9 -- s2:2"]})
    assert len(problems) == 2

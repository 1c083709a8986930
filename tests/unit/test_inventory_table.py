"""plugin_utils.checks.inventory_checks: every inventory mistake the controller refuses before any Mac is touched,
one line each, naming the host or variable and the fix."""

from __future__ import annotations

from ipaddress import IPv4Interface

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.controller_networks import (parse_ifconfig_networks,
                                                                                  parse_ip_addr_json)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.inventory_checks import (
    check_inventory, choose_pool, inventory_problems, labelled)
from conftest import FIXTURE_DIR, load

HOSTS = {
    "s1": {"ansible_host": "10.0.1.11", "mlx_fleet_model": "studio-m3-ultra"},
    "s2": {"ansible_host": "10.0.1.12", "mlx_fleet_model": "studio-m3-ultra"},
    "m1": {"ansible_host": "m1.local", "mlx_fleet_model": "mini-m4-pro"},
}
# The controller, on a network of its own.
CONTROLLER = [("en0", IPv4Interface("10.0.9.5/24"))]
ENVS_FIX = 'write mlx_fleet_envs as a list of NAME=VALUE strings, e.g. ["OMP_NUM_THREADS=4"]'
POOL_FIX = "use a private range the Macs and this controller do not use, e.g. 192.168.0.0/16"


def host(name, **hv):
    return {name: dict(HOSTS.get(name, {}), **hv)}


CASES = {
    # --- what was refused before, kept -----------------------------------------------------------
    "sound": (HOSTS, {"mlx_fleet_cables": ["s1:2 -- s2:2", "s1:3 -- m1:1"]}, None),
    "duplicate-address": (HOSTS | {"s3": {"ansible_host": "10.0.1.11"}}, {},
                          "s1 and s3: the same address 10.0.1.11 twice; each Mac needs its own ansible_host"),
    "unknown-model": (HOSTS | {"s3": {"mlx_fleet_model": "studio-m2"}}, {},
                      "s3: unknown model 'studio-m2' in mlx_fleet_model; did you mean studio-m2-max, studio-m2-ultra, "
                      "studio-m4-max? Or leave it out: the Mac's own facts are read"),
    "unknown-backend": (HOSTS, {"mlx_fleet_backend": "mpi"},
                        "mlx_fleet_backend: unknown backend 'mpi'; use one of jaccl, jaccl-ring, ring, auto"),
    "two-part-version": (HOSTS, {"mlx_env_mlx_version": "0.32"}, None),
    "word-version": (HOSTS, {"mlx_env_mlx_version": "latest"},
                     "mlx_env_mlx_version: malformed version 'latest'; write it like 26.2 or 0.32.4 (quoted in YAML)"),
    "cable-unknown-host": (HOSTS, {"mlx_fleet_cables": ["s1:2 -- s9:2"]},
                           "mlx_fleet_cables: cable s1:2 -- s9:2: unknown host 's9'"),
    "cable-unknown-port": (HOSTS, {"mlx_fleet_cables": ["s1:2 -- m1:4"]},
                           "mlx_fleet_cables: cable s1:2 -- m1:4: m1 has Thunderbolt ports 1-3, not 4"),
    "port-used-twice": (HOSTS, {"mlx_fleet_cables": ["s1:2 -- s2:2", "s1:2 -- m1:1"]},
                        "mlx_fleet_cables: cable s1:2 -- m1:1: port s1:2 is already used by cable s1:2 -- s2:2"),
    "mac-address-in-pool": (HOSTS, {"mlx_fleet_ip_pool": "10.0.1.8/30"},
                            "s1: management address 10.0.1.11 is inside mlx_fleet_ip_pool 10.0.1.8/30; pick a pool "
                            "the Macs do not already use"),
    "pool-overlaps-management": (HOSTS, {"mlx_fleet_ip_pool": "192.168.0.0/16",
                                         "mlx_fleet_management_network": "192.168.10.0/24"},
                                 "mlx_fleet_ip_pool: 192.168.0.0/16 overlaps the management network "
                                 "192.168.10.0/24; pick a pool the Macs do not already use"),
    "pool-below-30": (HOSTS, {"mlx_fleet_ip_pool": "192.168.0.0/31"},
                      "mlx_fleet_ip_pool: 192.168.0.0/31 must be an IPv4 network of at least 4 addresses (/30)"),
    # --- the address pool ------------------------------------------------------------------------
    "pool-too-small": (HOSTS, {"mlx_fleet_ip_pool": "192.168.7.0/30", "mlx_fleet_cables": ["s1:2 -- s2:2",
                                                                                          "s1:3 -- m1:1"]},
                       "mlx_fleet_ip_pool: 192.168.7.0/30 holds 1 /30 networks for 2 planned cables; use a larger "
                       "pool (at least /29)"),
    "pool-loopback": (HOSTS, {"mlx_fleet_ip_pool": "127.0.0.0/16"},
                      f"mlx_fleet_ip_pool: 127.0.0.0/16 is a loopback range; {POOL_FIX}"),
    "pool-link-local": (HOSTS, {"mlx_fleet_ip_pool": "169.254.0.0/16"},
                        "mlx_fleet_ip_pool: 169.254.0.0/16 is a link-local (169.254/16, macOS's self-assigned "
                        f"addresses) range; {POOL_FIX}"),
    "pool-multicast": (HOSTS, {"mlx_fleet_ip_pool": "239.1.0.0/16"},
                       f"mlx_fleet_ip_pool: 239.1.0.0/16 is a multicast range; {POOL_FIX}"),
    "pool-everything": (HOSTS, {"mlx_fleet_ip_pool": "0.0.0.0/0"},
                        f"mlx_fleet_ip_pool: 0.0.0.0/0 is every IPv4 address; {POOL_FIX}"),
    "pool-this-host": (HOSTS, {"mlx_fleet_ip_pool": "0.0.0.0/16"},
                       f"mlx_fleet_ip_pool: 0.0.0.0/16 is in 0.0.0.0/8, which means 'this host', not a network; "
                       f"{POOL_FIX}"),
    "pool-public": (HOSTS, {"mlx_fleet_ip_pool": "8.8.0.0/16"},
                    "mlx_fleet_ip_pool: 8.8.0.0/16 is not a private range (its addresses belong to hosts on the "
                    f"Internet); {POOL_FIX}"),
    "pool-host-bits": (HOSTS, {"mlx_fleet_ip_pool": "192.168.1.5/16"},
                       "mlx_fleet_ip_pool: 192.168.1.5/16 has host bits set; write the network itself, 192.168.0.0/16"),
    "pool-garbage": (HOSTS, {"mlx_fleet_ip_pool": "big"},
                     "mlx_fleet_ip_pool: 'big' is not an IPv4 network like 192.168.0.0/16"),
    "pool-overlaps-controller": (HOSTS, {"mlx_fleet_ip_pool": "10.0.8.0/22"},
                                 "mlx_fleet_ip_pool: 10.0.8.0/22 overlaps this controller's network 10.0.9.0/24 "
                                 "(en0 10.0.9.5); pick a pool neither the controller nor the Macs use, "
                                 "e.g. 192.168.0.0/16"),
    # --- versions and environment variables ------------------------------------------------------
    "macos-as-number": (HOSTS, {"mlx_fleet_min_macos": 26.1},
                        "mlx_fleet_min_macos: 26.1 is a number in YAML, which reads 26.10 as 26.1; quote the version "
                        'as you mean it, e.g. mlx_fleet_min_macos: "26.2"'),
    "python-as-number": (HOSTS, {"mlx_env_python_version": 3.1},
                         "mlx_env_python_version: 3.1 is a number in YAML, which reads 26.10 as 26.1; quote the "
                         'version as you mean it, e.g. mlx_env_python_version: "26.2"'),
    "version-suffix": (HOSTS, {"mlx_fleet_min_macos": "26.2beta"},
                       "mlx_fleet_min_macos: malformed version '26.2beta'; write it like 26.2 or 0.32.4 (quoted in YAML)"),
    "version-newline": (HOSTS, {"mlx_fleet_min_macos": "26.2\n"},
                        "mlx_fleet_min_macos: malformed version '26.2\\n'; write it like 26.2 or 0.32.4 (quoted in YAML)"),
    "envs-sound": (HOSTS, {"mlx_fleet_envs": ["MLX_METAL_DEBUG=0", "OMP_NUM_THREADS=4"]}, None),
    "envs-fast-synch": (HOSTS, {"mlx_fleet_envs": ["MLX_METAL_FAST_SYNCH=1"]},
                        "mlx_fleet_envs: MLX_METAL_FAST_SYNCH=1 in the environment: MLX_METAL_FAST_SYNCH can wedge the "
                        "GPU until a restart (ml-explore/mlx#3830); MLX's documentation now says to leave it unset; "
                        "remove it"),
    "envs-not-a-list": (HOSTS, {"mlx_fleet_envs": "OMP_NUM_THREADS=4"},
                        f"mlx_fleet_envs: is a str, not a list; {ENVS_FIX}"),
    "envs-bad-name": (HOSTS, {"mlx_fleet_envs": ["1X=2"]},
                      f"mlx_fleet_envs: '1X=2' is not NAME=VALUE with a NAME of letters, digits and underscores; {ENVS_FIX}"),
    "envs-no-value": (HOSTS, {"mlx_fleet_envs": ["DEBUG"]},
                      f"mlx_fleet_envs: 'DEBUG' is not NAME=VALUE with a NAME of letters, digits and underscores; {ENVS_FIX}"),
    "envs-mapping-entry": (HOSTS, {"mlx_fleet_envs": [{"DEBUG": 1}]},
                           f"mlx_fleet_envs: {{'DEBUG': 1}} is not NAME=VALUE with a NAME of letters, digits and "
                           f"underscores; {ENVS_FIX}"),
    "envs-newline-value": (HOSTS, {"mlx_fleet_envs": ["A=1\nB=2"]},
                           "mlx_fleet_envs: A's value has control characters; give it on one line"),
    # --- per-host values -------------------------------------------------------------------------
    "model-list": (HOSTS | host("s2", mlx_fleet_model=["studio-m3-ultra"]), {},
                   "s2: mlx_fleet_model is a list; give one model key, e.g. mlx_fleet_model: studio-m3-ultra"),
    "model-mapping": (HOSTS | host("s2", mlx_fleet_model={"key": "studio-m3-ultra"}), {},
                      "s2: mlx_fleet_model is a mapping; give one model key, e.g. mlx_fleet_model: studio-m3-ultra"),
    "location-number": (HOSTS | host("s1", mlx_fleet_location=12), {},
                        's1: mlx_fleet_location is a number; write where the Mac stands as one line of text (quoted '
                        'in YAML), e.g. "rack 2, shelf 3"'),
    "location-forged-line": (HOSTS | host("s1", mlx_fleet_location="rack 1\nSerial number:  FAKE"), {},
                             's1: mlx_fleet_location has control characters; write where the Mac stands as one line '
                             'of text (quoted in YAML), e.g. "rack 2, shelf 3"'),
    "label-path": (HOSTS | host("s1", macos_node_wired_limit_label="../../tmp/x"), {},
                   "s1: macos_node_wired_limit_label '../../tmp/x' is not a reverse-DNS launchd label; use one like "
                   "org.mlx-fleet.wired-limit (letters, digits, hyphens, dot-separated)"),
    "label-sound": (HOSTS | host("s1", macos_node_wired_limit_label="com.example.gpu-limit"), {}, None),
    "wired-fraction-high": (HOSTS | host("s1", macos_node_wired_limit_fraction=0.95), {},
                            "s1: macos_node_wired_limit_fraction 0.95 is not a fraction from 0 to 0.9; above that "
                            "macOS runs short of memory: use at most 0.9 (0 keeps macOS's default)"),
    "wired-fraction-top": (HOSTS | host("s1", macos_node_wired_limit_fraction="0.9"), {}, None),
    "wired-mb-negative": (HOSTS | host("s1", macos_node_wired_limit_mb=-5), {},
                          "s1: macos_node_wired_limit_mb -5 is not a size in MB; give a whole number (0 keeps "
                          "macOS's default)"),
    # --- host names ------------------------------------------------------------------------------
    "name-path": (HOSTS | {"../../etc": {"ansible_host": "10.0.1.13"}}, {},
                  "'../../etc': not a valid host name; name each Mac with letters, digits and hyphens (dots only "
                  "between labels), e.g. studio-1"),
    "name-space": (HOSTS | {"mini 1": {"ansible_host": "10.0.1.13"}}, {},
                   "'mini 1': not a valid host name; name each Mac with letters, digits and hyphens (dots only "
                   "between labels), e.g. studio-1"),
    "cable-unicode-host": (HOSTS, {"mlx_fleet_cables": ["s1:2 -- stüdio-2:2"]},
                           "mlx_fleet_cables: cable s1:2 -- stüdio-2:2: unknown host 'stüdio-2'"),
    "same-bonjour-name": ({"mini-1.lab": {"ansible_host": "10.0.1.21"}, "mini-1.office": {"ansible_host": "10.0.1.22"}},
                          {}, "mini-1.lab and mini-1.office: the same Bonjour name mini-1.local; give each Mac its own "
                              "macos_node_local_host_name"),
    "same-bonjour-name-case": ({"Mini-1": {"ansible_host": "10.0.1.21"}, "mini-1": {"ansible_host": "10.0.1.22"}},
                               {}, "Mini-1 and mini-1: the same Bonjour name mini-1.local; give each Mac its own "
                                   "macos_node_local_host_name"),
    "renamed-away-from-local": (HOSTS | host("m1", ansible_host="mini-7.local"), {},
                                "m1: reached as mini-7.local, but macos_node would rename the Mac to m1.local and lose "
                                "it; set macos_node_local_host_name: mini-7 or ansible_host: m1.local"),
    "local-name-kept": (HOSTS | host("m1", ansible_host="mini-7.local", macos_node_local_host_name="mini-7"), {},
                        None),
    "local-name-invalid": (HOSTS | host("s1", macos_node_local_host_name="studio one"), {},
                           "s1: macos_node_local_host_name 'studio one' is not a Bonjour name; use letters, digits and "
                           "hyphens only (at most 63, no hyphen first or last)"),
}

@pytest.mark.parametrize(("hosts", "group_vars", "line"), CASES.values(), ids=CASES.keys())
def test_inventory_table(hosts, group_vars, line):
    assert check_inventory(hosts, group_vars, CONTROLLER) == ([line] if line else [])


def test_every_problem_at_once_one_line_each():
    problems = check_inventory(HOSTS | host("s2", mlx_fleet_model=["x"]), {
        "mlx_fleet_backend": "x", "mlx_fleet_cables": ["s1:9 -- s2:2"], "mlx_fleet_min_macos": 26.1,
        "mlx_fleet_envs": ["bad"], "mlx_fleet_ip_pool": "127.0.0.0/8"}, CONTROLLER)
    assert len(problems) == 6 and all("\n" not in p for p in problems)


def test_a_pool_suggestion_avoids_the_controller():
    controller = [("en0", IPv4Interface("192.168.1.20/24"))]
    assert check_inventory(HOSTS, {}, controller) == []  # no pool set: the fabric picks one (choose_pool)
    [problem] = inventory_problems(HOSTS, {"mlx_fleet_ip_pool": "192.168.0.0/16"}, controller)
    assert problem.variables == ("mlx_fleet_ip_pool",) and "192.168.1.0/24" in problem.line  # the network it overlaps
    assert problem.line.endswith(" 10.99.0.0/16")  # the suggestion: a pool off the controller's network


def test_controller_networks_from_ip_and_ifconfig():
    ip_json = ('[{"ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},'
               ' {"ifname": "eth0", "addr_info": [{"family": "inet", "local": "192.168.1.20", "prefixlen": 24},'
               ' {"family": "inet6", "local": "fe80::1", "prefixlen": 64}]}]')
    assert parse_ip_addr_json(ip_json)[1:] == [("eth0", IPv4Interface("192.168.1.20/24"))]
    networks = parse_ifconfig_networks(load(FIXTURE_DIR / "ifconfig__bmidgley-citizen-scientist__1.txt"))
    assert networks and all(isinstance(address, IPv4Interface) for _, address in networks)
    assert ("lo0", IPv4Interface("127.0.0.1/8")) in networks


def test_with_no_pool_set_a_range_nothing_here_uses_is_chosen_and_then_kept():
    home = [("en0", IPv4Interface("192.168.1.20/24"))]
    pool, note = choose_pool(None, home, ["10.0.1.11"])
    assert pool == "10.99.0.0/16"
    # One line: the variable, the range chosen and where it is kept.
    assert "\n" not in note and note.split()[0] == "mlx_fleet_ip_pool" and {"10.99.0.0/16,", "cluster.json"} <= set(
        note.split())
    # Recorded in the ledger, it stays when the controller moves (here: off 192.168.1.0/24), said no more.
    assert choose_pool(pool, [("en0", IPv4Interface("10.0.1.5/24"))], ["10.0.1.11"]) == ("10.99.0.0/16", None)
    # Not on a range now in use: a Mac's address, the declared management network, the controller's.
    assert choose_pool(None, [], ["192.168.4.2"])[0] == "10.99.0.0/16"
    assert choose_pool(None, [], [], "10.99.3.0/24")[0] == "192.168.0.0/16"
    moved = choose_pool("10.99.0.0/16", [("en0", IPv4Interface("10.99.7.1/24"))], [])
    assert moved[0] == "192.168.0.0/16" and {"192.168.0.0/16,", "10.99.0.0/16,"} <= set(moved[1].split())
    every = [("en0", IPv4Interface("192.168.1.1/24")), ("en1", IPv4Interface("10.99.0.1/24")),
             ("en2", IPv4Interface("172.31.0.1/24"))]
    with pytest.raises(ValueError, match="set mlx_fleet_ip_pool to a private range none of them uses"):
        choose_pool(None, every, [None])


def test_a_cable_to_a_host_outside_the_cluster_group_names_it_as_such():
    problems = check_inventory(HOSTS, {"mlx_fleet_cables": ["s1:2 -- s9:2", "s1:3 -- m7:1"]}, CONTROLLER,
                               outside=("s9", "build-box"), group="mlx_cluster")
    # One line per cable, each naming it: s9 as outside the group (which), m7 as unknown.
    outside, unknown = problems
    assert all(p.startswith("mlx_fleet_cables: ") for p in problems)
    assert "s1:2 -- s9:2:" in outside and "mlx_cluster;" in outside.split()
    assert "s1:3 -- m7:1:" in unknown and unknown.endswith("'m7'")


def _labels(problems, extra_vars) -> list[str]:
    """Where each problem's value comes from, as labelled() heads the problem's own line with it."""
    lines = labelled(problems, extra_vars)
    assert [line.partition(": ")[2] for line in lines] == [problem.line for problem in problems]
    return [line.partition(": ")[0] for line in lines]


def test_a_problem_with_an_extra_variable_is_labelled_as_one():
    problems = inventory_problems(HOSTS, {"mlx_fleet_ip_pool": "10.0.0.1/8", "mlx_fleet_backend": "mpi"}, CONTROLLER)
    assert [problem.variables for problem in problems] == [("mlx_fleet_backend",), ("mlx_fleet_ip_pool",)]
    assert _labels(problems, {"mlx_fleet_ip_pool": "10.0.0.1/8", "mlx_fleet_ip": "x"}) == [
        "inventory", "extra variable (-e)"]
    host_level = inventory_problems(HOSTS | {"s3": {"mlx_fleet_model": "studio-m2"}}, {}, CONTROLLER)
    assert [problem.variables for problem in host_level] == [("mlx_fleet_model",)]
    assert _labels(host_level, {"mlx_fleet_model": "studio-m2"}) == ["extra variable (-e)"]
    # The label comes from the variables a problem is about, not from reading its line: a -e variable that a
    # line happens to name but that is not what is wrong leaves it the inventory's.
    assert _labels(host_level, {"macos_node_local_host_name": "x"}) == ["inventory"]
    mentioned = inventory_problems(HOSTS, {"mlx_fleet_envs": ["mlx_fleet_model"]}, CONTROLLER)
    assert "mlx_fleet_model" in mentioned[0].line and mentioned[0].variables == ("mlx_fleet_envs",)
    assert _labels(mentioned, {"mlx_fleet_model": "x"}) == ["inventory"]

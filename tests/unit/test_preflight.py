"""Preflight: reading a Mac from real output formats, and judging it and the inventory."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import READS
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from conftest import FIXTURE_DIR, load
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.inventory import check_inventory
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.preflight import check_node


class FakeModule:
    """Stands in for AnsibleModule: answers each read with a recorded output (a tool without one
    is not on PATH) and counts the calls."""

    def __init__(self, outputs: dict[str, tuple[int, str, str]]):
        self.by_argv = {READS[name]: result for name, result in outputs.items()}
        self.tools = {argv[0] for argv in self.by_argv}
        self.calls: list[tuple[str, ...]] = []

    def get_bin_path(self, name):
        return "/usr/bin/" + name if name in self.tools else None

    def run_command(self, argv, environ_update=None):
        key = (argv[0].rsplit("/", 1)[-1], *argv[1:])
        self.calls.append(key)
        return self.by_argv[key]

    def fail_json(self, msg):
        raise AssertionError(msg)


def fixture(name: str) -> str:
    return load(FIXTURE_DIR / name)


def real_outputs(**overrides):
    outputs = {
        "sw_vers": (0, fixture("sw_vers__sudo-is-man-pmset__1.txt"), ""),
        # A real 'name: value' listing; the keys it lacks come back as unknown oids on stderr.
        "sysctl": (1, "hw.optional.arm64: 1\nhw.memsize: 137438953472\niogpu.wired_limit_mb: 14000\n",
                   "sysctl: unknown oid 'kern.osproductversion'\n"),
        "hardware": (0, fixture("system_profiler-SPHardwareDataType-json__mondoo-go-test__1.txt"), ""),
        "default_route": (0, fixture("route-n-get__real-world-systems__1.txt"), ""),
        "ifconfig": (0, fixture("ifconfig__bmidgley-citizen-scientist__1.txt"), ""),
        "groups": (0, "staff everyone localaccounts _appserverusr admin _appserveradm\n", ""),
        "sudo": (1, "", "sudo: a password is required\n"),
        "xcode_select": (0, "/Library/Developer/CommandLineTools\n", ""),
    }
    outputs.update(overrides)
    return outputs


def macos(module) -> dict:
    return node_facts.gather(module)["mlx_fleet_macos"]


def test_facts_from_real_captures():
    facts = macos(FakeModule(real_outputs()))
    assert facts["product_version"] == "14.2.1" and facts["build_version"] == "23C71"
    assert facts["model_identifier"].startswith("Mac") and facts["chip"].startswith("Apple M4")
    assert facts["memory_mb"] == facts["memory_bytes"] // 2**20 > 0
    assert facts["apple_silicon"] is True
    assert facts["sudo"] == "password"  # an administrator whose sudo asks for a password
    assert facts["management_interface"] == "en1"
    assert facts["command_line_tools"] is True
    assert facts["wired_limit_mb"] == 14000


@pytest.mark.parametrize(
    ("override", "key", "value"),
    [
        ({"sudo": (0, "", "")}, "sudo", "passwordless"),
        ({"groups": (0, "staff everyone\n", "")}, "sudo", "none"),
        ({"sysctl": (1, "", "sysctl: unknown oid 'hw.optional.arm64'\n")}, "apple_silicon", False),
        ({"xcode_select": (2, "", "xcode-select: error: unable to get active developer directory\n")},
         "command_line_tools", False),
    ],
)
def test_facts_variants(override, key, value):
    assert macos(FakeModule(real_outputs(**override)))[key] == value


def test_macos_and_thunderbolt_facts_in_one_round_of_reads():
    outputs = real_outputs(
        thunderbolt=(0, fixture("system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt"), ""),
        hardware_ports=(0, fixture("networksetup-listallhardwareports__network-info-script__1.txt"), ""),
        service_order=(0, fixture("networksetup-listnetworkserviceorder__network-info-script__1.txt"), ""))
    module = FakeModule(outputs)  # no ibv_devices, ibv_devinfo or rdma_ctl: a Mac before macOS 26.2
    facts = node_facts.gather(module, with_thunderbolt=True)
    assert sorted(module.calls) == sorted(READS[name] for name in outputs)  # each once, ifconfig too
    assert facts["mlx_fleet_macos"] == macos(FakeModule(real_outputs()))
    thunderbolt = facts["mlx_fleet_thunderbolt"]
    assert (thunderbolt["rdma_enabled"], thunderbolt["rdma_devices"]) == (None, [])
    cabled = [p for p in thunderbolt["ports"] if p["peers"]]
    assert [(p["receptacle"], p["peers"][0]["name"], p["hardware_port"]) for p in cabled] == [
        (1, "Mac Studio", "Thunderbolt 1")]
    assert thunderbolt["bridge"]["device"] == "bridge0"
    assert node_facts.gather(FakeModule(outputs), with_macos=False, with_thunderbolt=True) == {
        "mlx_fleet_thunderbolt": thunderbolt}


def test_unexpected_output_names_the_command():
    module = FakeModule(real_outputs(sw_vers=(0, "no such format\n", "")))
    with pytest.raises(AssertionError, match="sw_vers"):
        macos(module)


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

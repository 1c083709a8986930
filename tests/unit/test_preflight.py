"""Preflight: reading a Mac from real output formats, and judging it (the inventory: test_inventory_table)."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import READS
from ansible_collections.mlx_fleet.cluster.plugins.modules import macos_facts
from conftest import FIXTURE_DIR, load
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.preflight import check_node, same_macs


class FakeModule:
    """Stands in for AnsibleModule: answers each read with a recorded output."""

    def __init__(self, outputs: dict[str, tuple[int, str, str]]):
        self.by_argv = {READS[name]: result for name, result in outputs.items()}

    def get_bin_path(self, name):
        return "/usr/bin/" + name

    def run_command(self, argv, environ_update=None):
        return self.by_argv[(argv[0].rsplit("/", 1)[-1], *argv[1:])]

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


def test_facts_from_real_captures():
    facts = macos_facts.gather(FakeModule(real_outputs()))
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
    assert macos_facts.gather(FakeModule(real_outputs(**override)))[key] == value


def test_unexpected_output_names_the_command():
    module = FakeModule(real_outputs(sw_vers=(0, "no such format\n", "")))
    with pytest.raises(AssertionError, match="sw_vers"):
        macos_facts.gather(module)


GOOD = {
    "product_version": "26.2", "build_version": "25C56", "model_identifier": "Mac16,11", "model_name": "Mac mini",
    "chip": "Apple M4 Pro", "apple_silicon": True, "user": "admin", "sudo": "passwordless",
    "management_address": "10.0.1.21", "memory_mb": 65536, "serial_number": "H7X2K4QW9Y",
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
        ({}, {"macos_node_wired_limit_mb": 57344}, False, None),
        ({}, {"macos_node_wired_limit_mb": 60000}, False,
         "m1: macos_node_wired_limit_mb 60000 leaves macOS 5536 MB of this Mac's 65536 MB; keep at least 8192 MB "
         "for macOS: use at most 57344"),
        ({"management_address": "192.168.4.2"}, {}, False,
         "m1: management address 192.168.4.2 is inside mlx_fleet_ip_pool 192.168.0.0/16; pick a pool the Macs do not already use"),
    ],
)
def test_node_rules(change, host_vars, become_password, message):
    problems = check_node("m1", GOOD | change, host_vars, become_password=become_password)
    assert problems == ([message] if message else [])


def test_the_same_mac_under_two_names_is_named_by_both():
    read = {"m1": GOOD, "m2": GOOD | {"serial_number": "OTHER"}, "m3": GOOD}
    assert same_macs(read) == {("m1", "m3"): "m1 and m3: the same Mac (serial number H7X2K4QW9Y) is listed twice; "
                                             "keep one of them in mlx_cluster"}
    assert same_macs(read | {"m4": GOOD})[("m1", "m3", "m4")].startswith(
        "m1 and m3 and m4: the same Mac (serial number H7X2K4QW9Y) is listed 3 times")
    assert same_macs({"m1": GOOD, "m2": read["m2"]}) == {}

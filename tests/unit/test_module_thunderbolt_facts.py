"""thunderbolt_facts' entry point: main() against real outputs (tests/fixtures/macos).

Thunderbolt buses of the M5 Max MacBook Pro capture (port 1 cabled to a Mac Studio), the port
map of the M3 Ultra Mac Studio capture (Thunderbolt 1..3 = en2..en4), and TN3205's RDMA
devices, bridge and en2: one made-up Mac from real formats.
"""

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import READS
from ansible_collections.mlx_fleet.cluster.plugins.modules import thunderbolt_facts
from captures import THUNDERBOLT_OUTPUTS
from module_runner import Commands, run_module

def run(missing=(), check_mode=False, **overrides):
    commands = Commands({READS[name]: answer for name, answer in dict(THUNDERBOLT_OUTPUTS, **overrides).items()}, missing)
    return run_module(thunderbolt_facts.main, {}, commands, check_mode=check_mode), commands


def test_ports_bridge_and_rdma_in_one_call():
    result, commands = run()
    assert not result.get("failed"), result["msg"]
    assert result["changed"] is False
    assert sorted(commands.calls) == sorted(READS[name] for name in node_facts.THUNDERBOLT_READS)
    tb = result["ansible_facts"]["mlx_fleet_thunderbolt"]
    assert [(p["receptacle"], p["hardware_port"], p["device"], p["rdma_device"], p["rdma_state"])
            for p in tb["ports"]] == [(1, "Thunderbolt 1", "en2", "rdma_en2", "PORT_ACTIVE"),
                                      (2, "Thunderbolt 2", "en3", "rdma_en3", "PORT_ACTIVE"),
                                      (3, "Thunderbolt 3", "en4", "rdma_en4", "PORT_ACTIVE")]
    assert tb["ports"][0]["peers"][0]["model"] == "Mac15,14" and tb["ports"][0]["speed_gbps"] == 80
    assert tb["bridge"] == {"device": "bridge0", "active": True, "members": ["en2", "en3", "en4"],
                            "service_enabled": True}
    assert (tb["rdma_enabled"], tb["rdma_devices"]) == (True, ["rdma_en2", "rdma_en3", "rdma_en4"])


def test_check_mode_reads_the_same():
    assert run(check_mode=True)[0] == run()[0]


def test_a_mac_without_the_rdma_tools_reports_rdma_unavailable():
    result, commands = run(missing=("rdma_ctl", "ibv_devices", "ibv_devinfo"))
    tb = result["ansible_facts"]["mlx_fleet_thunderbolt"]
    assert (tb["rdma_enabled"], tb["rdma_devices"]) == (None, [])
    assert all(p["rdma_device"] is None and p["rdma_state"] is None for p in tb["ports"])
    assert not [call for call in commands.calls if call[0] in ("rdma_ctl", "ibv_devices", "ibv_devinfo")]


def test_rdma_disabled_lists_no_devices():
    header = "    device                 node GUID\n    ------              ----------------\n"
    # ibv_devinfo still prints the devices it had; with none listed, no port has an RDMA device.
    result, _ = run(rdma_ctl=(0, "disabled\n", ""), ibv_devices=(0, header, ""))
    tb = result["ansible_facts"]["mlx_fleet_thunderbolt"]
    assert (tb["rdma_enabled"], tb["rdma_devices"]) == (False, [])
    assert [(p["rdma_device"], p["rdma_state"]) for p in tb["ports"]] == [(None, None)] * 3


@pytest.mark.parametrize("override, message", [
    ({"thunderbolt": (0, "{}", "")}, "unexpected output: system_profiler SPThunderboltDataType -json: "
                                     "not SPThunderboltDataType JSON"),
    ({"service_order": (1, "", "** Error: The parameters were not valid.\n")},
     "networksetup -listnetworkserviceorder failed (exit 1): ** Error: The parameters were not valid."),
])
def test_an_unexpected_output_names_the_command(override, message):
    result, _ = run(**override)
    assert result["failed"] and result["msg"] == message


HEADER = "    device                 node GUID\n    ------              ----------------\n"


@pytest.mark.parametrize("rdma_ctl, ibv_devices, enabled, devices, unread", [
    # rdma_ctl's wording unknown, ibv_devices lists rdma_* devices (what MLX trusts): enabled.
    ((0, "RDMA: on (3 ports)\n", ""), None, True, ["rdma_en2", "rdma_en3", "rdma_en4"],
     [("rdma_ctl status", "RDMA: on (3 ports)")]),
    # rdma_ctl's wording unknown, no device listed: off.
    ((0, "on\n", ""), (0, HEADER, ""), False, [], [("rdma_ctl status", "on")]),
    # rdma_ctl exits with an error nobody has recorded: unknown, not a failed Mac.
    ((2, "", "rdma_ctl: internal error\n"), (0, HEADER, ""), False, [],
     [("rdma_ctl status", "rdma_ctl: internal error (exit 2)")]),
    # ibv_devices with RDMA off in a wording no capture shows; rdma_ctl still says disabled.
    ((0, "disabled\n", ""), (0, "No IB devices found\n", ""), False, [],
     [("ibv_devices", "No IB devices found")]),
    # ibv_devices in another layout: its rdma_* names are still read.
    (None, (0, "rdma_en2 0x1\nrdma_en3 0x2 extra\n", ""), True, ["rdma_en2", "rdma_en3"],
     [("ibv_devices", "rdma_en2 0x1\nrdma_en3 0x2 extra")]),
])
def test_an_unknown_rdma_wording_is_status_unknown_with_a_warning_not_a_failed_mac(
        rdma_ctl, ibv_devices, enabled, devices, unread):
    overrides = {k: v for k, v in (("rdma_ctl", rdma_ctl), ("ibv_devices", ibv_devices)) if v}
    result, _ = run(**overrides)
    assert not result.get("failed"), result.get("msg")
    tb = result["ansible_facts"]["mlx_fleet_thunderbolt"]
    assert (tb["rdma_status"], tb["rdma_enabled"], tb["rdma_devices"]) == ("unknown", enabled, devices)
    assert [(u["command"], u["output"]) for u in tb["rdma_unread"]] == unread
    assert not result.get("warnings")  # said by the judgment, which knows the Mac's name (test_models)


def test_it_takes_no_options():
    commands = Commands({})
    result = run_module(thunderbolt_facts.main, {"ports": [1]}, commands)
    assert result["failed"] and "Unsupported parameters" in result["msg"] and commands.calls == []

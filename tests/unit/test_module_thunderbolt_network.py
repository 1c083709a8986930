"""thunderbolt_network's entry point: main() against real networksetup outputs (tests/fixtures/macos).

The Mac is the Intel MacBook Pro of the network-info-script captures: Thunderbolt 1 = en3,
Thunderbolt 2 = en4, an enabled Thunderbolt Bridge, Wi-Fi on en0 and a Thunderbolt Ethernet
adapter on en1. What the module decides is tested in test_thunderbolt_network.py; here, what
main() runs, writes and returns.
"""

import hashlib
import json
import os
import stat

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import READS as READ_ARGV
from ansible_collections.mlx_fleet.cluster.plugins.modules import thunderbolt_network
from module_runner import Commands, fixture, run_module

HARDWARE_PORTS = fixture("networksetup-listallhardwareports__network-info-script__1.txt")
ORDER = fixture("networksetup-listnetworkserviceorder__network-info-script__1.txt")
# The same Mac once converged: the bridge disabled, a service for Thunderbolt 1 with its address.
CONVERGED_ORDER = ORDER.replace("(5) Thunderbolt Bridge", "(*) Thunderbolt Bridge").rstrip("\n") + (
    "\n\n(5) Thunderbolt 1\n(Hardware Port: Thunderbolt 1, Device: en3)\n")
# -getinfo of a manual service without a router, as networksetup-getinfo__stt-link-notes__5 prints it.
MANUAL_INFO = ("Manual Configuration\nIP address: 192.168.77.1\nSubnet mask: 255.255.255.252\nRouter: (null)\n"
               "IPv6: Automatic\nIPv6 IP address: none\nIPv6 Router: none\nEthernet Address: 32:00:19:a6:f6:20\n")
NO_ROUTES = fixture("networksetup-getadditionalroutes__wifi-debug-notes__2.txt").replace("Wi-Fi", "Thunderbolt 1")
TB1 = {"device": "en3", "hardware_port": "Thunderbolt 1", "address": "192.168.77.1", "peer": "192.168.77.2"}
# TN3205's `ifconfig en2` as this Mac's Thunderbolt 1 (en3) with the cable's address, as macOS applies the service.
EN3_CONVERGED = fixture("ifconfig-en2__apple-tn3205__1.txt").replace("en2", "en3").replace(
    "inet 169.254.205.255 netmask 0xffff0000 broadcast 169.254.255.255",
    "inet 192.168.77.1 netmask 0xfffffffc broadcast 192.168.77.3")
READS = {("networksetup", "-listallhardwareports"), ("networksetup", "-listnetworkserviceorder"),
         ("networksetup", "-getinfo", "Thunderbolt 1"), ("networksetup", "-getadditionalroutes", "Thunderbolt 1")}
FRESH_WRITES = [
    ("networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "off"),
    ("networksetup", "-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1"),
    ("networksetup", "-setmanual", "Thunderbolt 1", "192.168.77.1", "255.255.255.252"),
    # services_last: the new service's place is macOS's choice, so the order is set with it, Thunderbolt last.
    ("networksetup", "-ordernetworkservices", "Thunderbolt Ethernet", "Wi-Fi", "Bluetooth DUN", "USB Ethernet",
     "Bluetooth PAN", "Thunderbolt Bridge", "Thunderbolt 1"),
]


def mac(order=ORDER, writes=(), write_answer=(0, "", "")):
    answers = {("networksetup", "-listallhardwareports"): (0, HARDWARE_PORTS, ""),
               ("networksetup", "-listnetworkserviceorder"): (0, order, ""),
               ("networksetup", "-getinfo", "Thunderbolt 1"): (0, MANUAL_INFO, ""),
               ("networksetup", "-getadditionalroutes", "Thunderbolt 1"): (0, NO_ROUTES, ""),
               READ_ARGV["ifconfig"]: (0, EN3_CONVERGED, "")}
    answers.update((write, write_answer) for write in writes)
    return Commands(answers)


@pytest.fixture
def record(tmp_path):
    return str(tmp_path / "Library/Application Support/mlx-fleet/thunderbolt-network.json")


def run(commands, tmp_path, check_mode=False, diff=False, **args):
    module_tmp = tmp_path / "module-tmp"
    module_tmp.mkdir(exist_ok=True)
    return run_module(thunderbolt_network.main, args, commands, check_mode=check_mode, diff=diff, tmpdir=module_tmp)


def test_a_fresh_mac_gets_its_service_and_a_record(tmp_path, record):
    commands = mac(writes=FRESH_WRITES)
    result = run(commands, tmp_path, ports=[TB1], record=record)
    assert not result.get("failed"), result["msg"]
    assert result["changed"] is True
    assert commands.writes("networksetup", READS) == FRESH_WRITES
    assert result["commands"] == [list(write[1:]) for write in FRESH_WRITES]
    assert result["bridge"] == {"service": "Thunderbolt Bridge", "enabled": False}
    saved = json.loads(open(record).read())
    assert saved["created"] == {"Thunderbolt 1": {"hardware_port": "Thunderbolt 1", "device": "en3"}}
    assert saved["bridge"] == {"service": "Thunderbolt Bridge", "enabled": True}
    assert stat.S_IMODE(os.stat(record).st_mode) == 0o644
    assert os.listdir(tmp_path / "module-tmp") == []  # the file was moved into place, not copied


def test_check_mode_runs_no_write_and_writes_no_record(tmp_path, record):
    commands = mac(writes=FRESH_WRITES)
    result = run(commands, tmp_path, check_mode=True, diff=True, ports=[TB1], record=record)
    assert result["changed"] is True and result["commands"] == [list(write[1:]) for write in FRESH_WRITES]
    assert commands.writes("networksetup", READS) == []
    assert not os.path.exists(record)
    assert [d["before_header"] for d in result["diff"]] == ["Thunderbolt Bridge (before)", "Thunderbolt 1 (before)",
                                                            "service order (before)"]
    assert result["diff"][1]["before"] == "service: absent\n"


def test_a_converged_mac_is_not_changed(tmp_path, record):
    commands = mac(order=CONVERGED_ORDER)
    result = run(commands, tmp_path, diff=True, ports=[TB1], record=record)
    assert (result["changed"], result["commands"], result["diff"]) == (False, [], [])
    assert commands.writes("networksetup", READS) == []
    assert ("networksetup", "-getinfo", "Thunderbolt 1") in commands.calls
    assert not os.path.exists(record)


# What `mlx.distributed_config --auto-setup` runs on a Mac: `sudo ifconfig en3 inet 192.168.0.1 netmask
# 255.255.255.252`, kept by macOS until a reboot while the service still says 192.168.77.1.
READDRESSED = EN3_CONVERGED.replace("inet 192.168.77.1 netmask 0xfffffffc broadcast 192.168.77.3",
                                    "inet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3")
PUT_BACK = [("ifconfig", "en3", "inet", "192.168.0.1", "-alias"),
            ("ifconfig", "en3", "inet", "192.168.77.1", "netmask", "255.255.255.252")]


def test_a_port_readdressed_by_hand_gets_its_service_address_back_live(tmp_path, record):
    commands = mac(order=CONVERGED_ORDER, writes=PUT_BACK)
    commands.answers[READ_ARGV["ifconfig"]] = (0, READDRESSED, "")
    result = run(commands, tmp_path, diff=True, ports=[TB1], record=record)
    assert not result.get("failed"), result["msg"]
    assert (result["changed"], result["commands"]) == (True, [])  # the service was right: networksetup untouched
    assert result["ifconfig_commands"] == [list(step[1:]) for step in PUT_BACK]
    assert commands.writes("ifconfig", {READ_ARGV["ifconfig"]}) == PUT_BACK
    assert result["services"][0]["live_before"] == ["192.168.0.1/30"]
    assert [(d["before"], d["after"]) for d in result["diff"]] == [("192.168.0.1/30\n", "192.168.77.1/30\n")]
    assert not os.path.exists(record)  # nothing for state=absent to put back: the service is as it was


def test_check_mode_names_the_live_fix_and_runs_none(tmp_path, record):
    commands = mac(order=CONVERGED_ORDER)
    commands.answers[READ_ARGV["ifconfig"]] = (0, READDRESSED, "")
    result = run(commands, tmp_path, check_mode=True, ports=[TB1], record=record)
    assert result["changed"] is True and result["ifconfig_commands"] == [list(step[1:]) for step in PUT_BACK]
    assert commands.writes("ifconfig", {READ_ARGV["ifconfig"]}) == []


def test_absent_puts_the_network_back_and_removes_the_record(tmp_path, record):
    run(mac(writes=FRESH_WRITES), tmp_path, ports=[TB1], record=record)
    undo = [("networksetup", "-removenetworkservice", "Thunderbolt 1"),
            ("networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "on")]
    commands = mac(order=CONVERGED_ORDER, writes=undo)
    result = run(commands, tmp_path, state="absent", record=record)
    assert result["changed"] is True and commands.writes("networksetup", READS) == undo
    assert not os.path.exists(record)
    again = run(mac(order=ORDER), tmp_path, state="absent", record=record)
    assert (again["changed"], again["commands"]) == (False, [])


@pytest.mark.parametrize("port, message", [
    ({"device": "en0", "hardware_port": "Wi-Fi"}, "en0 (Wi-Fi): not a Thunderbolt port"),
    ({"device": "en0", "hardware_port": "Thunderbolt 1"}, "en0 (Wi-Fi): not a Thunderbolt port"),
    # A Thunderbolt-to-Ethernet adapter is an Ethernet port, whatever its name says.
    ({"device": "en1", "hardware_port": "Thunderbolt Ethernet"}, "en1 (Thunderbolt Ethernet): not a Thunderbolt port"),
])
def test_a_port_that_is_not_thunderbolt_is_refused_before_anything_is_written(tmp_path, record, port, message):
    commands = mac()
    result = run(commands, tmp_path, ports=[dict(TB1, **port)], record=record)
    assert result["failed"] and result["msg"] == (
        message + "; thunderbolt_network configures only Thunderbolt ports (this Mac's: Thunderbolt 1 = en3, "
        "Thunderbolt 2 = en4); fix the cable plan (mlx_fleet_cables) so it names them")
    assert "\n" not in result["msg"]
    assert commands.writes("networksetup", READS) == [] and not os.path.exists(record)


def test_a_write_without_root_fails_naming_the_fix(tmp_path, record):
    commands = mac(writes=FRESH_WRITES, write_answer=(14, "", "** Error: Command requires admin privileges.\n"))
    result = run(commands, tmp_path, ports=[TB1], record=record)
    assert result["failed"] and result["msg"] == (
        "networksetup -setnetworkserviceenabled 'Thunderbolt Bridge' off failed (exit 14): ** Error: Command "
        "requires admin privileges.; writing needs root (become: true)")
    # The record was written first: a run cut short still knows what it may have created.
    assert json.loads(open(record).read())["bridge"] == {"service": "Thunderbolt Bridge", "enabled": True}


def test_an_unreadable_service_names_the_command(tmp_path, record):
    commands = mac(order=CONVERGED_ORDER)
    commands.answers[("networksetup", "-getinfo", "Thunderbolt 1")] = (0, "-bash: networksetup: Permission denied\n", "")
    result = run(commands, tmp_path, ports=[TB1], record=record)
    assert result["failed"] and result["msg"].startswith("unexpected output: networksetup -getinfo: unexpected line")


@pytest.mark.parametrize("args, message", [
    ({"state": "gone"}, "value of state must be one of: present, absent, got: gone"),
    ({"ports": [{"device": "en3", "hardware_port": "Thunderbolt 1", "address": "192.168.77.1"}]},
     "missing required arguments: peer found in ports"),
    ({"bridge": "off"}, "value of bridge must be one of: disabled, enabled, unchanged, got: off"),
])
def test_arguments_are_checked(tmp_path, record, args, message):
    commands = mac()
    result = run(commands, tmp_path, record=record, **args)
    assert result["failed"] and result["msg"] == message
    assert commands.calls == []


# read_ports: the Thunderbolt reads of thunderbolt_facts, from real captures (the M5 Max's buses and
# TN3205's bridge0, RDMA devices); macOS takes bridge0 down when its service is disabled.
BRIDGE_UP = fixture("ifconfig-bridge0__apple-tn3205__1.txt")
PORT_READS = {
    READ_ARGV["thunderbolt"]: (0, fixture("system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt"), ""),
    READ_ARGV["ibv_devices"]: (0, fixture("ibv_devices__apple-tn3205__3.txt"), ""),
    READ_ARGV["ibv_devinfo"]: (0, fixture("ibv_devinfo__apple-tn3205__1.txt"), ""),
    READ_ARGV["rdma_ctl"]: (0, "enabled\n", ""),
}


def test_read_ports_returns_the_ports_as_they_are_after_the_writes(tmp_path, record):
    commands = mac(writes=FRESH_WRITES)
    commands.answers.update(PORT_READS)
    bridge_down = BRIDGE_UP.replace("status: active", "status: inactive")
    commands.answers[READ_ARGV["ifconfig"]] = [(0, BRIDGE_UP + EN3_CONVERGED, ""), (0, bridge_down + EN3_CONVERGED, "")]
    result = run(commands, tmp_path, ports=[TB1], record=record, read_ports=True)
    assert not result.get("failed"), result["msg"]
    assert commands.writes("networksetup", READS) == FRESH_WRITES
    # Read before the writes (with the plan's reads) and again after them; the fact is the second read.
    assert commands.calls.count(READ_ARGV["thunderbolt"]) == 2
    last_read = max(i for i, call in enumerate(commands.calls) if call == READ_ARGV["thunderbolt"])
    assert commands.calls.index(FRESH_WRITES[-1]) < last_read
    tb = result["ansible_facts"]["mlx_fleet_thunderbolt"]
    assert tb["bridge"]["active"] is False
    assert [p["receptacle"] for p in tb["ports"]] == [1, 2, 3]


def test_read_ports_on_a_converged_mac_is_one_round_of_reads(tmp_path, record):
    commands = mac(order=CONVERGED_ORDER)
    commands.answers.update(PORT_READS)
    commands.answers[READ_ARGV["ifconfig"]] = (0, BRIDGE_UP + EN3_CONVERGED, "")
    result = run(commands, tmp_path, ports=[TB1], record=record, read_ports=True)
    assert result["changed"] is False
    assert commands.calls.count(READ_ARGV["thunderbolt"]) == 1
    assert commands.calls.count(READ_ARGV["hardware_ports"]) == 1
    assert result["ansible_facts"]["mlx_fleet_thunderbolt"]["rdma_devices"] == ["rdma_en2", "rdma_en3", "rdma_en4"]


def test_without_read_ports_no_port_is_read(tmp_path, record):
    commands = mac(order=CONVERGED_ORDER)
    result = run(commands, tmp_path, ports=[TB1], record=record)
    assert "ansible_facts" not in result and "hostfiles" not in result
    assert READ_ARGV["thunderbolt"] not in commands.calls


def test_hostfile_dir_reports_each_hostfiles_sha256_or_none(tmp_path, record):
    folder = tmp_path / "opt-mlx-fleet"
    folder.mkdir()
    (folder / "hostfile.json").write_text('{"backend": "jaccl"}')
    (folder / "hostfile.held").write_text("held: os-update in progress\n")
    result = run(mac(order=CONVERGED_ORDER), tmp_path, ports=[TB1], record=record, hostfile_dir=str(folder))
    assert result["hostfiles"] == {"hostfile.json": hashlib.sha256(b'{"backend": "jaccl"}').hexdigest(),
                                   "hostfile-ring.json": None,
                                   "hostfile.held": hashlib.sha256(b"held: os-update in progress\n").hexdigest()}


# The same converged Mac after someone put Thunderbolt 1 first (exo's setup, a hand edit, an update).
TB_FIRST = "An asterisk (*) denotes that a network service is disabled.\n(1) Thunderbolt 1\n" \
    "(Hardware Port: Thunderbolt 1, Device: en3)\n\n" + CONVERGED_ORDER.split("\n", 1)[1].replace(
        "\n\n(5) Thunderbolt 1\n(Hardware Port: Thunderbolt 1, Device: en3)\n", "\n")
LAST = ("networksetup", "-ordernetworkservices", "Thunderbolt Ethernet", "Wi-Fi", "Bluetooth DUN", "USB Ethernet",
        "Bluetooth PAN", "Thunderbolt 1", "Thunderbolt Bridge")


def test_the_thunderbolt_services_are_put_last_in_the_service_order(tmp_path, record):
    commands = mac(order=TB_FIRST, writes=[LAST])
    checked = run(commands, tmp_path, check_mode=True, diff=True, ports=[TB1], record=record)
    assert checked["changed"] is True and checked["commands"] == [list(LAST[1:])]
    assert commands.writes("networksetup", READS) == []
    order = checked["diff"][0]
    assert order["before_header"] == "service order (before)" and order["before"].startswith("Thunderbolt 1\n")
    assert order["after"].splitlines() == list(LAST[2:])

    result = run(commands, tmp_path, ports=[TB1], record=record)
    assert result["changed"] is True and commands.writes("networksetup", READS) == [LAST]
    assert not os.path.exists(record)  # nothing to put back: the order is not recorded

    kept = mac(order=TB_FIRST)
    assert run(kept, tmp_path, ports=[TB1], record=record, services_last=False)["changed"] is False
    assert kept.writes("networksetup", READS) == []

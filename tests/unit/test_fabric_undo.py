"""fabric_undo (thunderbolt_network state=absent) puts back exactly what was there: a bridge that was
off stays off, a Mac never configured is left alone, and the record survives two runs in a row."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import thunderbolt_services as tn
from conftest import FIXTURE_DIR, load

# An Intel MacBook Pro with Thunderbolt 1 = en3, Thunderbolt 2 = en4 and an enabled Thunderbolt Bridge.
HW = mp.parse_hardware_ports(load(FIXTURE_DIR / "networksetup-listallhardwareports__network-info-script__1.txt"))
ORDER = mp.parse_network_service_order(
    load(FIXTURE_DIR / "networksetup-listnetworkserviceorder__network-info-script__1.txt"))
TB1 = {"device": "en3", "hardware_port": "Thunderbolt 1", "address": "192.168.77.1", "prefix": 30, "peer": "192.168.77.2"}
TB2 = {"device": "en4", "hardware_port": "Thunderbolt 2", "address": "192.168.77.5", "prefix": 30, "peer": "192.168.77.6"}
BRIDGE_ON = ["-setnetworkserviceenabled", "Thunderbolt Bridge", "on"]
BRIDGE_OFF = ["-setnetworkserviceenabled", "Thunderbolt Bridge", "off"]


def bridge(services, enabled):
    return [dict(s, enabled=enabled) if s["device"] == "bridge0" else s for s in services]


def with_services(services, *ports):
    """The service list after a run created a service for each port."""
    return services + [{"name": p["hardware_port"], "enabled": True, "order": 9, "hardware_port": p["hardware_port"],
                        "device": p["device"]} for p in ports]


def manual(port):
    return {"enabled": True, "ipv4": {"method": "Manual", "address": port["address"], "mask": "255.255.255.252",
                                      "router": None}, "routes": []}


def present(services, ports, record, configs=None):
    return tn.plan_present(tn.check_ports(list(ports), HW), "disabled", services, configs or {}, record)


def test_a_bridge_that_was_off_stays_off():
    off = bridge(ORDER, False)
    commands, record, _, _, _ = present(off, [TB1], tn.empty_record())
    assert BRIDGE_OFF not in commands and record["bridge"] is None
    undo = tn.plan_absent([], "disabled", with_services(off, TB1), {}, record)[0]
    assert undo == [["-removenetworkservice", "Thunderbolt 1"]]


def test_a_mac_never_configured_is_left_alone():
    for enabled in (True, False):
        assert tn.plan_absent([], "disabled", bridge(ORDER, enabled), {}, tn.empty_record())[0] == []


def test_the_record_survives_two_runs_in_a_row():
    first, record, _, _, _ = present(ORDER, [TB1], tn.empty_record())
    assert BRIDGE_OFF in first
    after_first = with_services(bridge(ORDER, False), TB1)
    # The same plan again: nothing to do, the record stays as it is (the module writes it only on change).
    again, unchanged, _, _, _ = present(after_first, [TB1], record, {"Thunderbolt 1": manual(TB1)})
    assert again == [] and unchanged == record
    # A second cable: the record gains its service and keeps what the first run recorded.
    second, record, _, _, _ = present(after_first, [TB1, TB2], record, {"Thunderbolt 1": manual(TB1)})
    assert second == [["-createnetworkservice", "Thunderbolt 2", "Thunderbolt 2"],
                      ["-setmanual", "Thunderbolt 2", "192.168.77.5", "255.255.255.252"]]
    assert sorted(record["created"]) == ["Thunderbolt 1", "Thunderbolt 2"]
    assert record["bridge"] == {"service": "Thunderbolt Bridge", "enabled": True}
    undo, left, _, _, _ = tn.plan_absent([], "disabled", with_services(after_first, TB2), {}, record)
    assert undo == [["-removenetworkservice", "Thunderbolt 1"], ["-removenetworkservice", "Thunderbolt 2"], BRIDGE_ON]
    assert tn.is_empty(left)

"""The pure part of thunderbolt_network: what it decides to change from what the Mac printed
(real output formats from tests/fixtures/macos)."""

import re

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import thunderbolt_services as tn
from ansible_collections.mlx_fleet.cluster.plugins.modules import thunderbolt_network
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import network_step
from conftest import FIXTURE_DIR, load

# An Intel MacBook Pro with Thunderbolt 1 = en3, Thunderbolt 2 = en4 and an enabled Thunderbolt Bridge.
HW = mp.parse_hardware_ports(load(FIXTURE_DIR / "networksetup-listallhardwareports__network-info-script__1.txt"))
ORDER = mp.parse_network_service_order(
    load(FIXTURE_DIR / "networksetup-listnetworkserviceorder__network-info-script__1.txt"))
DHCP_INFO = mp.parse_network_service_info(load(FIXTURE_DIR / "networksetup-getinfo__network-info-script__1.txt"))
ROUTES = mp.parse_additional_routes(load(FIXTURE_DIR / "networksetup-getadditionalroutes__route-notes-blog__1.txt"))
# An M3 Ultra Mac Studio: Thunderbolt 1..6 = en2..en7.
STUDIO_HW = mp.parse_hardware_ports(load(FIXTURE_DIR / "networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt"))

TB1 = {"device": "en3", "hardware_port": "Thunderbolt 1", "address": "192.168.77.1", "prefix": 30, "peer": "192.168.77.2"}
MASK = "255.255.255.252"
MANUAL_INFO = "Manual Configuration\nIP address: 192.168.77.1\nSubnet mask: 255.255.255.252\nRouter: (null)\n" \
              "IPv6: Automatic\nIPv6 IP address: none\nIPv6 Router: none\nEthernet Address: 32:00:19:a6:f6:20\n"


def service(name, hardware_port, device, enabled=True):
    return {"name": name, "enabled": enabled, "order": 9 if enabled else None, "hardware_port": hardware_port,
            "device": device}


def present(services, configs=None, ports=(TB1,), bridge="disabled", record=None):
    return tn.plan_present(tn.check_ports(list(ports), HW), bridge, services, configs or {},
                           record or tn.empty_record())


def test_the_routes_fixture_parses_to_tuples():
    assert ROUTES == [["192.168.0.0", "255.255.0.0", "192.168.129.1"], ["10.0.0.0", "255.0.0.0", "192.168.129.1"]]
    assert mp.parse_additional_routes("There are no additional IPv4 routes on Thunderbolt 1.\n") == []
    with pytest.raises(ValueError, match="getadditionalroutes"):
        mp.parse_additional_routes("** Error: The parameters were not valid.\n")


def test_fresh_mac_creates_the_service_and_disables_the_bridge():
    commands, record, results, bridge, diffs = present(ORDER)
    assert commands == [
        ["-setnetworkserviceenabled", "Thunderbolt Bridge", "off"],
        ["-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1"],
        ["-setmanual", "Thunderbolt 1", "192.168.77.1", MASK],  # no router: never a default route
    ]
    assert record["created"] == {"Thunderbolt 1": {"hardware_port": "Thunderbolt 1", "device": "en3"}}
    assert record["bridge"] == {"service": "Thunderbolt Bridge", "enabled": True}
    assert record["previous"] == {}
    assert bridge == {"service": "Thunderbolt Bridge", "enabled": False}
    assert results[0]["created"] and results[0]["ipv4"]["address"] == "192.168.77.1"
    assert [d["before_header"] for d in diffs] == ["Thunderbolt Bridge (before)", "Thunderbolt 1 (before)"]
    assert diffs[1]["before"] == "service: absent\n"
    assert "ipv4: Manual 192.168.77.1 mask 255.255.255.252 router none" in diffs[1]["after"]


def test_converged_mac_changes_nothing():
    services = [s if s["device"] != "bridge0" else dict(s, enabled=False, order=None) for s in ORDER]
    services.append(service("Thunderbolt 1", "Thunderbolt 1", "en3"))
    config = tn.snapshot(services[-1], mp.parse_network_service_info(MANUAL_INFO), [])
    commands, record, results, _, diffs = present(services, {"Thunderbolt 1": config})
    assert commands == [] and diffs == [] and record == tn.empty_record()
    assert results[0]["changed"] is False


def test_existing_dhcp_service_is_recorded_before_it_is_changed():
    services = ORDER + [service("Thunderbolt 1", "Thunderbolt 1", "en3", enabled=False)]
    before = tn.snapshot(services[-1], DHCP_INFO, ROUTES)
    commands, record, _, _, _ = present(services, {"Thunderbolt 1": before}, bridge="unchanged")
    assert commands == [["-setmanual", "Thunderbolt 1", "192.168.77.1", MASK],
                        # 192.168.0.0/16 covers the peer: dropped; 10.0.0.0/8 kept
                        ["-setadditionalroutes", "Thunderbolt 1", "10.0.0.0", "255.0.0.0", "192.168.129.1"],
                        ["-setnetworkserviceenabled", "Thunderbolt 1", "on"]]
    assert record["created"] == {} and record["bridge"] is None
    assert record["previous"]["Thunderbolt 1"]["ipv4"] == {"method": "DHCP", "address": None, "mask": None,
                                                          "router": None}
    assert record["previous"]["Thunderbolt 1"]["routes"] == ROUTES
    assert record["previous"]["Thunderbolt 1"]["enabled"] is False


def test_an_additional_route_covering_the_peer_is_removed_others_kept():
    services = ORDER + [service("Thunderbolt 1", "Thunderbolt 1", "en3")]
    # 192.168.0.0/16 via 192.168.129.1 covers the peer 192.168.77.2 and would steer it off the cable.
    config = tn.snapshot(services[-1], mp.parse_network_service_info(MANUAL_INFO), ROUTES)
    commands = present(services, {"Thunderbolt 1": config}, bridge="unchanged")[0]
    assert commands == [["-setadditionalroutes", "Thunderbolt 1", "10.0.0.0", "255.0.0.0", "192.168.129.1"]]


def test_a_second_run_keeps_the_first_previous_configuration():
    services = ORDER + [service("Thunderbolt 1", "Thunderbolt 1", "en3")]
    first = tn.empty_record()
    first["previous"]["Thunderbolt 1"] = {"enabled": False, "ipv4": {"method": "DHCP"}, "routes": [],
                                          "hardware_port": "Thunderbolt 1", "device": "en3"}
    config = tn.snapshot(services[-1], mp.parse_network_service_info(MANUAL_INFO), [])
    moved = dict(TB1, address="192.168.77.2", peer="192.168.77.1")
    _, record, _, _, _ = present(services, {"Thunderbolt 1": config}, ports=[moved], record=first)
    assert record["previous"] == first["previous"]


def test_other_ports_and_services_are_left_alone():
    services = ORDER + [service("Thunderbolt 2", "Thunderbolt 2", "en4")]
    commands = present(services, {"Thunderbolt 2": {"enabled": True, "ipv4": {}, "routes": []}}, bridge="unchanged")[0]
    assert all("Thunderbolt 2" not in c for c in commands)


def test_bridge_enabled_and_unchanged():
    assert present(ORDER, bridge="enabled")[0][0] == ["-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1"]
    assert present(ORDER, bridge="unchanged")[3] == {"service": "Thunderbolt Bridge", "enabled": True}
    off = [dict(s, enabled=False) if s["device"] == "bridge0" else s for s in ORDER]
    assert present(off, bridge="enabled")[0][0] == ["-setnetworkserviceenabled", "Thunderbolt Bridge", "on"]


@pytest.mark.parametrize("port, message", [
    (dict(TB1, hardware_port="Thunderbolt 3", device="en5"),
     "Thunderbolt 3 (en5): this Mac has no hardware port 'Thunderbolt 3' (its Thunderbolt ports: "
     "Thunderbolt 1 = en3, Thunderbolt 2 = en4); fix the cable plan"),
    (dict(TB1, device="en4"), "Thunderbolt 1 (en4): on this Mac Thunderbolt 1 is en3, not en4"),
    (dict(TB1, peer="192.168.78.2"), "peer 192.168.78.2 is not a host address of 192.168.77.0/30"),
    (dict(TB1, address="192.168.77.3"), "address 192.168.77.3 is not a host address of 192.168.77.0/30"),
    (dict(TB1, peer="192.168.77.1"), "address and peer are both 192.168.77.1"),
    (dict(TB1, address="192.168.77.x"), "Thunderbolt 1 (en3): Only decimal digits permitted in 'x' in '192.168.77.x'; "
                                        "give IPv4 addresses"),
    (dict(TB1, prefix=32), "prefix 32 is not a point-to-point network"),
])
def test_errors_name_the_port_and_the_fix(port, message):
    with pytest.raises(tn.PlanError, match=re.escape(message)):
        tn.check_ports([port], HW)


@pytest.mark.parametrize("device, hardware_port, actual", [
    ("en0", "Ethernet", "Ethernet"),
    ("en0", "Thunderbolt 1", "Ethernet"),  # the device's own port decides
    ("en1", "Wi-Fi", "Wi-Fi"),
    ("bridge0", "Thunderbolt Bridge", "Thunderbolt Bridge"),
    ("en9", "Thunderbolt 1", "Ethernet Adapter (en9)"),
    ("en20", "Ethernet", "Ethernet"),  # a device this Mac does not have, asked as Ethernet
])
def test_only_thunderbolt_ports_are_configured(device, hardware_port, actual):
    # The M3 Ultra Mac Studio: en0 Ethernet, en1 Wi-Fi, Thunderbolt 1..6 = en2..en7.
    port = dict(TB1, device=device, hardware_port=hardware_port)
    with pytest.raises(tn.PlanError) as error:
        tn.check_ports([port], STUDIO_HW)
    assert str(error.value) == (
        "{0} ({1}): not a Thunderbolt port; thunderbolt_network configures only Thunderbolt ports (this Mac's: "
        "Thunderbolt 1 = en2, Thunderbolt 2 = en3, Thunderbolt 3 = en4, Thunderbolt 4 = en5, Thunderbolt 5 = en6, "
        "Thunderbolt 6 = en7); fix the cable plan (mlx_fleet_cables) so it names them".format(device, actual))


def test_a_port_listed_twice_is_an_error():
    with pytest.raises(tn.PlanError, match="listed twice"):
        tn.check_ports([TB1, dict(TB1, address="192.168.77.5", peer="192.168.77.6")], HW)


def test_mac_studio_ports_and_a_31():
    ports = tn.check_ports([{"device": "en7", "hardware_port": "Thunderbolt 6", "address": "10.1.0.0", "prefix": 31,
                             "peer": "10.1.0.1"}], STUDIO_HW)
    assert ports[0]["mask"] == "255.255.255.254"


def test_a_service_named_like_the_port_on_another_hardware_port_is_an_error():
    services = ORDER + [service("Thunderbolt 1", "Thunderbolt Ethernet", "en1")]
    with pytest.raises(tn.PlanError, match="a network service named 'Thunderbolt 1' exists for another hardware port"):
        present(services)


def test_the_service_named_like_the_hardware_port_is_preferred():
    services = ORDER + [service("TB one", "Thunderbolt 1", "en3"), service("Thunderbolt 1", "Thunderbolt 1", "en3")]
    assert tn.service_for(tn.check_ports([TB1], HW)[0], services)["name"] == "Thunderbolt 1"


# --- state=absent --------------------------------------------------------------------------------

def recorded():
    record = tn.empty_record()
    record["created"]["Thunderbolt 1"] = {"hardware_port": "Thunderbolt 1", "device": "en3"}
    record["previous"]["Thunderbolt 2"] = {"enabled": False, "ipv4": {"method": "DHCP", "address": None, "mask": None,
                                                                      "router": None},
                                           "routes": ROUTES, "hardware_port": "Thunderbolt 2", "device": "en4"}
    record["bridge"] = {"service": "Thunderbolt Bridge", "enabled": True}
    return record


def converged_services():
    services = [dict(s, enabled=False) if s["device"] == "bridge0" else s for s in ORDER]
    return services + [service("Thunderbolt 1", "Thunderbolt 1", "en3"), service("Thunderbolt 2", "Thunderbolt 2", "en4")]


def test_absent_removes_created_services_restores_the_others_and_the_bridge():
    tb2 = {"enabled": True, "ipv4": {"method": "Manual", "address": "192.168.77.5", "mask": MASK, "router": None},
           "routes": []}
    commands, record, results, bridge, diffs = tn.plan_absent([], "disabled", converged_services(),
                                                              {"Thunderbolt 2": tb2}, recorded())
    assert commands == [
        ["-removenetworkservice", "Thunderbolt 1"],
        ["-setdhcp", "Thunderbolt 2"],
        ["-setadditionalroutes", "Thunderbolt 2", "192.168.0.0", "255.255.0.0", "192.168.129.1",
         "10.0.0.0", "255.0.0.0", "192.168.129.1"],
        ["-setnetworkserviceenabled", "Thunderbolt 2", "off"],
        ["-setnetworkserviceenabled", "Thunderbolt Bridge", "on"],
    ]
    assert tn.is_empty(record)
    assert bridge == {"service": "Thunderbolt Bridge", "enabled": True}
    assert diffs[0]["after"] == "service: absent\n"


def test_absent_restores_a_previous_manual_configuration_with_its_router():
    record = tn.empty_record()
    record["previous"]["Thunderbolt 2"] = {"enabled": True, "ipv4": {"method": "Manual", "address": "10.0.0.2",
                                                                     "mask": "255.255.255.0", "router": "10.0.0.1"},
                                           "routes": [], "hardware_port": "Thunderbolt 2", "device": "en4"}
    now = {"enabled": True, "ipv4": {"method": "Manual", "address": "192.168.77.5", "mask": MASK, "router": None},
           "routes": []}
    commands = tn.plan_absent([], "unchanged", converged_services(), {"Thunderbolt 2": now}, record)[0]
    assert commands == [["-setmanual", "Thunderbolt 2", "10.0.0.2", "255.255.255.0", "10.0.0.1"]]


def test_absent_without_a_record_leaves_the_mac_alone():
    commands, record, _, _, _ = tn.plan_absent([], "disabled", converged_services(), {}, tn.empty_record())
    assert commands == []
    assert tn.is_empty(record)
    assert tn.plan_absent([], "enabled", converged_services(), {}, tn.empty_record())[0] == [
        ["-setnetworkserviceenabled", "Thunderbolt Bridge", "on"]]


def test_absent_for_one_port_keeps_the_rest_and_the_bridge():
    commands, record, _, _, _ = tn.plan_absent([{"hardware_port": "Thunderbolt 1"}], "disabled",
                                               converged_services(), {}, recorded())
    assert commands == [["-removenetworkservice", "Thunderbolt 1"]]
    assert list(record["previous"]) == ["Thunderbolt 2"] and record["bridge"] is not None


def test_absent_twice_changes_nothing():
    services = [dict(s, enabled=True) for s in ORDER]
    commands, _, _, _, _ = tn.plan_absent([], "disabled", services, {}, tn.empty_record())
    assert commands == []


# No capture shows -getinfo of a service with IPv4 off; it names no method (as far as public sources
# tell), and the module must not depend on any wording for it.
NO_METHOD_INFO = "IPv6: Automatic\nIPv6 IP address: none\nIPv6 Router: none\nEthernet Address: 32:00:19:a6:f6:20\n"


def test_a_service_whose_getinfo_names_no_method_is_set_and_not_restored():
    current = tn.snapshot(service("Thunderbolt 1", "Thunderbolt 1", "en3"),
                          mp.parse_network_service_info(NO_METHOD_INFO), [])
    assert current["ipv4"] == {"method": None, "address": None, "mask": None, "router": None}
    services = ORDER + [service("Thunderbolt 1", "Thunderbolt 1", "en3")]
    commands, record, _, _, _ = present(services, {"Thunderbolt 1": current}, bridge="unchanged")
    assert commands == [["-setmanual", "Thunderbolt 1", "192.168.77.1", MASK]]
    assert record["previous"]["Thunderbolt 1"]["ipv4"]["method"] is None

    now = tn.snapshot(service("Thunderbolt 1", "Thunderbolt 1", "en3"), mp.parse_network_service_info(MANUAL_INFO), [])
    commands, _, results, _, _ = tn.plan_absent([], "unchanged", services, {"Thunderbolt 1": now}, record)
    assert commands == []  # nothing networksetup could set is known
    assert results[0]["warning"] == (
        "Thunderbolt 1 (en3): its IPv4 configuration before mlx-fleet (no method named by networksetup -getinfo) "
        "cannot be put back with networksetup, so it stays Manual 192.168.77.1 mask 255.255.255.252 router none; "
        "set it in System Settings > Network")


def test_documentation_matches_the_argument_spec():
    import yaml

    doc = yaml.safe_load(thunderbolt_network.DOCUMENTATION)
    assert doc["module"] == "thunderbolt_network"
    yaml.safe_load(thunderbolt_network.EXAMPLES)
    assert all("description" in v for v in yaml.safe_load(thunderbolt_network.RETURN).values())

    def compare(options, spec):
        assert sorted(options) == sorted(spec)
        for name, option in options.items():
            assert option["type"] == spec[name]["type"], name
            assert option.get("default") == spec[name].get("default"), name
            assert option.get("choices") == spec[name].get("choices"), name
            assert bool(option.get("required")) == bool(spec[name].get("required")), name
            if "suboptions" in option:
                compare(option["suboptions"], spec[name]["options"])

    compare(doc["options"], thunderbolt_network.ARGUMENT_SPEC)


# --- state=present, exclusive: a cable moved to another port ---------------------------------------

def test_exclusive_puts_back_the_ports_it_configured_that_left_the_fabric():
    """The cable moved from Thunderbolt 1 (service created) to Thunderbolt 2 (an earlier DHCP service,
    recorded): with Thunderbolt 2 listed, Thunderbolt 1's service goes and the bridge record stays."""
    record = tn.empty_record()
    record["created"]["Thunderbolt 1"] = {"hardware_port": "Thunderbolt 1", "device": "en3"}
    record["bridge"] = {"service": "Thunderbolt Bridge", "enabled": True}
    tb2 = dict(TB1, device="en4", hardware_port="Thunderbolt 2")
    dhcp = {"enabled": True, "ipv4": {"method": "DHCP", "address": None, "mask": None, "router": None}, "routes": []}
    commands, after, results, _, _ = tn.plan_present(tn.check_ports([tb2], HW), "disabled", converged_services(),
                                                     {"Thunderbolt 2": dhcp}, record, exclusive=True)
    assert commands == [["-removenetworkservice", "Thunderbolt 1"], ["-setmanual", "Thunderbolt 2", "192.168.77.1", MASK]]
    assert after["created"] == {} and list(after["previous"]) == ["Thunderbolt 2"] and after["bridge"] is not None
    assert results[0]["removed"] is True
    # Then the cable moves back: Thunderbolt 2 was there before mlx-fleet, so it gets its DHCP back.
    manual = {"enabled": True, "ipv4": {"method": "Manual", "address": "192.168.77.1", "mask": MASK, "router": None},
              "routes": []}
    services = [s for s in converged_services() if s["name"] != "Thunderbolt 1"]
    commands, again, _, _, _ = tn.plan_present(tn.check_ports([TB1], HW), "disabled", services,
                                               {"Thunderbolt 2": manual}, after, exclusive=True)
    assert commands == [["-setdhcp", "Thunderbolt 2"], ["-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1"],
                        ["-setmanual", "Thunderbolt 1", "192.168.77.1", MASK]]
    assert list(again["created"]) == ["Thunderbolt 1"] and again["previous"] == {}


def test_without_exclusive_or_a_record_other_ports_stay():
    commands = tn.plan_present(tn.check_ports([TB1], HW), "unchanged", converged_services(), {}, recorded())[0]
    assert all("Thunderbolt 2" not in c for c in commands)
    # A port the module never configured is not in the record: left alone however exclusive.
    commands = tn.plan_present(tn.check_ports([TB1], HW), "unchanged", converged_services(),
                               {"Thunderbolt 1": {"enabled": True, "ipv4": {}, "routes": []}}, tn.empty_record(),
                               exclusive=True)[0]
    assert all("Thunderbolt 2" not in c for c in commands)


def test_the_record_keeps_what_is_still_to_put_back_until_it_is():
    old = tn.empty_record()
    old["created"]["Thunderbolt 1"] = {"hardware_port": "Thunderbolt 1", "device": "en3"}
    new = tn.empty_record()
    new["created"]["Thunderbolt 2"] = {"hardware_port": "Thunderbolt 2", "device": "en4"}
    assert set(tn._union(old, new)["created"]) == {"Thunderbolt 1", "Thunderbolt 2"}


def _configured(device="en3"):
    return {"service": "Thunderbolt 1", "hardware_port": "Thunderbolt 1", "device": device, "changed": False,
            "ipv4": {"method": "Manual", "address": "192.168.77.1", "mask": "255.255.255.252", "router": None}}


@pytest.mark.parametrize("live, steps", [
    (["192.168.77.1/30"], []),
    # An alias beside the service's address: only the alias goes.
    (["192.168.77.1/30", "192.168.0.1/30"], [["en3", "inet", "192.168.0.1", "-alias"]]),
    # The service's address with another mask is removed and given again with the service's.
    (["192.168.77.1/24"], [["en3", "inet", "192.168.77.1", "-alias"],
                           ["en3", "inet", "192.168.77.1", "netmask", "255.255.255.252"]]),
    ([], [["en3", "inet", "192.168.77.1", "netmask", "255.255.255.252"]]),
])
def test_plan_live_gives_a_configured_port_exactly_its_service_address(live, steps):
    interfaces = {"en3": {"inet": [{"address": a.split("/")[0], "prefixlen": int(a.split("/")[1])} for a in live]}}
    results = [_configured()]
    planned, diffs = tn.plan_live(results, {"Thunderbolt 1"}, interfaces)
    assert planned == steps
    assert results[0]["changed"] is bool(steps) and len(diffs) == (1 if steps else 0)


def test_plan_live_leaves_a_port_whose_service_changes_to_macos():
    results = [dict(_configured(), changed=True)]
    assert tn.plan_live(results, {"Thunderbolt 1"}, {"en3": {"inet": []}}) == ([], [])


def test_plan_live_leaves_a_service_put_back_for_a_port_no_longer_cabled():
    # exclusive's results for ports not listed: one already as it was before (DHCP), one gone by hand.
    results = [{"service": "Thunderbolt 2", "hardware_port": "Thunderbolt 2", "device": "en4", "restored": False,
                "changed": False, "ipv4": {"method": "DHCP", "address": None, "mask": None, "router": None}},
               {"service": "Thunderbolt 3", "hardware_port": "Thunderbolt 3", "device": "en5", "removed": False,
                "changed": False}]
    assert tn.plan_live(results, {"Thunderbolt 1"}, {"en4": {"inet": []}, "en5": {"inet": []}}) == ([], [])


def converged_mac(addresses=("192.168.77.1",)):
    """What the preflight reads (macos_facts' network) on a Mac whose TB1 has its service and address."""
    services = [s if s["device"] != "bridge0" else dict(s, enabled=False, order=None) for s in ORDER]
    services = [s for s in services if not mp.is_thunderbolt_port(s.get("hardware_port") or "")] + [
        s for s in services if mp.is_thunderbolt_port(s.get("hardware_port") or "")] + [
        service("Thunderbolt 1", "Thunderbolt 1", "en3")]
    config = tn.snapshot(services[-1], mp.parse_network_service_info(MANUAL_INFO), [])
    return {"hardware_ports": HW, "services": services, "configs": {"Thunderbolt 1": config},
            "record": tn.empty_record(), "interfaces": {"en3": {"inet": [{"address": a, "prefixlen": 30}
                                                                         for a in addresses]}}}


def test_the_controller_runs_the_network_step_only_where_the_modules_plan_differs():
    """The fabric's differs_on: thunderbolt_network's own plan (plan_state) from each Mac's preflight read."""
    macs = {"converged": converged_mac(), "address-gone": converged_mac(addresses=()),
            "stray-address": converged_mac(addresses=("192.168.77.1", "10.9.9.9")),
            "bridge-on": dict(converged_mac(), services=ORDER + [service("Thunderbolt 1", "Thunderbolt 1", "en3")]),
            "unread": None}
    names = sorted(macs)
    network = dict.fromkeys(names, [TB1])
    assert network_step.macs_that_differ(names, network, macs, "disabled") == [
        "address-gone", "bridge-on", "stray-address", "unread"]
    # A port the module would refuse: it runs, and says why.
    assert network_step.macs_that_differ(["converged"], {"converged": [dict(TB1, device="en9")]}, macs,
                                         "disabled") == ["converged"]


def test_the_preflight_reads_the_services_of_addressed_ports_and_the_recorded_ones():
    services = ORDER + [service("Thunderbolt 1", "Thunderbolt 1", "en3"), service("Thunderbolt 2", "Thunderbolt 2", "en4")]
    record = dict(tn.empty_record(), previous={"Old TB": {}})
    interfaces = {"en3": {"inet": [{"address": "192.168.77.1", "prefixlen": 30}]}, "en4": {"inet": []}}
    assert tn.configs_to_read_ahead(services, record, interfaces) == ["Thunderbolt 1", "Old TB"]
    # A planned port whose service was not read: the network step runs there, and reads it.
    mac = dict(converged_mac(), configs={})
    assert network_step.macs_that_differ(["m"], {"m": [TB1]}, {"m": mac}, "disabled") == ["m"]

"""macos_parsers against the real captures in tests/fixtures/macos."""

import re

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from captures import parser_for
from conftest import FIXTURE_DIR, load

CAPTURES = sorted(FIXTURE_DIR.glob("*__*.txt"))


def parse(name):
    path = next(p for p in CAPTURES if p.name == name)
    return parser_for(name.split("__")[0])(load(path))


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_every_capture_has_a_parser_and_parses(path):
    # A new reference or fixture file fails here until its prefix is mapped to a parser.
    prefix = path.name.split("__")[0]
    try:
        parser = parser_for(prefix)
    except KeyError:
        pytest.fail("no parser mapped for file prefix {0!r}".format(prefix))
    parser(load(path))


def test_captures_exist():
    assert len(list(FIXTURE_DIR.glob("*__*.txt"))) >= 27


# --- Thunderbolt ------------------------------------------------------------------------------------

def test_thunderbolt_m5_max_one_cable_to_mac_studio():
    ports = parse("system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt")
    assert [p["receptacle"] for p in ports] == [1, 2, 3]
    port1, port2, port3 = ports
    assert port1["bus"] == "thunderboltusb4_bus_0"
    assert port1["domain_uuid"] == "817DCFA4-B481-4100-80FC-91C7AA969F0B"
    assert (port1["connected"], port1["speed_gbps"], port1["speed_is_max"]) == (True, 80, False)
    assert port1["peers"] == [{"domain_uuid": "28CA4C30-A263-4C55-B302-953416D0B209",
                               "model": "Mac15,14", "name": "Mac Studio", "direct": True}]
    assert port1["devices"] == []
    for idle in (port2, port3):
        assert (idle["connected"], idle["speed_gbps"], idle["speed_is_max"]) == (False, 120, True)
        assert idle["peers"] == [] and idle["devices"] == []
    assert port3["domain_uuid"] == "AD089FC0-E653-4FFE-B00A-DFF110B2F9A1"


def test_thunderbolt_mac_behind_a_dock_is_not_direct_and_drive_has_no_uuid():
    # Shape from the reference README: drives and docks in _items, a Mac nested one level deeper.
    text = """{"SPThunderboltDataType": [{"_name": "thunderboltusb4_bus_0",
      "domain_uuid_key": "AAAA", "receptacle_1_tag": {"current_speed_key": "40 Gb/s",
        "receptacle_id_key": "1", "receptacle_status_key": "receptacle_connected"},
      "_items": [{"_name": "Dock", "vendor_name_key": "Dock Vendor", "_items": [
          {"_name": "Mac mini", "device_name_key": "Mac16,11", "domain_uuid_key": "BBBB"}]},
        {"_name": "SSD", "vendor_name_key": "Drive Vendor"}]}]}"""
    (port,) = mp.parse_thunderbolt_json(text)
    assert port["speed_gbps"] == 40 and not port["speed_is_max"]
    assert port["peers"] == [{"domain_uuid": "BBBB", "model": "Mac16,11", "name": "Mac mini",
                              "direct": False}]
    assert port["devices"] == [{"name": "Dock", "vendor": "Dock Vendor", "depth": 1},
                               {"name": "SSD", "vendor": "Drive Vendor", "depth": 1}]


# --- networksetup -----------------------------------------------------------------------------------

def test_hardware_ports_mac_studio_thunderbolt_map():
    ports = parse("networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt")
    assert ports[0] == {"hardware_port": "Ethernet", "device": "en0"}
    assert len(ports) == 14 and "ethernet_address" not in ports[0]
    assert mp.thunderbolt_interfaces(ports) == {1: "en2", 2: "en3", 3: "en4", 4: "en5",
                                                5: "en6", 6: "en7"}


def test_hardware_ports_with_ethernet_addresses():
    ports = parse("networksetup-listallhardwareports__network-info-script__1.txt")
    assert ports[0] == {"hardware_port": "Bluetooth DUN", "device": "Bluetooth-Modem",
                        "ethernet_address": None}
    assert ports[4] == {"hardware_port": "Thunderbolt 1", "device": "en3",
                        "ethernet_address": "32:00:19:a6:f6:20"}
    assert mp.thunderbolt_interfaces(ports) == {1: "en3", 2: "en4"}


def test_service_order_with_disabled_service():
    services = parse("networksetup-listnetworkserviceorder__network-info-script__1.txt")
    assert [s["name"] for s in services] == ["Thunderbolt Ethernet", "Wi-Fi", "Bluetooth DUN",
                                             "USB Ethernet", "Bluetooth PAN", "Thunderbolt Bridge"]
    assert services[3] == {"name": "USB Ethernet", "enabled": False, "order": None,
                           "hardware_port": "USB-Ethernet", "device": "en5"}
    assert services[5] == {"name": "Thunderbolt Bridge", "enabled": True, "order": 5,
                           "hardware_port": "Thunderbolt Bridge", "device": "bridge0"}


def test_getinfo_dhcp():
    info = parse("networksetup-getinfo__network-info-script__1.txt")
    assert info == {"configuration": "DHCP", "ip_address": "130.235.16.211",
                    "subnet_mask": "255.255.254.0", "router": "130.235.16.1", "client_id": None,
                    "ipv6": "Automatic", "ipv6_ip_address": None, "ipv6_router": None,
                    "ethernet_address": "00:3e:e1:be:06:59"}


def test_getinfo_dhcp_without_a_lease_has_no_address_lines():
    assert parse("networksetup-getinfo__wifi-debug-notes__2.txt") == {
        "configuration": "DHCP", "client_id": None, "ipv6": "Automatic", "ipv6_ip_address": None,
        "ipv6_router": None, "wi-fi_id": "f8:1e:df:e8:46:66"}


def test_getinfo_router_null_and_manual():
    dhcp = parse("networksetup-getinfo__usb-lan-blog__3.txt")
    assert (dhcp["configuration"], dhcp["ip_address"], dhcp["router"]) == ("DHCP", "169.254.31.164", None)
    manual = parse("networksetup-getinfo__netswitch-blog__4.txt")
    assert (manual["configuration"], manual["ip_address"], manual["subnet_mask"], manual["router"]) == (
        "Manual", "192.168.0.129", "255.255.255.0", "192.168.0.1")
    no_router = parse("networksetup-getinfo__stt-link-notes__5.txt")
    assert (no_router["configuration"], no_router["router"]) == ("Manual", None)


def test_getinfo_without_a_method_line_names_no_method():
    # No capture of an IPv4-off service exists; whatever it prints, no method is read into it.
    info = mp.parse_network_service_info("IPv6: Automatic\nIPv6 IP address: none\nIPv6 Router: none\n")
    assert info == {"configuration": None, "ipv6": "Automatic", "ipv6_ip_address": None, "ipv6_router": None}
    for wrong in ("", "Wi-Fi is not a recognized network service.\n", "-bash: networksetup: command not found\n"):
        with pytest.raises(ValueError, match="networksetup -getinfo"):
            mp.parse_network_service_info(wrong)


def test_additional_routes_none_and_two():
    assert parse("networksetup-getadditionalroutes__wifi-debug-notes__2.txt") == []
    assert parse("networksetup-getadditionalroutes__route-notes-blog__1.txt") == [
        ["192.168.0.0", "255.255.0.0", "192.168.129.1"], ["10.0.0.0", "255.0.0.0", "192.168.129.1"]]
    for wrong in ("There are no additional routes.\n", "** Error: The parameters were not valid.\n"):
        with pytest.raises(ValueError, match="getadditionalroutes"):
            mp.parse_additional_routes(wrong)


# --- RDMA ---------------------------------------------------------------------------------------------

def test_ibv_devices_tabs_mac_studio():
    devices = parse("ibv_devices__ml-explore-mlx-docs__1.txt")
    assert [d["device"] for d in devices] == ["rdma_en2", "rdma_en3", "rdma_en5", "rdma_en4",
                                              "rdma_en6", "rdma_en7"]
    assert devices[0]["node_guid"] == "8096a9d9edbaac05"


def test_ibv_devices_spaces_mac_mini():
    devices = parse("ibv_devices__apple-tn3205__3.txt")
    assert devices == [{"device": "rdma_en2", "node_guid": "e0c5797d9c8fac05"},
                       {"device": "rdma_en3", "node_guid": "e1c5797d9c8fac05"},
                       {"device": "rdma_en4", "node_guid": "e2c5797d9c8fac05"}]


def test_ibv_devices_header_only_is_empty():
    assert mp.parse_ibv_devices("device                 node GUID\n------  ----------------\n") == []


def test_ibv_devinfo_with_elisions():
    devices = parse("ibv_devinfo__apple-tn3205__1.txt")
    assert devices == {name: {"transport": "Thunderbolt", "ports": {1: "PORT_ACTIVE"}, "gids": {}}
                       for name in ("rdma_en2", "rdma_en3", "rdma_en4")}  # no -v: nothing said about GIDs


# ibv_devinfo -v's port section as rdma-core prints it ("GID[%3d]:\t\t%s", ", RoCE v2" for a RoCE GID:
# libibverbs/examples/devinfo.c); no Mac capture was found (tests/fixtures/macos/README.md).
VERBOSE_PORT = ("hca_id:\trdma_en2\n\ttransport:\t\t\tThunderbolt (100)\n\tphys_port_cnt:\t\t\t1\n"
                "\t\t\t\t\tBAD_PKEY_CNTR\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
                "\t\t\tlink_layer:\t\tEthernet\n\t\t\tgid_tbl_len:\t\t16\n{gids}\n")


def test_ibv_devinfo_verbose_lists_each_ports_gids():
    gids = "\t\t\tGID[  0]:\t\tfe80::347c:94ff:fecd:45c4, RoCE v2\n\t\t\tGID[  1]:\t\t::ffff:169.254.10.1, RoCE v2\n"
    device = mp.parse_ibv_devinfo(VERBOSE_PORT.format(gids=gids))["rdma_en2"]
    assert device["ports"] == {1: "PORT_ACTIVE"}
    assert device["gids"] == {1: ["fe80::347c:94ff:fecd:45c4", "::ffff:169.254.10.1"]}
    # A GID without the type (an InfiniBand GID) and a port without an IPv4-mapped one.
    assert mp.parse_ibv_devinfo(VERBOSE_PORT.format(gids="\t\t\tGID[  0]:\t\tfe80::1\n"))["rdma_en2"]["gids"] == {
        1: ["fe80::1"]}
    assert mp.parse_ibv_devinfo(VERBOSE_PORT.format(gids=""))["rdma_en2"]["gids"] == {1: []}


def test_rdma_ctl_status():
    assert mp.parse_rdma_ctl_status("enabled\n") is True
    assert mp.parse_rdma_ctl_status("disabled\n") is False


# --- ifconfig, route ----------------------------------------------------------------------------------

def test_ifconfig_thunderbolt_ip_interface():
    (name, en2), = parse("ifconfig-en2__apple-tn3205__1.txt").items()
    assert name == "en2" and en2["status"] == "active" and "UP" in en2["flags"]
    assert en2["ether"] == "36:4d:04:ea:4e:40" and en2["mtu"] == 1500
    assert en2["inet"] == [{"address": "169.254.205.255", "prefixlen": 16,
                            "broadcast": "169.254.255.255"}]
    assert en2["inet6"] == ["fe80::1021:1bac:fe1:b5e3%en2"]


def test_ifconfig_bridge_members_with_elisions():
    bridge = parse("ifconfig-bridge0__apple-tn3205__1.txt")["bridge0"]
    assert bridge["members"] == ["en2", "en3", "en4"] and bridge["status"] == "active"


def test_ifconfig_many_interfaces():
    interfaces = parse("ifconfig__bmidgley-citizen-scientist__1.txt")
    assert len(interfaces) == 17
    assert interfaces["stf0"]["flags"] == [] and interfaces["stf0"]["status"] is None
    assert interfaces["lo0"]["inet"][0]["prefixlen"] == 8
    assert interfaces["bridge0"]["members"] == ["en1", "en2", "en3", "en4"]
    assert interfaces["bridge100"]["inet"] == [{"address": "192.168.64.1", "prefixlen": 24,
                                                "broadcast": "192.168.64.255"}]
    assert interfaces["en8"]["status"] == "active" and interfaces["en0"]["status"] == "inactive"


def test_ifconfig_two_space_indented_listing():
    (name, en7), = parse("ifconfig-en7__usb-lan-blog__2.txt").items()
    assert name == "en7" and en7["ether"] == "00:e0:4b:6a:2f:bc" and en7["status"] == "active"
    assert en7["inet"] == [{"address": "169.254.31.164", "prefixlen": 24, "broadcast": "169.254.255.255"}]


def test_route_get():
    route = parse("route-n-get__real-world-systems__1.txt")
    assert route["gateway"] == "192.168.1.1" and route["interface"] == "en1"
    assert route["destination"] == "default" and "GATEWAY" in route["flags"]


# --- identity -----------------------------------------------------------------------------------------

def test_sw_vers_of_a_security_response():
    assert parse("sw_vers-security-response__zenn-dart-templates-47655362706__1.txt") == {
        "product_name": "macOS", "product_version": "13.4.1", "ProductVersionExtra": "(c)",
        "build_version": "22F770820d"}


def test_sw_vers():
    assert parse("sw_vers__sudo-is-man-pmset__1.txt") == {
        "product_name": "macOS", "product_version": "14.2.1", "build_version": "23C71"}


def test_hardware_json_mac_studio():
    hw = parse("system_profiler-SPHardwareDataType-json__inventory-go-test-macstudio__2.txt")
    assert hw["model_identifier"] == "Mac14,14" and hw["model_name"] == "Mac Studio"
    assert hw["chip"] == "Apple M2 Ultra" and hw["cpu_cores"] == 24
    assert hw["core_groups"] == [16, 8, 0] and hw["memory_bytes"] == 64 << 30
    assert hw["activation_lock"] is True


def test_hardware_json_identifiers():
    hw = parse("system_profiler-SPHardwareDataType-json__mondoo-go-test__1.txt")
    assert hw["platform_uuid"] == "6D9530A4-90A2-5A28-B133-3D6011CC7772"
    assert hw["provisioning_udid"] == "00008400-001E20D40168401E"
    assert hw["serial_number"] == "C6XW4X7JX1" and hw["memory_bytes"] == 48 << 30
    assert hw["boot_rom_version"] == hw["os_loader_version"] == "11881.140.96"


def test_hardware_json_four_core_groups():
    hw = parse("system_profiler-SPHardwareDataType-json__tirekick-fixtures-m5max__3.txt")
    assert (hw["model_identifier"], hw["cpu_cores"], hw["core_groups"]) == ("Mac17,6", 18,
                                                                             [6, 0, 12])


def test_kern_boottime_seconds():
    assert parse("sysctl-kern.boottime__chef-ohai-uptime__1.txt") == 1232765114
    assert mp.parse_kern_boottime("{ sec = 1700000000, usec = 5 } Tue Nov 14 22:13:20 2023\n") == 1700000000
    with pytest.raises(ValueError, match="kern.boottime"):
        mp.parse_kern_boottime("kern.boottime: 1700000000")


def test_fdesetup_status_on_and_off_and_nothing_else():
    assert parse("fdesetup-status__macos-vm-guide__1.txt") is False
    assert parse("fdesetup-status-on__swift-status-checker__1.txt") is True
    with pytest.raises(ValueError, match="fdesetup status"):
        mp.parse_fdesetup_status("FileVault is Encrypting.\n")


def test_sysctl_n_in_order():
    assert parse("sysctl-n-hw.memsize-hw.ncpu-machdep.cpu.brand_string"
                 "__inventory-go-test-macstudio__1.txt") == {
        "hw.memsize": "68719476736", "hw.ncpu": "24", "machdep.cpu.brand_string": "Apple M2 Ultra"}


def test_sysctl_n_unknown_names_are_none():
    text = load(FIXTURE_DIR / "sysctl-unknown-oid__msbg-bench-notes__1.txt")
    assert mp.parse_sysctl_n(text, ["hw.perflevel0.count", "hw.perflevel1.count"]) == {
        "hw.perflevel0.count": None, "hw.perflevel1.count": None}
    assert mp.parse_sysctl(text) == {"hw.perflevel0.count": None, "hw.perflevel1.count": None}


def test_sysctl_name_value_and_set_forms():
    perf = parse("sysctl-hw.perflevel__tirekick-fixtures-m5max__1.txt")
    assert perf["hw.nperflevels"] == "2" and perf["hw.perflevel0.name"] == "Super"
    assert parse("sysctl-w-iogpu.wired_limit_mb__mlx-lm-notes__1.txt") == {
        "iogpu.wired_limit_mb": "14000"}


# --- pmset, scutil, launchctl -------------------------------------------------------------------------

def test_pmset_g_sections_and_notes():
    settings = parse("pmset-g__go-pmset-table-test__1.txt")
    assert settings["System-wide power settings"] == {"SleepDisabled": 0}
    in_use = settings["Currently in use"]
    assert in_use["sleep"] == 1 and in_use["hibernatefile"] == "/var/vm/sleepimage"
    assert in_use["womp"] == 1 and in_use["displaysleep"] == 10


def test_pmset_key_with_spaces():
    in_use = parse("pmset-g__amostras-swift-m1__2.txt")["Currently in use"]
    assert in_use["Sleep On Power Button"] == 1 and in_use["sleep"] == 1


def test_pmset_custom_per_power_source():
    custom = parse("pmset-g-custom__go-pmset-table-test__1.txt")
    assert sorted(custom) == ["AC Power", "Battery Power"]
    assert custom["AC Power"]["displaysleep"] == 10 and custom["Battery Power"]["displaysleep"] == 2


def test_scutil_get():
    assert parse("scutil-get-LocalHostName__chinese-blog-hostname__1.txt") == "alibaba-inc"
    assert parse("scutil-get-HostName__chinese-blog-hostname__1.txt") is None


def test_launchctl_print_not_loaded():
    assert parse("launchctl-print__chirality-ci__1.txt") is None


# --- wrong input is an error naming the command ---------------------------------------------------------

@pytest.mark.parametrize("parser, command", [
    (mp.parse_sw_vers, "sw_vers"),
    (mp.parse_sysctl, "sysctl"),
    (mp.parse_hardware_json, "SPHardwareDataType"),
    (mp.parse_thunderbolt_json, "SPThunderboltDataType"),
    (mp.parse_pmset, "pmset"),
    (mp.parse_network_service_order, "-listnetworkserviceorder"),
    (mp.parse_hardware_ports, "-listallhardwareports"),
    (mp.parse_network_service_info, "-getinfo"),
    (mp.parse_ifconfig, "ifconfig"),
    (mp.parse_route_get, "route"),
    (mp.parse_launchctl_print, "launchctl"),
    (mp.parse_ibv_devices, "ibv_devices"),
    (mp.parse_ibv_devinfo, "ibv_devinfo"),
    (mp.parse_rdma_ctl_status, "rdma_ctl"),
])
def test_wrong_format_raises_value_error_naming_the_command(parser, command):
    with pytest.raises(ValueError, match=re.escape(command)):
        parser("-bash: command not found\n")


def test_sysctl_n_count_mismatch_raises():
    with pytest.raises(ValueError, match="sysctl -n"):
        mp.parse_sysctl_n("1\n", ["a", "b"])


def test_scutil_multiline_raises():
    with pytest.raises(ValueError, match="scutil --get"):
        mp.parse_scutil_get("a\nb\n")


def test_capture_reads_a_slow_commands_output_to_the_end_in_the_c_locale(monkeypatch):
    from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import capture
    monkeypatch.setenv("PYTHONPATH", "/tmp/ansible_modlib.zip")
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    # Silent for over run_command's 1 s select timeout, then everything at once, as system_profiler does.
    script = 'sleep 1.2; printf "%s %s\\n" "$LC_ALL" "${PYTHONPATH:-none}"; printf "é\\n" >&2; exit 3'
    assert capture(None, ["sh", "-c", script]) == (3, "C none\n", "é\n")


def test_softwareupdate_list_one_macos_update_on_macos_26():
    listed = parse("softwareupdate-list__topgrade-rs-topgrade-issue-2123__1.txt")
    assert listed["warnings"] == []
    assert listed["updates"] == [{
        "label": "macOS Tahoe 26.5.2-25F84", "title": "macOS Tahoe 26.5.2", "version": "26.5.2", "build": "25F84",
        "size_kib": 2630358, "recommended": True, "action": "restart", "macos": True}]


def test_softwareupdate_list_beta_build_and_older_size_unit():
    (update,) = parse("softwareupdate-list__wavebirddash-install-or-defer-issue-47__2.txt")["updates"]
    assert (update["build"], update["version"], update["size_kib"], update["macos"]) == ("20C5061b", "11.1", 2746951, True)


def test_softwareupdate_list_nothing_pending():
    assert parse("softwareupdate-list-none__elliotweiser-ansible-osx-command-line-tools-issue-65__1.txt") == {
        "updates": [], "warnings": []}


def test_softwareupdate_list_other_software_is_not_a_macos_update_and_unknown_lines_warn():
    unknown = "Something new from Apple"
    text = ("* Label: Command Line Tools for Xcode-16.0\n"
            "\tTitle: Command Line Tools for Xcode, Version: 16.0, Size: 751793KiB, Recommended: YES, \n"
            "* Label: macOS Tahoe 26.5.2-25F84\n"
            "\tTitle: macOS Tahoe 26.5.2, Version: 26.5.2, Size: 2630358KiB, Recommended: YES, Action: restart, \n"
            f"{unknown}\n")
    listed = mp.parse_softwareupdate_list(text)
    assert [(u["label"], u["macos"], u["build"]) for u in listed["updates"]] == [
        ("Command Line Tools for Xcode-16.0", False, None), ("macOS Tahoe 26.5.2-25F84", True, "25F84")]
    [warning] = listed["warnings"]  # the command, and the line left out quoted
    assert warning.startswith("softwareupdate --list: ") and warning.endswith(repr(unknown))


@pytest.mark.parametrize("log_line", ["softwareupdate-log-line__mlx-fleet-issue-26__1.txt",
                                      "softwareupdate-log-line__rosetta-blog-34886512342__2.txt"])
def test_softwareupdate_list_leaves_out_its_own_log_lines(log_line):
    listing = load(FIXTURE_DIR / "softwareupdate-list__topgrade-rs-topgrade-issue-2123__1.txt")
    noisy = mp.parse_softwareupdate_list(load(FIXTURE_DIR / log_line) + "\n" + listing)
    assert noisy == mp.parse_softwareupdate_list(listing)
    assert parse(log_line) == {"updates": [], "warnings": []}
    # Another tool's log line is no wording of softwareupdate's.
    other = load(FIXTURE_DIR / log_line).replace("softwareupdate[", "MATLAB_maca64[")
    assert len(mp.parse_softwareupdate_list(other)["warnings"]) == 1


def test_softwareupdate_list_security_response_build():
    # The build form sw_vers prints for a Rapid Security Response / Background Security Improvement.
    build = parse("sw_vers-security-response__zenn-dart-templates-47655362706__1.txt")["build_version"]
    listed = mp.parse_softwareupdate_list(
        "* Label: macOS Tahoe 26.3.1 (a)-25D771280a\n* Label: macOS Ventura 13.4.1 (c)-{0}\n".format(build))
    assert [u["build"] for u in listed["updates"]] == ["25D771280a", "22F770820d"]


def test_softwareupdate_install_download_started():
    assert parse("softwareupdate-install__wavebirddash-install-or-defer-issue-47__1.txt") == {
        "started": True, "error": None, "last": "Downloaded: macOS Big Sur 11.1 Beta 2"}
    refused = mp.parse_softwareupdate_install("Software Update Tool\n\nFinding available software\n"
                                              "failed to authorize for installation\n")
    assert refused["started"] is False and refused["error"] == "failed to authorize for installation"


def test_defaults_read_of_a_boolean():
    assert parse("defaults-read-missing__cis-macos-audit-44398335449__1.txt") is None
    assert parse("defaults-read-missing__disa-stig-macos-10.13-25318873837__2.txt") is None
    assert mp.parse_defaults_bool("2015-08-20 11:44:23.212 defaults[1593:98737] \n1\n") is True
    assert mp.parse_defaults_bool("0\n") is False and mp.parse_defaults_bool("1\n") is True
    with pytest.raises(ValueError, match="defaults read"):
        mp.parse_defaults_bool("{\n    Foo = 1;\n}\n")

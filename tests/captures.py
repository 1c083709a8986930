"""Real captures (tests/fixtures/macos) as the tests use them: the parser for each capture, and one
made-up Mac's Thunderbolt reads answered from real outputs."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from module_runner import fixture


def _sysctl_n(prefix):
    # sysctl-n-<name>-<name>...: the file name lists the names asked for, in order.
    names = prefix[len("sysctl-n-"):].split("-")
    return lambda text: mp.parse_sysctl_n(text, names)


def parser_for(prefix):
    """File-name prefix (before the first '__') -> the parser for that command's output."""
    if prefix.startswith("sysctl-n-"):
        return _sysctl_n(prefix)
    if prefix.startswith("ifconfig"):
        return mp.parse_ifconfig
    if prefix == "sysctl-kern.boottime":
        return mp.parse_kern_boottime
    if prefix.startswith("fdesetup-status"):
        return mp.parse_fdesetup_status
    if prefix.startswith("sysctl"):
        return mp.parse_sysctl
    if prefix.startswith("scutil-get-"):
        return mp.parse_scutil_get
    return PARSERS[prefix]


PARSERS = {
    "system_profiler-SPThunderboltDataType-json": mp.parse_thunderbolt_json,
    "system_profiler-SPHardwareDataType-json": mp.parse_hardware_json,
    "networksetup-listallhardwareports": mp.parse_hardware_ports,
    "networksetup-listnetworkserviceorder": mp.parse_network_service_order,
    "networksetup-getinfo": mp.parse_network_service_info,
    "networksetup-getadditionalroutes": mp.parse_additional_routes,
    "ibv_devices": mp.parse_ibv_devices,
    "ibv_devinfo": mp.parse_ibv_devinfo,
    "sw_vers": mp.parse_sw_vers,
    "sw_vers-security-response": mp.parse_sw_vers,
    "pmset-g": mp.parse_pmset,
    "pmset-g-custom": mp.parse_pmset,
    "route-n-get": mp.parse_route_get,
    "launchctl-print": mp.parse_launchctl_print,
    "softwareupdate-list": mp.parse_softwareupdate_list,
    "softwareupdate-list-none": mp.parse_softwareupdate_list,
    "softwareupdate-log-line": mp.parse_softwareupdate_list,
    "softwareupdate-install": mp.parse_softwareupdate_install,
    "defaults-read-missing": mp.parse_defaults_bool,
}


# What thunderbolt_facts reads, answered from captures: the Thunderbolt buses of the M5 Max MacBook Pro
# capture (port 1 cabled to a Mac Studio), the port map of the M3 Ultra Mac Studio capture (Thunderbolt
# 1..3 = en2..en4), and TN3205's RDMA devices, bridge and en2: one made-up Mac from real formats.
THUNDERBOLT_OUTPUTS = {
    "thunderbolt": (0, fixture("system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt"), ""),
    "hardware_ports": (0, fixture("networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt"), ""),
    "service_order": (0, fixture("networksetup-listnetworkserviceorder__network-info-script__1.txt"), ""),
    "ifconfig": (0, fixture("ifconfig-en2__apple-tn3205__1.txt") + fixture("ifconfig-bridge0__apple-tn3205__1.txt"), ""),
    "ibv_devices": (0, fixture("ibv_devices__apple-tn3205__3.txt"), ""),
    "ibv_devinfo": (0, fixture("ibv_devinfo__apple-tn3205__1.txt"), ""),
    # No capture of `rdma_ctl status` exists; Apple's TN3205 says it prints "enabled" or "disabled".
    "rdma_ctl": (0, "enabled\n", ""),
}

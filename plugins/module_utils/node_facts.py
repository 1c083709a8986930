# -*- coding: utf-8 -*-
"""What mlx-fleet knows about a Mac, read in one module call: the Mac itself (``mlx_fleet_macos``)
and its Thunderbolt ports with their RDMA state (``mlx_fleet_thunderbolt``, docs/fabric.md).

Every read is in macos_commands.READS and they all run at once (run_reads), so one call costs
about as long as its slowest tool. Stdlib only, Python 3.9 compatible: it runs on the Mac.
"""

from __future__ import absolute_import, division, print_function

import os
import pwd

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import output_of, parse_or_fail, parse_or_warn, run_reads

__metaclass__ = type

MACOS_READS = ("sw_vers", "sysctl", "hardware", "hardware_ports", "ifconfig", "groups", "sudo", "xcode_select")
THUNDERBOLT_READS = ("thunderbolt", "hardware_ports", "service_order", "ifconfig", "ibv_devices", "ibv_devinfo",
                     "rdma_ctl")
MISSING = 127  # run_reads' exit status for a tool not on PATH


def management(module, interfaces, hardware_ports):
    """(interface, hardware port, address) of the SSH connection Ansible came in on, from this Mac's side."""
    value = os.environ.get("SSH_CONNECTION")
    if not value:
        module.warn("SSH_CONNECTION is not set (not an SSH session, or become dropped it), so the management "
                    "interface is unknown; run macos_facts without become")
        return None, None, None
    address = parse_or_fail(module, parsers.parse_ssh_connection, value)["server"]
    device = parsers.interface_of_address(interfaces, address)
    return device, dict((p["device"], p["hardware_port"]) for p in hardware_ports).get(device), address


def macos(module, results):
    """mlx_fleet_macos from the MACOS_READS results."""
    sw = parse_or_warn(module, parsers.parse_sw_vers, output_of(module, results, "sw_vers"))
    # sysctl reports an unknown name on stderr and exits 1; the other names still print.
    rc, out, err = results["sysctl"]
    sysctl = parse_or_warn(module, parsers.parse_sysctl, out + err)
    hardware = parse_or_fail(module, parsers.parse_hardware_json, output_of(module, results, "hardware"))
    hardware_ports = parse_or_warn(module, parsers.parse_hardware_ports, output_of(module, results, "hardware_ports"))
    interfaces = parse_or_fail(module, parsers.parse_ifconfig, output_of(module, results, "ifconfig"))
    interface, hardware_port, address = management(module, interfaces, hardware_ports)
    groups = output_of(module, results, "groups").split()
    sudo_rc = results["sudo"][0]
    account = pwd.getpwuid(os.getuid())
    return {
        "product_version": sw["product_version"],
        "build_version": sw["build_version"],
        "model_identifier": hardware["model_identifier"],
        "model_name": hardware["model_name"],
        "chip": hardware["chip"],
        "memory_bytes": hardware["memory_bytes"],
        "memory_mb": hardware["memory_bytes"] // (1 << 20),
        "serial_number": hardware["serial_number"],
        "apple_silicon": sysctl.get("hw.optional.arm64") == "1",
        "user": account.pw_name,
        "home": account.pw_dir,
        "sudo": "passwordless" if sudo_rc == 0 else ("password" if "admin" in groups else "none"),
        "management_interface": interface,
        "management_hardware_port": hardware_port,
        "management_address": address,
        "command_line_tools": results["xcode_select"][0] == 0,
        "wired_limit_mb": int(sysctl.get("iogpu.wired_limit_mb") or 0),
    }


def _rdma(module, results):
    """(rdma_enabled, devices, {device: state}); RDMA tools absent means RDMA unavailable."""
    if results["rdma_ctl"][0] == MISSING:
        return None, [], {}
    enabled = parse_or_fail(module, parsers.parse_rdma_ctl_status, output_of(module, results, "rdma_ctl"))
    if results["ibv_devices"][0] == MISSING:
        return enabled, [], {}
    listed = parse_or_warn(module, parsers.parse_ibv_devices, output_of(module, results, "ibv_devices"))
    devices = [d["device"] for d in listed]
    states = {}
    if devices:
        states = rdma_states(parse_or_fail(module, parsers.parse_ibv_devinfo, output_of(module, results, "ibv_devinfo")))
    return enabled, devices, states


def rdma_states(devinfo):
    """{RDMA device: the state of its port 1} from parsed ibv_devinfo."""
    return dict((name, dev["ports"].get(1)) for name, dev in devinfo.items())


def port_facts(receptacle, device, interfaces, rdma_devices, rdma_states_by_device):
    """One Thunderbolt port of mlx_fleet_thunderbolt: its device, RDMA device and state, IPv4 addresses."""
    rdma_device = "rdma_" + device if device and "rdma_" + device in rdma_devices else None
    return {"receptacle": receptacle, "hardware_port": "Thunderbolt {0}".format(receptacle), "device": device,
            "rdma_device": rdma_device, "rdma_state": rdma_states_by_device.get(rdma_device),
            "addresses": port_addresses(interfaces, device)}


def port_addresses(interfaces, device):
    """A port's IPv4 addresses as address/prefix (ifconfig): what the fabric's addresses are checked against."""
    return ["{0}/{1}".format(a["address"], a["prefixlen"]) for a in interfaces.get(device, {}).get("inet", [])]


def bridge_state(interfaces, services):
    """The Thunderbolt Bridge (bridge0) as ifconfig and the network service order show it."""
    bridge_if = interfaces.get("bridge0", {})
    bridge_service = [s for s in services if s.get("device") == "bridge0"]
    return {
        "device": "bridge0",
        "active": bridge_if.get("status") == "active",
        "members": bridge_if.get("members", []),
        "service_enabled": bool(bridge_service and bridge_service[0]["enabled"]),
    }


def thunderbolt(module, results):
    """mlx_fleet_thunderbolt from the THUNDERBOLT_READS results."""
    buses = parse_or_fail(module, parsers.parse_thunderbolt_json, output_of(module, results, "thunderbolt"))
    hardware_ports = parse_or_warn(module, parsers.parse_hardware_ports, output_of(module, results, "hardware_ports"))
    devices = parsers.thunderbolt_interfaces(hardware_ports)
    services = parse_or_warn(module, parsers.parse_network_service_order, output_of(module, results, "service_order"))
    interfaces = parse_or_fail(module, parsers.parse_ifconfig, output_of(module, results, "ifconfig"))
    rdma_enabled, rdma_devices, rdma_states_by_device = _rdma(module, results)

    ports = [dict(bus, **port_facts(bus["receptacle"], devices.get(bus["receptacle"]), interfaces, rdma_devices,
                                    rdma_states_by_device))
             for bus in buses]
    return {
        "ports": ports,
        "bridge": bridge_state(interfaces, services),
        "rdma_enabled": rdma_enabled,
        "rdma_devices": rdma_devices,
    }


def gather(module, with_macos=True, with_thunderbolt=False):
    """The facts asked for, {fact name: value}, from one round of reads."""
    reads = (MACOS_READS if with_macos else ()) + (THUNDERBOLT_READS if with_thunderbolt else ())
    results = run_reads(module, reads)
    facts = {}
    if with_macos:
        facts["mlx_fleet_macos"] = macos(module, results)
    if with_thunderbolt:
        facts["mlx_fleet_thunderbolt"] = thunderbolt(module, results)
    return facts

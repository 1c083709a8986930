# -*- coding: utf-8 -*-
"""A Mac's state as the facts modules report it, built from the outputs of ``run_reads``.

macos_facts, thunderbolt_facts and node_state share these builders, so the one call that reads a
whole Mac (node_state) returns exactly the facts the two smaller modules return.
Stdlib only, Python 3.9 compatible: it runs on the Mac's /usr/bin/python3.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import pwd

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import output_of, parse_or_fail

IDENTITY_READS = ("sw_vers", "sysctl", "hardware", "default_route", "ifconfig", "groups", "sudo", "xcode_select")
THUNDERBOLT_READS = ("thunderbolt", "hardware_ports", "service_order", "ifconfig", "ibv_devices", "ibv_devinfo",
                     "rdma_ctl")
MISSING = 127


def identity(module, results):
    """The fact mlx_fleet_macos (see macos_facts RETURN) from the IDENTITY_READS results."""
    sw = parse_or_fail(module, parsers.parse_sw_vers, output_of(module, results, "sw_vers"))
    # sysctl reports an unknown name on stderr and exits 1; the other names still print.
    rc, out, err = results["sysctl"]
    sysctl = parse_or_fail(module, parsers.parse_sysctl, out + err)
    hardware = parse_or_fail(module, parsers.parse_hardware_json, output_of(module, results, "hardware"))
    route = parse_or_fail(module, parsers.parse_route_get, output_of(module, results, "default_route"))
    interfaces = parse_or_fail(module, parsers.parse_ifconfig, output_of(module, results, "ifconfig"))
    mgmt = interfaces.get(route["interface"], {}).get("inet") or [{}]
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
        "management_interface": route["interface"],
        "management_address": mgmt[0].get("address"),
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
    devices = [d["device"] for d in parse_or_fail(module, parsers.parse_ibv_devices,
                                                   output_of(module, results, "ibv_devices"))]
    states = {}
    if devices:
        info = parse_or_fail(module, parsers.parse_ibv_devinfo, output_of(module, results, "ibv_devinfo"))
        states = dict((name, dev["ports"].get(1)) for name, dev in info.items())
    return enabled, devices, states


def thunderbolt(module, results):
    """The fact mlx_fleet_thunderbolt (docs/fabric.md) from the THUNDERBOLT_READS results."""
    buses = parse_or_fail(module, parsers.parse_thunderbolt_json, output_of(module, results, "thunderbolt"))
    hardware_ports = parse_or_fail(module, parsers.parse_hardware_ports, output_of(module, results, "hardware_ports"))
    devices = parsers.thunderbolt_interfaces(hardware_ports)
    services = parse_or_fail(module, parsers.parse_network_service_order, output_of(module, results, "service_order"))
    interfaces = parse_or_fail(module, parsers.parse_ifconfig, output_of(module, results, "ifconfig"))
    rdma_enabled, rdma_devices, rdma_states = _rdma(module, results)

    ports = []
    for bus in buses:
        device = devices.get(bus["receptacle"])
        rdma_device = "rdma_" + device if device and "rdma_" + device in rdma_devices else None
        port = dict(bus, hardware_port="Thunderbolt {0}".format(bus["receptacle"]), device=device,
                    rdma_device=rdma_device, rdma_state=rdma_states.get(rdma_device))
        ports.append(port)
    bridge_if = interfaces.get("bridge0", {})
    bridge_service = [s for s in services if s.get("device") == "bridge0"]
    return {
        "ports": ports,
        "bridge": {
            "device": "bridge0",
            "active": bridge_if.get("status") == "active",
            "members": bridge_if.get("members", []),
            "service_enabled": bool(bridge_service and bridge_service[0]["enabled"]),
        },
        "rdma_enabled": rdma_enabled,
        "rdma_devices": rdma_devices,
    }


def scutil_value(key, rc, out, err):
    """The name from `scutil --get KEY` (None when not set); ValueError on any other failure."""
    if rc == 0:
        return parsers.parse_scutil_get(out)
    if rc != 0 and "{0}: not set".format(key) in (out + err).splitlines():
        return None
    raise ValueError("scutil --get {0} failed (rc {1}): {2}".format(key, rc, (err or out).strip()))

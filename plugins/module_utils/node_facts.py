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
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    READS, output_of, parse_or_fail, parse_or_warn, run_reads)

__metaclass__ = type

MACOS_READS = ("sw_vers", "sysctl", "hardware", "hardware_ports", "ifconfig", "groups", "sudo", "xcode_select")
THUNDERBOLT_READS = ("thunderbolt", "hardware_ports", "service_order", "ifconfig", "ibv_devices", "ibv_devinfo",
                     "rdma_ctl")
MISSING = 127  # run_reads' exit status for a tool not on PATH


class OutsideModule:
    """What these functions ask of a module, for reads made outside one (the controller's, over plain ssh:
    verify, the watch): a read or an output they cannot use raises ValueError, a warning is dropped."""

    def fail_json(self, msg, **kwargs):
        raise ValueError(msg)

    def warn(self, msg):
        pass


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


def _read_or_unknown(results, name, parser):
    """(parsed, None), or (None, {command, output}) for an exit status or wording no real Mac has shown."""
    rc, out, err = results[name]
    if rc == 0:
        try:
            return parser(out), None
        except ValueError:
            pass
    text = (out + err).strip() if rc == 0 else "{0} (exit {1})".format((err or out).strip(), rc)
    return None, {"command": " ".join(READS[name]), "output": text}


def rdma_state(module, results):
    """(rdma_status, rdma_enabled, devices, {device: state}, unread) from the reads rdma_ctl, ibv_devices and
    ibv_devinfo (verify judges its own reads of them with it too). RDMA tools absent: status None (RDMA
    unavailable). An output of rdma_ctl or ibv_devices no real capture shows does not fail the Mac: the status is
    "unknown" and RDMA is judged by what MLX trusts, the rdma_* devices ibv_devices lists; unread: those outputs."""
    if results["rdma_ctl"][0] == MISSING:
        return None, None, [], {}, []
    unread = []
    enabled, odd = _read_or_unknown(results, "rdma_ctl", parsers.parse_rdma_ctl_status)
    status = "unknown" if odd else ("enabled" if enabled else "disabled")
    unread += [odd] if odd else []
    if results["ibv_devices"][0] == MISSING:
        devices = []
    else:
        listed, odd = _read_or_unknown(results, "ibv_devices", parsers.parse_ibv_devices)
        devices = [d["device"] for d in listed] if not odd else parsers.rdma_devices_named(odd["output"])
        unread += [odd] if odd else []
    if unread:  # either tool not understood: the state is unknown, and MLX's own test decides
        status, enabled = "unknown", bool([d for d in devices if d.startswith("rdma_")])
    # Said by the RDMA judgment on the controller (plugin_utils.rdma.readiness.unread_warnings), which knows the Mac's name.
    states = {}
    if devices:
        states = rdma_states(parse_or_fail(module, parsers.parse_ibv_devinfo, output_of(module, results, "ibv_devinfo")))
    return status, enabled, devices, states, unread


def rdma_states(devinfo):
    """{RDMA device: (the state of its port 1, its GID table or None when not listed)} from parsed ibv_devinfo."""
    return dict((name, (dev["ports"].get(1), dev["gids"].get(1))) for name, dev in devinfo.items())


def port_facts(receptacle, device, interfaces, rdma_devices, rdma_states_by_device):
    """One Thunderbolt port of mlx_fleet_thunderbolt: its device, RDMA device, state and GIDs, IPv4 addresses."""
    rdma_device = "rdma_" + device if device and "rdma_" + device in rdma_devices else None
    state, gids = rdma_states_by_device.get(rdma_device, (None, None))
    return {"receptacle": receptacle, "hardware_port": "Thunderbolt {0}".format(receptacle), "device": device,
            "rdma_device": rdma_device, "rdma_state": state, "rdma_gids": gids,
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
    rdma_status, rdma_enabled, rdma_devices, rdma_states_by_device, rdma_unread = rdma_state(module, results)

    ports = [dict(bus, **port_facts(bus["receptacle"], devices.get(bus["receptacle"]), interfaces, rdma_devices,
                                    rdma_states_by_device))
             for bus in buses]
    return {
        "ports": ports,
        "bridge": bridge_state(interfaces, services),
        "rdma_enabled": rdma_enabled,
        "rdma_status": rdma_status,
        "rdma_devices": rdma_devices,
        "rdma_unread": rdma_unread,
    }


def gather(module, with_macos=True, with_thunderbolt=False, extra_reads=(), done=None):
    """(the facts asked for, {fact name: value}; the reads' results) from one round of reads, with EXTRA_READS
    (names in READS another caller plans with) in the same round; DONE: results already read, not read again."""
    done = done or {}
    reads = (MACOS_READS if with_macos else ()) + (THUNDERBOLT_READS if with_thunderbolt else ()) + tuple(extra_reads)
    results = dict(done, **run_reads(module, [name for name in reads if name not in done]))
    facts = {}
    if with_macos:
        facts["mlx_fleet_macos"] = macos(module, results)
    if with_thunderbolt:
        facts["mlx_fleet_thunderbolt"] = thunderbolt(module, results)
    return facts, results

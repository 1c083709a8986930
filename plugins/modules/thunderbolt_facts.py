#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: thunderbolt_facts
short_description: Read a Mac's Thunderbolt ports, what is plugged into them, and its RDMA state, in one call
description:
  - Reads C(system_profiler SPThunderboltDataType -json), C(networksetup -listallhardwareports),
    C(networksetup -listnetworkserviceorder), C(ifconfig), C(ibv_devices), C(ibv_devinfo) and
    C(rdma_ctl status), and returns the fact C(mlx_fleet_thunderbolt) described in docs/fabric.md.
  - Changes nothing. A Mac without the RDMA tools (macOS before 26.2) reports RDMA as unavailable
    rather than failing.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options: {}
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.facts
"""

EXAMPLES = r"""
- name: Read the Thunderbolt ports
  mlx_fleet.cluster.thunderbolt_facts:

- name: Ports with a Mac directly on the other end
  ansible.builtin.debug:
    msg: "{{ mlx_fleet_thunderbolt.ports | selectattr('peers') | map(attribute='device') }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts about the Mac's Thunderbolt ports.
  returned: success
  type: dict
  contains:
    mlx_fleet_thunderbolt:
      description: Ports (receptacle, hardware_port, device, rdma_device, rdma_state, domain_uuid,
        speed_gbps, speed_is_max, connected, peers, devices), the Thunderbolt Bridge (device, active,
        members, service_enabled), rdma_enabled (null when the Mac has no rdma_ctl) and rdma_devices.
      type: dict
      returned: success
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import output_of, parse_or_fail, run_reads

TB_READS = ("thunderbolt", "hardware_ports", "service_order", "ifconfig", "ibv_devices", "ibv_devinfo", "rdma_ctl")
MISSING = 127


def _rdma(module, results):
    """(rdma_enabled, devices, {device: state}); RDMA tools absent means RDMA unavailable."""
    if results["rdma_ctl"][0] == MISSING:
        return None, [], {}
    enabled = parse_or_fail(module, parsers.parse_rdma_ctl_status, output_of(module, results, "rdma_ctl"))
    if results["ibv_devices"][0] == MISSING:
        return enabled, [], {}
    listed = parse_or_fail(module, parsers.parse_ibv_devices, output_of(module, results, "ibv_devices"))
    devices = [d["device"] for d in listed]
    states = {}
    if devices:
        info = parse_or_fail(module, parsers.parse_ibv_devinfo, output_of(module, results, "ibv_devinfo"))
        states = dict((name, dev["ports"].get(1)) for name, dev in info.items())
    return enabled, devices, states


def gather(module):
    results = run_reads(module, TB_READS)
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


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts={"mlx_fleet_thunderbolt": gather(module)})


if __name__ == "__main__":
    main()

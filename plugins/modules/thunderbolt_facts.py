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
  - M(mlx_fleet.cluster.macos_facts) with O(mlx_fleet.cluster.macos_facts#module:thunderbolt) reads the same
    together with the Mac's other facts, in one call.
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
      description: Ports (receptacle, hardware_port, device, rdma_device, rdma_state, rdma_gids (the RDMA
        port's GID table from ibv_devinfo -v, null when not listed), addresses (IPv4, as
        address/prefix), domain_uuid,
        speed_gbps, speed_is_max, connected, peers, devices), the Thunderbolt Bridge (device, active,
        members, service_enabled), rdma_enabled (null when the Mac has no rdma_ctl), rdma_status (enabled,
        disabled, or unknown for a wording no real Mac has shown, then judged by the rdma_* devices),
        rdma_devices and rdma_unread (the outputs not understood, each with command and output).
      type: dict
      returned: success
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts=node_facts.gather(module, with_macos=False, with_thunderbolt=True)[0])


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: macos_facts
short_description: Read what mlx-fleet needs to know about a Mac, in one call
description:
  - Reads a Mac through its own command-line tools (C(sw_vers), C(sysctl), C(system_profiler SPHardwareDataType),
    C(route), C(ifconfig), C(id), C(sudo -n), C(xcode-select)), never through Linux facts, and returns
    them as the fact C(mlx_fleet_macos).
  - Changes nothing on the Mac. Runs as the login user, so it can tell whether that user has sudo.
  - Use M(mlx_fleet.cluster.preflight_check) afterwards to judge the facts against the inventory.
version_added: "0.1.0"
author: mlx-fleet contributors
options: {}
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.facts
notes:
  - A tool missing from C(PATH) or printing an unexpected format fails the module with the command's name.
"""

EXAMPLES = r"""
- name: Read the Mac
  mlx_fleet.cluster.macos_facts:

- name: Show its chip and macOS build
  ansible.builtin.debug:
    msg: "{{ mlx_fleet_macos.chip }} on macOS {{ mlx_fleet_macos.product_version }} ({{ mlx_fleet_macos.build_version }})"
"""

RETURN = r"""
ansible_facts:
  description: Facts about the Mac.
  returned: success
  type: dict
  contains:
    mlx_fleet_macos:
      description: What the Mac says about itself.
      type: dict
      returned: success
      contains:
        product_version: {description: macOS version, type: str, sample: "26.2"}
        build_version: {description: macOS build, type: str, sample: 25C56}
        model_identifier: {description: hw.model, type: str, sample: "Mac16,11"}
        model_name: {description: Marketing name, type: str, sample: Mac mini}
        chip: {description: Chip, type: str, sample: Apple M4 Pro}
        memory_bytes: {description: Installed memory in bytes, type: int, sample: 68719476736}
        memory_mb: {description: Installed memory in MiB, type: int, sample: 65536}
        serial_number: {description: Serial number, type: str, sample: H7X2K4QW9Y}
        apple_silicon: {description: Whether the hardware is Apple Silicon (hw.optional.arm64, true under Rosetta too), type: bool}
        user: {description: The login user, type: str, sample: admin}
        home: {description: The login user's home folder, type: str, sample: /Users/admin}
        sudo: {description: "C(passwordless), C(password) (an administrator who needs a password) or C(none)", type: str}
        management_interface: {description: Interface of the default route, type: str, sample: en0}
        management_address: {description: Its IPv4 address, type: str, sample: 10.0.1.21}
        command_line_tools: {description: Whether the Xcode Command Line Tools are installed, type: bool}
        wired_limit_mb: {description: Current iogpu.wired_limit_mb (0 is macOS's default), type: int}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_state
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import run_reads


def gather(module):
    return macos_state.identity(module, run_reads(module, macos_state.IDENTITY_READS))


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts={"mlx_fleet_macos": gather(module)})


if __name__ == "__main__":
    main()

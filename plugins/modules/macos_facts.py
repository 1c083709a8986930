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

import os
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import output_of, parse_or_fail, run_reads

FACT_READS = ("sw_vers", "sysctl", "hardware", "default_route", "ifconfig", "groups", "sudo", "xcode_select")


def gather(module):
    results = run_reads(module, FACT_READS)
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


def main():
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    module.exit_json(changed=False, ansible_facts={"mlx_fleet_macos": gather(module)})


if __name__ == "__main__":
    main()

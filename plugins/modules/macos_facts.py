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
    C(networksetup -listallhardwareports), C(ifconfig), C(id), C(sudo -n), C(xcode-select)), never through Linux
    facts, and returns them as the fact C(mlx_fleet_macos).
  - The management interface is the one the Ansible connection arrives on, as the Mac itself sees it (the address
    in the SSH session's C(SSH_CONNECTION), set by sshd, and the C(ifconfig) interface that holds it).
  - Changes nothing on the Mac. Runs as the login user, so it can tell whether that user has sudo.
  - Use M(mlx_fleet.cluster.preflight_check) afterwards to judge the facts against the inventory.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  thunderbolt:
    description:
      - Also read the Thunderbolt ports and the RDMA state, as M(mlx_fleet.cluster.thunderbolt_facts) does, and
        return the fact C(mlx_fleet_thunderbolt) too, in the same call.
      - All reads run at once, so this costs about as long as the slowest tool.
    type: bool
    default: false
  hostfile_dir:
    description:
      - Also return the fact C(mlx_fleet_hostfiles), the sha256 of the hostfiles (and of the hold beside them) in
        this folder, as M(mlx_fleet.cluster.thunderbolt_network)'s RV(mlx_fleet.cluster.thunderbolt_network#module:hostfiles)
        does, so the hostfiles are written only on the Macs whose copies differ, with no other call.
    type: path
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.facts
notes:
  - A tool missing from C(PATH) or printing an unexpected format fails the module with the command's name.
  - Run it without C(become); sudo does not pass C(SSH_CONNECTION) on, and without it the management interface
    is unknown (null, with a warning).
"""

EXAMPLES = r"""
- name: Read the Mac
  mlx_fleet.cluster.macos_facts:

- name: Read the Mac and its Thunderbolt ports in one call (the facts the fabric needs)
  mlx_fleet.cluster.macos_facts:
    thunderbolt: true

- name: Read the Mac, its Thunderbolt ports and its copies of the hostfiles in one call (mlx-fleet hostfile)
  mlx_fleet.cluster.macos_facts:
    thunderbolt: true
    hostfile_dir: /opt/mlx-fleet

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
        product_version:
          description: macOS version.
          type: str
          returned: success
          sample: "26.2"
        build_version:
          description: macOS build.
          type: str
          returned: success
          sample: 25C56
        model_identifier:
          description: The model identifier (C(hw.model)).
          type: str
          returned: success
          sample: "Mac16,11"
        model_name:
          description: The marketing name.
          type: str
          returned: success
          sample: Mac mini
        chip:
          description: The chip.
          type: str
          returned: success
          sample: Apple M4 Pro
        memory_bytes:
          description: Installed memory in bytes.
          type: int
          returned: success
          sample: 68719476736
        memory_mb:
          description: Installed memory in MiB.
          type: int
          returned: success
          sample: 65536
        serial_number:
          description: The serial number.
          type: str
          returned: success
          sample: H7X2K4QW9Y
        apple_silicon:
          description: Whether the hardware is Apple silicon (C(hw.optional.arm64), true under Rosetta too).
          type: bool
          returned: success
          sample: true
        user:
          description: The login user.
          type: str
          returned: success
          sample: admin
        home:
          description: The login user's home folder.
          type: str
          returned: success
          sample: /Users/admin
        sudo:
          description: C(passwordless), C(password) (an administrator who needs a password) or C(none).
          type: str
          returned: success
          sample: passwordless
        management_interface:
          description:
            - The interface the management (SSH) connection arrives on, as the Mac sees it.
            - Null when the module does not run in an SSH session (for example under C(become)).
          type: str
          returned: success
          sample: en0
        management_hardware_port:
          description:
            - The hardware port of RV(ansible_facts.mlx_fleet_macos.management_interface) as
              C(networksetup -listallhardwareports) names it (C(Ethernet), C(Wi-Fi), C(Thunderbolt 1),
              C(Thunderbolt Bridge)).
            - Null for an interface that is no hardware port (a VPN tunnel) or when the interface is unknown.
          type: str
          returned: success
          sample: Ethernet
        management_address:
          description: This Mac's address of the management connection (from C(SSH_CONNECTION)); null when unknown.
          type: str
          returned: success
          sample: 10.0.1.21
        command_line_tools:
          description: Whether the Xcode Command Line Tools are installed.
          type: bool
          returned: success
          sample: true
        wired_limit_mb:
          description: Current C(iogpu.wired_limit_mb) (0 is macOS's default).
          type: int
          returned: success
          sample: 0
    mlx_fleet_thunderbolt:
      description: With O(thunderbolt), the Mac's Thunderbolt ports, as M(mlx_fleet.cluster.thunderbolt_facts) returns them.
      type: dict
      returned: when O(thunderbolt) is true
    mlx_fleet_hostfiles:
      description: With O(hostfile_dir), per file name, the sha256 of the file there, null when absent.
      type: dict
      returned: when O(hostfile_dir) is given
      sample: {"hostfile.json": "6742ef4107e0c1d6...", "hostfile-ring.json": null, "hostfile.held": null}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE_FOLDER, digests


def main():
    module = AnsibleModule(argument_spec={"thunderbolt": {"type": "bool", "default": False},
                                          "hostfile_dir": {"type": "path"}}, supports_check_mode=True)
    facts = node_facts.gather(module, with_thunderbolt=module.params["thunderbolt"])
    if module.params["hostfile_dir"]:
        facts["mlx_fleet_hostfiles"] = digests(module, module.params["hostfile_dir"], HOSTFILE_FOLDER)
    module.exit_json(changed=False, ansible_facts=facts)


if __name__ == "__main__":
    main()

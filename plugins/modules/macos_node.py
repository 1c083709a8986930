#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: macos_node
short_description: Every setting a Mac in an MLX cluster needs, read and written in one call
description:
  - Power settings (C(pmset)); the computer, local host and host names (C(scutil)); and a GPU wired-memory limit
    (C(iogpu.wired_limit_mb)) set now and kept across reboots by a LaunchDaemon that sets it at boot
    (Apple's TN3205).
  - Everything is read first, in one round of reads, and only what differs is written, so a Mac that has
    its settings costs one module call and changes nothing.
  - A new or changed LaunchDaemon is reloaded (C(launchctl bootout), then C(bootstrap)); with no limit
    (O(wired_limit_mb) and O(wired_limit_fraction) 0) a LaunchDaemon left from an earlier run is unloaded and
    removed, and the limit given back to macOS (0).
  - Writing needs root (C(become=true)); reading does not.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  power_settings:
    description:
      - "The C(pmset) settings to enforce on every power source (C(pmset -a)), as C(name -> value), for example
        C({sleep: 0, disksleep: 0, womp: 1, autorestart: 1})."
      - A setting this Mac does not report is left alone, with a warning.
    type: dict
    default: {}
  computer_name:
    description: The user-friendly name (C(ComputerName)); not managed when omitted.
    type: str
  local_host_name:
    description: The Bonjour name (C(LocalHostName)); letters, digits and hyphens; not managed when omitted.
    type: str
  host_name:
    description: The fully qualified host name (C(HostName)); not managed when omitted (usual on macOS).
    type: str
  wired_limit_mb:
    description: The GPU wired-memory limit in MB; 0 uses O(wired_limit_fraction).
    type: int
    default: 0
  wired_limit_fraction:
    description:
      - The limit as a fraction of the Mac's memory (C(hw.memsize)), 0 <= fraction < 1, for example 0.85.
      - With this and O(wired_limit_mb) both 0, macOS's default limit stays.
    type: float
    default: 0
  wired_limit_label:
    description: Label of the LaunchDaemon, and its file name under C(/Library/LaunchDaemons).
    type: str
    default: org.mlx-fleet.wired-limit
  automatic_macos_updates:
    description:
      - Whether macOS installs its updates by itself (C(AutomaticallyInstallMacOSUpdates) in
        C(/Library/Preferences/com.apple.SoftwareUpdate), set with C(defaults write)). C(false) on a cluster, so
        a Mac restarts into a new build only through C(mlx-fleet os-update); not managed when omitted.
      - When C(defaults read) answers in a wording never seen on a Mac, the setting is left alone with a warning
        quoting it.
    type: bool
requirements:
  - macOS with C(pmset), C(scutil), C(sysctl) and C(launchctl) on the PATH
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Keep the Mac awake, name it, and let the GPU wire 85% of its memory
  mlx_fleet.cluster.macos_node:
    power_settings: {sleep: 0, disksleep: 0, womp: 1, autorestart: 1}
    computer_name: "{{ inventory_hostname }}"
    local_host_name: "{{ inventory_hostname_short }}"
    wired_limit_fraction: 0.85
  become: true
"""

RETURN = r"""
power:
  description: The managed pmset settings per power source after the run (as read, or as they would be).
  returned: always
  type: dict
  sample: {"AC Power": {"sleep": 0, "disksleep": 0, "womp": 1, "autorestart": 1}}
names:
  description: The managed names after the run; null when not set.
  returned: always
  type: dict
  sample: {"ComputerName": "studio-1", "LocalHostName": "studio-1"}
wired_limit_mb:
  description: The limit this Mac gets (0 is macOS's default).
  returned: always
  type: int
  sample: 55705
changes:
  description: What differed and was (or in check mode would be) written, by setting.
  returned: always
  type: dict
  sample: {"power": {"sleep": 0}, "names": {}, "wired_limit_mb": 55705, "launch_daemon": "created",
           "automatic_macos_updates": false}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_node_plan as node_plan
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import run_reads

ARGUMENT_SPEC = node_plan.ARGUMENT_SPEC


def apply(module, plan, result):
    """The one write path: each setting's writes, in the plan's order."""
    try:
        for setting in plan:
            for write in setting["writes"]:
                write()
    except (ValueError, IOError, OSError) as e:
        module.fail_json(msg=to_native(e), **result)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    problem = node_plan.params_problem(module.params)
    if problem:
        module.fail_json(msg=problem)
    reads = run_reads(module, node_plan.needed_reads(module.params))
    try:
        plan = node_plan.plan(module, module.params, reads)
    except ValueError as e:
        module.fail_json(msg=to_native(e))
    result = node_plan.report(module, plan)
    if result["changed"] and not module.check_mode:
        apply(module, plan, result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

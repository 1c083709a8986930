#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet developers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: macos_power
short_description: Set macOS power management (pmset) settings
description:
  - Reads the stored power settings with C(pmset -g custom) and writes, with one C(pmset) call,
    only the settings that differ from the requested values.
  - A setting this Mac does not report for a power source (for example C(autorestart) on a
    MacBook) is not written; the module warns and lists it in RV(unsupported).
  - Writing needs root (C(become=true)); reading does not.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  settings:
    description:
      - "The C(pmset) settings to enforce, as C(name -> value), for example
        C({sleep: 0, disksleep: 0, womp: 1, autorestart: 1})."
      - Names are C(pmset) argument names (lower case, no spaces); values are non-negative
        integers (minutes for the sleep timers, 0 or 1 for switches).
    type: dict
    required: true
  power_source:
    description:
      - Which power source's settings to manage, as C(pmset -a), C(-c) or C(-b).
      - C(all) manages every power source this Mac has (only C(AC Power) on a desktop).
    type: str
    choices: [all, ac, battery]
    default: all
notes:
  - Apple's TN3205 recommends disabling sleep on nodes joined by Thunderbolt, which has no
    wake-on-LAN.
requirements:
  - macOS with C(pmset) on the PATH
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Keep a cluster node awake and restart it after a power failure
  mlx_fleet.cluster.macos_power:
    settings:
      sleep: 0
      disksleep: 0
      womp: 1
      autorestart: 1
  become: true
"""

RETURN = r"""
settings:
  description: The managed settings per power source after the run (as read, or as they would be in check mode).
  returned: always
  type: dict
  sample: {"AC Power": {"sleep": 0, "disksleep": 0, "womp": 1, "autorestart": 1}}
changes:
  description: The settings that differed and were (or in check mode would be) written, with the value written.
  returned: always
  type: dict
  sample: {"sleep": 0, "autorestart": 1}
unsupported:
  description: Requested settings this Mac does not report for a managed power source; they are left alone.
  returned: always
  type: list
  elements: str
  sample: ["autorestart"]
cmd:
  description: The pmset command that was (or in check mode would be) run; empty when nothing differs.
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/pmset", "-a", "sleep", "0"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_settings as settings_utils
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import run_reads


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            power_source=dict(type="str", default="all", choices=list(settings_utils.SOURCES)),
        ),
        supports_check_mode=True,
    )
    power_source = module.params["power_source"]

    def plan():
        return settings_utils.plan_power(settings_utils.power_sections(*run_reads(module, ["pmset"])["pmset"]),
                                         settings, power_source)

    try:
        settings = settings_utils.normalize_power(module.params["settings"])
        changes, unsupported, before, after = plan()
    except ValueError as e:
        module.fail_json(msg=to_native(e))
    for name in unsupported:
        module.warn("pmset: this Mac has no '{0}' setting for {1} power; left alone".format(name, power_source))

    cmd = settings_utils.power_command(module, power_source, changes)
    result = dict(changed=bool(changes), changes=changes, unsupported=unsupported, cmd=cmd, settings=after)
    if module._diff:
        result["diff"] = dict(before_header="pmset -g custom (before)", after_header="pmset -g custom (after)",
                              before=settings_utils.render_power(before), after=settings_utils.render_power(after))
    if changes and not module.check_mode:
        try:
            settings_utils.run_checked(module, cmd)
            # Read back: pmset ignores some settings silently; report what the Mac really has.
            left, dummy, result["settings"], dummy = plan()
        except ValueError as e:
            module.fail_json(msg=to_native(e), **result)
        if left:
            module.fail_json(msg=settings_utils.power_not_applied(left), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

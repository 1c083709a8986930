#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet developers
# Apache License 2.0 (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: macos_names
short_description: Set a Mac's computer name, local host name and host name
description:
  - Reads each requested name with C(scutil --get) and sets, with C(scutil --set), only the
    names that differ.
  - A name left unset (null) is not managed.
  - Setting names needs root (C(become=true)); reading does not.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  computer_name:
    description:
      - The user-friendly name (C(ComputerName)), shown in Finder and sharing.
    type: str
  local_host_name:
    description:
      - The Bonjour name (C(LocalHostName)); the Mac answers as C(<name>.local).
      - Letters, digits and hyphens only, at most 63 characters, not starting or ending with a hyphen.
    type: str
  host_name:
    description:
      - The fully qualified host name (C(HostName)). Usually left unset on macOS, so the
        host name follows C(LocalHostName) and the network.
    type: str
requirements:
  - macOS with C(scutil) on the PATH
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Name the Mac after its inventory entry
  mlx_fleet.cluster.macos_names:
    computer_name: "{{ inventory_hostname }}"
    local_host_name: "{{ inventory_hostname_short }}"
  become: true
"""

RETURN = r"""
names:
  description: The managed names after the run (as read, or as they would be in check mode); null when not set.
  returned: always
  type: dict
  sample: {"ComputerName": "studio-1", "LocalHostName": "studio-1"}
changes:
  description: The names that differed and were (or in check mode would be) set.
  returned: always
  type: dict
  sample: {"LocalHostName": "studio-1"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_settings as settings_utils
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import run_reads


def main():
    module = AnsibleModule(
        argument_spec=dict(
            computer_name=dict(type="str"),
            local_host_name=dict(type="str"),
            host_name=dict(type="str"),
        ),
        required_one_of=[("computer_name", "local_host_name", "host_name")],
        supports_check_mode=True,
    )
    keys = [(key, option, read) for key, option, read in settings_utils.NAME_KEYS if module.params[option] is not None]
    wanted = dict((key, module.params[option]) for key, option, dummy in keys)
    problem = settings_utils.check_names(wanted)
    if problem:
        module.fail_json(msg=problem)

    reads = run_reads(module, [read for dummy, dummy, read in keys])
    try:
        current = dict((key, settings_utils.scutil_value(key, *reads[read])) for key, dummy, read in keys)
    except ValueError as e:
        module.fail_json(msg=to_native(e))
    changes = settings_utils.plan_names(current, wanted)
    after = dict(current, **changes)
    result = dict(changed=bool(changes), changes=changes, names=after)
    if module._diff:
        result["diff"] = dict(before_header="scutil --get (before)", after_header="scutil --get (after)",
                              before=settings_utils.render_names(current), after=settings_utils.render_names(after))
    if changes and not module.check_mode:
        try:
            settings_utils.apply_names(module, changes)
        except ValueError as e:
            module.fail_json(msg=to_native(e), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

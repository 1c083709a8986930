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
author: mlx-fleet developers
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
notes:
  - Supports check mode and diff mode.
requirements:
  - macOS with C(scutil) on the PATH
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

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_state import scutil_value

# scutil key -> (module option, registered read in macos_commands.READS or None)
KEYS = (
    ("ComputerName", "computer_name", "computer_name"),
    ("LocalHostName", "local_host_name", "local_host_name"),
    ("HostName", "host_name", None),
)
_LOCAL_HOST_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def check_local_host_name(name):
    """None when name is a valid LocalHostName, else why not."""
    if not _LOCAL_HOST_NAME.match(name):
        return ("local_host_name {0!r}: use letters, digits and hyphens only (at most 63, "
                "no hyphen first or last)".format(name))
    return None


def plan(current, wanted):
    """{key: value} for every wanted (non-None) name that differs from current."""
    return dict((key, value) for key, value in wanted.items()
                if value is not None and current.get(key) != value)


def render(names):
    return "".join("{0}: {1}\n".format(key, "(not set)" if names[key] is None else names[key])
                   for key, _, _ in KEYS if key in names)


def read(module, key, registered):
    if registered:
        rc, out, err = macos_commands.run_reads(module, [registered])[registered]
    else:
        rc, out, err = module.run_command([module.get_bin_path("scutil", required=True), "--get", key],
                                          environ_update={"LC_ALL": "C"})
    try:
        return scutil_value(key, rc, out, err)
    except ValueError as e:
        module.fail_json(msg=to_native(e))


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
    wanted = dict((key, module.params[option]) for key, option, _ in KEYS if module.params[option] is not None)
    if "LocalHostName" in wanted:
        problem = check_local_host_name(wanted["LocalHostName"])
        if problem:
            module.fail_json(msg=problem)
    for key, value in wanted.items():
        if not value.strip():
            module.fail_json(msg="{0}: an empty name cannot be set".format(key))

    current = dict((key, read(module, key, registered)) for key, _, registered in KEYS if key in wanted)
    changes = plan(current, wanted)
    after = dict(current, **changes)
    result = dict(changed=bool(changes), changes=changes, names=after)
    if module._diff:
        result["diff"] = dict(before_header="scutil --get (before)", after_header="scutil --get (after)",
                              before=render(current), after=render(after))
    if changes and not module.check_mode:
        scutil = module.get_bin_path("scutil", required=True)
        for key, _, _ in KEYS:
            if key not in changes:
                continue
            rc, out, err = module.run_command([scutil, "--set", key, changes[key]], environ_update={"LC_ALL": "C"})
            if rc != 0:
                module.fail_json(msg="scutil --set {0} failed (rc {1}): {2}".format(key, rc, (err or out).strip()),
                                 **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

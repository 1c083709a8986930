#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: macos_sysctl
short_description: Set the runtime value of a macOS sysctl
description:
  - Reads the value with C(sysctl NAME) and runs C(sysctl -w NAME=VALUE) only when it differs.
  - This is the running kernel's value only; macOS forgets it at reboot. To keep a value, also
    install a LaunchDaemon that sets it at boot (the C(mlx_fleet.cluster.macos_node) role does
    this for C(iogpu.wired_limit_mb)).
  - Writing needs root (C(become=true)); reading does not.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  name:
    description:
      - The sysctl name, for example C(iogpu.wired_limit_mb).
    type: str
    required: true
  value:
    description:
      - The value to set (a string or an integer), compared as text with what C(sysctl) prints.
    type: raw
    required: true
requirements:
  - macOS with C(sysctl) on the PATH
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Let the GPU wire up to 56 GB of a 64 GB Mac until the next reboot
  mlx_fleet.cluster.macos_sysctl:
    name: iogpu.wired_limit_mb
    value: "57344"
  become: true
"""

RETURN = r"""
value:
  description: The value after the run (as read, or as it would be in check mode).
  returned: always
  type: str
  sample: "57344"
previous:
  description: The value before the run.
  returned: always
  type: str
  sample: "0"
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_settings as settings_utils


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            value=dict(type="raw", required=True),
        ),
        supports_check_mode=True,
    )
    name = module.params["name"]
    raw = module.params["value"]
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        module.fail_json(msg="value must be a string or an integer, got {0!r}".format(raw))
    value = to_native(raw).strip()
    if not settings_utils.SYSCTL_NAME.match(name):
        module.fail_json(msg="name {0!r} is not a sysctl name".format(name))
    if not value or any(c.isspace() for c in value):
        module.fail_json(msg="value {0!r} must be one word".format(module.params["value"]))
    sysctl = module.get_bin_path("sysctl", required=True)

    def read():
        rc, out, err = module.run_command([sysctl, name], environ_update={"LC_ALL": "C"})
        try:
            return settings_utils.sysctl_value(name, rc, out, err)
        except ValueError as e:
            module.fail_json(msg=to_native(e))

    previous = read()
    changed = previous != value
    result = dict(changed=changed, previous=previous, value=value if changed else previous)
    if module._diff:
        result["diff"] = dict(before_header="sysctl {0}".format(name), after_header="sysctl {0}".format(name),
                              before="{0}: {1}\n".format(name, previous), after="{0}: {1}\n".format(name, value))
    if changed and not module.check_mode:
        try:
            settings_utils.write_sysctl(module, name, value)
        except ValueError as e:
            module.fail_json(msg=to_native(e), **result)
        result["value"] = read()
        if result["value"] != value:
            module.fail_json(msg="sysctl {0} is {1} after writing {2}".format(name, result["value"], value), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

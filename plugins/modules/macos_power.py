#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

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

import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers

SOURCES = {
    "all": ("-a", ("AC Power", "Battery Power", "UPS Power")),
    "ac": ("-c", ("AC Power",)),
    "battery": ("-b", ("Battery Power",)),
}
_NAME = re.compile(r"^[a-z][a-z0-9]*$")


def normalize_settings(settings):
    """{name: value} with int values; raises ValueError naming the bad entry."""
    out = {}
    for name, value in settings.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError("settings: {0!r} is not a pmset setting name".format(name))
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if not isinstance(value, int) or value < 0:
            raise ValueError("settings: {0} must be a non-negative integer, got {1!r}".format(name, value))
        out[name] = value
    return out


def plan(sections, settings, power_source="all"):
    """Decide what to write from parsed `pmset -g custom` output.

    Returns (changes, unsupported, before, after): changes is {name: value} for the settings
    that differ in any managed power source; unsupported lists the names no managed source
    reports; before/after are {source: {name: value}} restricted to the managed names.
    """
    managed = [src for src in SOURCES[power_source][1] if src in sections]
    if not managed:
        raise ValueError("pmset -g custom: no {0} section".format(" or ".join(SOURCES[power_source][1])))
    unsupported = sorted(name for name in settings if not any(name in sections[src] for src in managed))
    changes = {}
    before, after = {}, {}
    for src in managed:
        before[src] = {}
        after[src] = {}
        for name, value in settings.items():
            if name not in sections[src]:
                continue
            before[src][name] = sections[src][name]
            after[src][name] = value
            if sections[src][name] != value:
                changes[name] = value
    return changes, unsupported, before, after


def render(values):
    """pmset-like text of {source: {name: value}}, for --diff."""
    lines = []
    for src in sorted(values):
        lines.append("{0}:".format(src))
        lines.extend(" {0:<20} {1}".format(name, values[src][name]) for name in sorted(values[src]))
    return "\n".join(lines) + "\n"


def read(module):
    rc, out, err = macos_commands.run_reads(module, ["pmset"])["pmset"]
    if rc != 0:
        module.fail_json(msg="pmset -g custom failed (rc {0}): {1}".format(rc, (err or out).strip()))
    try:
        return macos_parsers.parse_pmset(out)
    except ValueError as e:
        module.fail_json(msg=to_native(e))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            power_source=dict(type="str", default="all", choices=list(SOURCES)),
        ),
        supports_check_mode=True,
    )
    try:
        settings = normalize_settings(module.params["settings"])
    except ValueError as e:
        module.fail_json(msg=to_native(e))
    power_source = module.params["power_source"]

    try:
        changes, unsupported, before, after = plan(read(module), settings, power_source)
    except ValueError as e:
        module.fail_json(msg=to_native(e))
    for name in unsupported:
        module.warn("pmset: this Mac has no '{0}' setting for {1} power; left alone".format(name, power_source))

    cmd = []
    if changes:
        cmd = [module.get_bin_path("pmset", required=True), SOURCES[power_source][0]]
        for name in sorted(changes):
            cmd += [name, str(changes[name])]
    result = dict(changed=bool(changes), changes=changes, unsupported=unsupported, cmd=cmd, settings=after)
    if module._diff:
        result["diff"] = dict(before_header="pmset -g custom (before)", after_header="pmset -g custom (after)",
                              before=render(before), after=render(after))
    if changes and not module.check_mode:
        rc, out, err = module.run_command(cmd, environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg="{0} failed (rc {1}): {2}".format(" ".join(cmd), rc, (err or out).strip()), **result)
        # Read back: pmset ignores some settings silently; report what the Mac really has.
        left, dummy, now, dummy = plan(read(module), settings, power_source)
        result["settings"] = now
        if left:
            module.fail_json(msg="pmset did not apply: {0}".format(
                ", ".join("{0}={1}".format(k, v) for k, v in sorted(left.items()))), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

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

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_settings as settings_utils
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import read_text, write_atomically
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    AUTO_INSTALL_MACOS, SOFTWARE_UPDATE_DOMAIN, run_reads)

LAUNCH_DAEMONS = "/Library/LaunchDaemons"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NOT_LOADED = (3, 113)  # launchctl bootout: "No such process" / "Could not find service"

ARGUMENT_SPEC = dict(
    power_settings=dict(type="dict", default={}),
    computer_name=dict(type="str"),
    local_host_name=dict(type="str"),
    host_name=dict(type="str"),
    wired_limit_mb=dict(type="int", default=0),
    wired_limit_fraction=dict(type="float", default=0),
    wired_limit_label=dict(type="str", default=defaults.WIRED_LIMIT_LABEL),
    automatic_macos_updates=dict(type="bool"),
)


def requested_names(params):
    """(key, option, read) of the names the task sets (settings_utils.NAME_KEYS)."""
    return [(key, option, read) for key, option, read in settings_utils.NAME_KEYS if params[option] is not None]


def wanted_names(params):
    return dict((key, params[option]) for key, option, dummy in requested_names(params))


def check_params(module):
    """The names and the label, checked before anything is read."""
    label = module.params["wired_limit_label"]
    problem = settings_utils.check_names(wanted_names(module.params))
    if not _LABEL.match(label):
        problem = "wired_limit_label {0!r}: use letters, digits, dots, hyphens and underscores".format(label)
    if problem:
        module.fail_json(msg=problem)


def needed_reads(params):
    """One round of reads: pmset, the names, sysctl (the limit now, and the memory), the update preference."""
    return (["pmset", "sysctl"] + [read for dummy, dummy, read in requested_names(params)]
            + (["auto_install_macos"] if params["automatic_macos_updates"] is not None else []))


# --- the plan, one part per setting: what it is after the run, what changes, the diff, the writes ----------

def part(result, changes, diffs=(), writes=()):
    return {"result": result, "changes": changes, "diffs": list(diffs), "writes": list(writes)}


def power_plan(module, reads):
    settings = settings_utils.normalize_power(module.params["power_settings"])
    changes, unsupported, before, after = settings_utils.plan_power(settings_utils.power_sections(*reads["pmset"]),
                                                                    settings)
    for name in unsupported:
        module.warn("pmset: this Mac has no '{0}' setting; left alone".format(name))

    def write():
        settings_utils.run_checked(module, settings_utils.power_command(module, "all", changes))
        # Read back: pmset ignores some settings silently.
        left = settings_utils.plan_power(settings_utils.power_sections(*run_reads(module, ["pmset"])["pmset"]),
                                         settings)[0]
        if left:
            raise ValueError(settings_utils.power_not_applied(left))

    return part({"power": after}, {"power": changes},
                [("pmset -g custom", settings_utils.render_power(before), settings_utils.render_power(after))],
                [write] if changes else [])


def names_plan(module, reads):
    current = dict((key, settings_utils.scutil_value(key, *reads[read]))
                   for key, dummy, read in requested_names(module.params))
    changes = settings_utils.plan_names(current, wanted_names(module.params))
    after = dict(current, **changes)
    return part({"names": after}, {"names": changes},
                [("scutil --get", settings_utils.render_names(current), settings_utils.render_names(after))],
                [lambda: settings_utils.apply_names(module, changes)] if changes else [])


def wired_limit_plan(module, reads):
    params = module.params
    label = params["wired_limit_label"]
    plist_path = os.path.join(LAUNCH_DAEMONS, label + ".plist")
    target = settings_utils.wired_limit_mb(params["wired_limit_mb"], params["wired_limit_fraction"],
                                           int(macos_parsers.parse_sysctl(reads["sysctl"][1]).get("hw.memsize") or 0))
    plist_now = read_text(plist_path)
    plist = settings_utils.wired_limit_plist(label, target) if target else None
    daemon = ("created" if plist_now is None else "updated") if plist is not None and plist != plist_now else (
        "removed" if plist is None and plist_now is not None else None)
    # With no limit to set or give back, the Mac need not even have the setting.
    limit_now = settings_utils.sysctl_value(settings_utils.WIRED_LIMIT, *reads["sysctl"]) if target or daemon else None
    # The limit now: the target, or macOS's default once the daemon that set it is gone.
    limit = str(target) if target else ("0" if daemon == "removed" else limit_now)
    changes, writes = {}, []
    if limit != limit_now:
        changes["wired_limit_mb"] = int(limit)
        writes.append(lambda: settings_utils.write_sysctl(module, settings_utils.WIRED_LIMIT, limit))
    if daemon:
        changes["launch_daemon"] = daemon
        writes.append(lambda: reload_daemon(module, label, plist_path, plist))
    sysctl_line = settings_utils.WIRED_LIMIT + ": {0}\n"
    return part({"wired_limit_mb": int(limit or 0)}, changes,
                [("sysctl " + settings_utils.WIRED_LIMIT, sysctl_line.format(limit_now), sysctl_line.format(limit)),
                 (plist_path, plist_now or "", plist or "")], writes)


def automatic_updates_plan(module, reads):
    wanted = module.params["automatic_macos_updates"]
    if wanted is None:
        return part({}, {})
    now = settings_utils.defaults_bool(module.warn, AUTO_INSTALL_MACOS, *reads["auto_install_macos"])
    if now == settings_utils.UNKNOWN or now is wanted:
        return part({}, {})

    def write():
        settings_utils.run_checked(module, [module.get_bin_path("defaults", required=True), "write",
                                            SOFTWARE_UPDATE_DOMAIN, AUTO_INSTALL_MACOS, "-bool",
                                            "true" if wanted else "false"])

    return part({}, {"automatic_macos_updates": wanted},
                [(AUTO_INSTALL_MACOS, "{0}\n".format(now), "{0}\n".format(wanted))], [write])


PLANS = (power_plan, names_plan, wired_limit_plan, automatic_updates_plan)


# --- the run: read, plan, report, apply -----------------------------------------------------------------

def report(module, plan):
    """The module's result from the plan: each setting after the run (or as it would be), what changes, the diff."""
    result = dict(changed=any(p["writes"] for p in plan), changes={})
    for setting in plan:
        result.update(setting["result"])
        result["changes"].update(setting["changes"])
    if module._diff:
        result["diff"] = [dict(before_header=header, after_header=header, before=before, after=after)
                          for setting in plan for header, before, after in setting["diffs"] if before != after]
    return result


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
    check_params(module)
    reads = run_reads(module, needed_reads(module.params))
    try:
        plan = [plan_setting(module, reads) for plan_setting in PLANS]
    except ValueError as e:
        module.fail_json(msg=to_native(e))
    result = report(module, plan)
    if result["changed"] and not module.check_mode:
        apply(module, plan, result)
    module.exit_json(**result)


def reload_daemon(module, label, path, plist):
    """launchd reads a daemon's plist only when it loads it: unload the old one (if loaded), then write
    and load the new one (RunAtLoad sets the limit at once), or remove it."""
    launchctl = module.get_bin_path("launchctl", required=True)
    rc, out, err = module.run_command([launchctl, "bootout", "system/" + label], environ_update={"LC_ALL": "C"})
    if rc not in (0,) + NOT_LOADED:
        raise ValueError("launchctl bootout system/{0} failed (rc {1}): {2}".format(label, rc, (err or out).strip()))
    if plist is None:
        os.unlink(path)
        return
    write_atomically(module, path, plist)
    module.set_owner_if_different(path, "root", False)
    module.set_group_if_different(path, "wheel", False)
    settings_utils.run_checked(module, [launchctl, "bootstrap", "system", path])


if __name__ == "__main__":
    main()

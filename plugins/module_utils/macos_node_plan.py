# -*- coding: utf-8 -*-
"""What macos_node compares and writes: its options, the reads it needs, and the plan of each setting (what it
is after the run, what changes, the diff, the writes). The module plans and writes with it; macos_facts plans
with the same code in the preflight (its option node) and says whether anything differs, so a converged Mac's
node step is skipped without a module run. Stdlib only, Python 3.9 compatible: it runs on the Mac.
"""

from __future__ import absolute_import, division, print_function

import os
import re

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_settings as settings_utils
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import read_text, write_atomically
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    AUTO_INSTALL_MACOS, SOFTWARE_UPDATE_DOMAIN, run_reads)

__metaclass__ = type

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


def params_problem(params):
    """Why the names or the label cannot be set (one line), or None; checked before anything is read."""
    label = params["wired_limit_label"]
    if not _LABEL.match(label):
        return "wired_limit_label {0!r}: use letters, digits, dots, hyphens and underscores".format(label)
    return settings_utils.check_names(wanted_names(params))


def needed_reads(params):
    """One round of reads: pmset, the names, sysctl (the limit now, and the memory), the update preference."""
    return (["pmset", "sysctl"] + [read for dummy, dummy, read in requested_names(params)]
            + (["auto_install_macos"] if params["automatic_macos_updates"] is not None else []))


# --- the plan, one part per setting: what it is after the run, what changes, the diff, the writes ----------

def part(result, changes, diffs=(), writes=()):
    return {"result": result, "changes": changes, "diffs": list(diffs), "writes": list(writes)}


def power_plan(module, params, reads):
    settings = settings_utils.normalize_power(params["power_settings"])
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


def names_plan(module, params, reads):
    current = dict((key, settings_utils.scutil_value(key, *reads[read]))
                   for key, dummy, read in requested_names(params))
    changes = settings_utils.plan_names(current, wanted_names(params))
    after = dict(current, **changes)
    return part({"names": after}, {"names": changes},
                [("scutil --get", settings_utils.render_names(current), settings_utils.render_names(after))],
                [lambda: settings_utils.apply_names(module, changes)] if changes else [])


def wired_limit_plan(module, params, reads):
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


def automatic_updates_plan(module, params, reads):
    wanted = params["automatic_macos_updates"]
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


def plan(module, params, reads):
    """Each setting's part of the plan, in the order they are written; ValueError when a read cannot be used."""
    return [plan_setting(module, params, reads) for plan_setting in PLANS]


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

# -*- coding: utf-8 -*-
"""Node settings that macos_node reads, compares and writes in one call: power (pmset), names (scutil),
sysctl values, and the LaunchDaemon that sets the GPU wired-memory limit at boot.

Each setting has a pure part (plan, render: unit-tested on real output formats) and a part that
reads or writes through the Mac's own tools. Stdlib only, Python 3.9 compatible: it runs on the Mac.
"""

from __future__ import absolute_import, division, print_function

import plistlib
import re

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers

__metaclass__ = type


def run_checked(module, cmd):
    """Run a command that changes the Mac; ValueError naming it when it fails."""
    rc, out, err = module.run_command(cmd, environ_update={"LC_ALL": "C"})
    if rc != 0:
        raise ValueError("{0} failed (rc {1}): {2}".format(" ".join(cmd), rc, (err or out).strip()))


# --- power (pmset) ----------------------------------------------------------------------------

SOURCES = {
    "all": ("-a", ("AC Power", "Battery Power", "UPS Power")),
    "ac": ("-c", ("AC Power",)),
    "battery": ("-b", ("Battery Power",)),
}
_PMSET_NAME = re.compile(r"^[a-z][a-z0-9]*$")


def normalize_power(settings):
    """{name: value} with int values; raises ValueError naming the bad entry."""
    out = {}
    for name, value in settings.items():
        if not isinstance(name, str) or not _PMSET_NAME.match(name):
            raise ValueError("settings: {0!r} is not a pmset setting name".format(name))
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value.strip())
        if not isinstance(value, int) or value < 0:
            raise ValueError("settings: {0} must be a non-negative integer, got {1!r}".format(name, value))
        out[name] = value
    return out


def plan_power(sections, settings, power_source="all"):
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


def render_power(values):
    """pmset-like text of {source: {name: value}}, for --diff."""
    lines = []
    for src in sorted(values):
        lines.append("{0}:".format(src))
        lines.extend(" {0:<20} {1}".format(name, values[src][name]) for name in sorted(values[src]))
    return "\n".join(lines) + "\n"


def power_sections(rc, out, err):
    """Parsed `pmset -g custom`; ValueError when it failed or printed something else."""
    if rc != 0:
        raise ValueError("pmset -g custom failed (rc {0}): {1}".format(rc, (err or out).strip()))
    return macos_parsers.parse_pmset(out)


def power_command(module, power_source, changes):
    """The one pmset call that writes the changed settings ([] when none)."""
    if not changes:
        return []
    cmd = [module.get_bin_path("pmset", required=True), SOURCES[power_source][0]]
    for name in sorted(changes):
        cmd += [name, str(changes[name])]
    return cmd


def power_not_applied(left):
    """The error when a read-back still differs: pmset ignores some settings silently."""
    return "pmset did not apply: {0}".format(", ".join("{0}={1}".format(k, v) for k, v in sorted(left.items())))


# --- names (scutil) ---------------------------------------------------------------------------

# scutil key -> (module option, the read in macos_commands.READS)
NAME_KEYS = (
    ("ComputerName", "computer_name", "computer_name"),
    ("LocalHostName", "local_host_name", "local_host_name"),
    ("HostName", "host_name", "host_name"),
)
_LOCAL_HOST_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def check_local_host_name(name):
    """None when name is a valid LocalHostName, else why not."""
    if not _LOCAL_HOST_NAME.match(name):
        return ("local_host_name {0!r}: use letters, digits and hyphens only (at most 63, "
                "no hyphen first or last)".format(name))
    return None


def check_names(wanted):
    """None when every wanted {key: name} can be set, else why not (one line)."""
    for key, value in wanted.items():
        if not value.strip():
            return "{0}: an empty name cannot be set".format(key)
    local = wanted.get("LocalHostName")
    return check_local_host_name(local) if local is not None else None


def scutil_value(key, rc, out, err):
    """The name from `scutil --get KEY` (None when not set); ValueError on any other failure."""
    if rc == 0:
        return macos_parsers.parse_scutil_get(out)
    if "{0}: not set".format(key) in (out + err).splitlines():
        return None
    raise ValueError("scutil --get {0} failed (rc {1}): {2}".format(key, rc, (err or out).strip()))


def plan_names(current, wanted):
    """{key: value} for every wanted (non-None) name that differs from current."""
    return dict((key, value) for key, value in wanted.items()
                if value is not None and current.get(key) != value)


def render_names(names):
    return "".join("{0}: {1}\n".format(key, "(not set)" if names[key] is None else names[key])
                   for key, dummy, dummy in NAME_KEYS if key in names)


def apply_names(module, changes):
    """scutil --set each changed name, in NAME_KEYS order; ValueError when one fails."""
    scutil = module.get_bin_path("scutil", required=True)
    for key, dummy, dummy in NAME_KEYS:
        if key in changes:
            run_checked(module, [scutil, "--set", key, changes[key]])


# --- sysctl -----------------------------------------------------------------------------------

SYSCTL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$")


def sysctl_value(name, rc, out, err):
    """The value `sysctl NAME ...` printed for name; ValueError for an unknown name or a failure."""
    try:
        values = macos_parsers.parse_sysctl(out + err)
    except ValueError:
        values = {}
    if name in values and values[name] is None:
        raise ValueError("sysctl: unknown oid '{0}' on this Mac".format(name))
    if name not in values:
        raise ValueError("sysctl {0} failed (rc {1}): {2}".format(name, rc, (err or out).strip()))
    return values[name]


def write_sysctl(module, name, value):
    """sysctl -w name=value; ValueError when it fails."""
    run_checked(module, [module.get_bin_path("sysctl", required=True), "-w", "{0}={1}".format(name, value)])


# --- the GPU wired-memory limit at boot (a LaunchDaemon) --------------------------------------

WIRED_LIMIT = "iogpu.wired_limit_mb"


def wired_limit_mb(limit_mb, fraction, memory_bytes):
    """The limit in MB from the options (MB wins; 0 and 0: macOS's default, 0); ValueError when the
    Mac cannot take it."""
    memory_mb = memory_bytes // (1 << 20)
    if limit_mb < 0 or not 0 <= fraction < 1:
        raise ValueError("wired_limit_mb={0} / wired_limit_fraction={1}: use a size in MB >= 0 or a fraction "
                         "in [0, 1)".format(limit_mb, fraction))
    if (limit_mb or fraction) and not memory_mb:
        raise ValueError("sysctl hw.memsize: this Mac's memory size is unknown; cannot check the wired limit")
    target = limit_mb if limit_mb > 0 else int(memory_mb * fraction)
    if target >= memory_mb > 0:
        raise ValueError("wired_limit_mb={0} is not below this Mac's memory ({1} MB); use a smaller size or "
                         "a fraction".format(target, memory_mb))
    return target


def wired_limit_plist(label, limit_mb):
    """The LaunchDaemon's plist: sysctl -w iogpu.wired_limit_mb=N at every boot."""
    return plistlib.dumps({
        "Label": label,
        "ProgramArguments": ["/usr/sbin/sysctl", "-w", "{0}={1}".format(WIRED_LIMIT, limit_mb)],
        "RunAtLoad": True,
    }).decode("utf-8")


UNKNOWN = "unknown"


def defaults_bool(warn, key, rc, out, err):
    """A boolean preference as `defaults read DOMAIN KEY` reports it: True, False, or None when not set; UNKNOWN,
    with a warning quoting the output (warn), when it is in a wording never seen on a Mac or the read failed:
    one preference, so the Mac's other settings still count, and its caller leaves this one alone."""
    try:
        if rc not in (0, 1):
            raise ValueError("defaults read failed (rc {0}): {1}".format(rc, (err or out).strip()))
        return macos_parsers.parse_defaults_bool(out + err)
    except ValueError as exc:
        warn("{0}: {1}; read as unknown, left alone".format(key, exc))
        return UNKNOWN


# --- network service order (networksetup -ordernetworkservices) --------------------------------------

BRIDGE_SERVICE_PORT = "Thunderbolt Bridge"


def is_thunderbolt_service(service):
    """A service of a Thunderbolt port or the Thunderbolt Bridge (parse_network_service_order's entries)."""
    port = service.get("hardware_port") or ""
    return port == BRIDGE_SERVICE_PORT or macos_parsers.is_thunderbolt_port(port)


def thunderbolt_last(services):
    """The services' names with the Thunderbolt ones after all others, each group in its current order: macOS
    then never prefers a Thunderbolt service (for the default route or DNS) over Ethernet or Wi-Fi."""
    return ([s["name"] for s in services if not is_thunderbolt_service(s)]
            + [s["name"] for s in services if is_thunderbolt_service(s)])

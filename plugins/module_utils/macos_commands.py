# -*- coding: utf-8 -*-
"""Every read-only macOS command whose output mlx-fleet reads, in one place.

Modules run them through ``run_reads`` and ``mlx-fleet capture`` records exactly this
list from a real Mac, so a capture always holds what the toolkit would have read, and
a replayed node (``mlx-fleet sim up --replay``) can answer every one of them.
Stdlib only, Python 3.9 compatible: it runs on the Mac's /usr/bin/python3.
"""

from __future__ import absolute_import, division, print_function

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import WIRED_LIMIT_LABEL

__metaclass__ = type

# sysctl names read in one call; an unknown name only fails its own line.
SYSCTL_NAMES = (
    "hw.model", "hw.memsize", "hw.ncpu", "hw.optional.arm64", "kern.osversion",
    "kern.osproductversion", "machdep.cpu.brand_string", "iogpu.wired_limit_mb",
)
# Where macOS keeps the Software Update settings, and the one that installs macOS updates by itself.
SOFTWARE_UPDATE_DOMAIN = "/Library/Preferences/com.apple.SoftwareUpdate"
AUTO_INSTALL_MACOS = "AutomaticallyInstallMacOSUpdates"
# The wired-limit LaunchDaemon's label is macos_node_wired_limit_label's default (module_utils.defaults); a read
# of another label passes its own argv to run_reads.
# Seconds one read may take (system_profiler takes a second or two, the environment probe hashes files): a
# tool that hangs fails its read (exit TIMED_OUT, as timeout(1) reports it) instead of holding the module.
READ_TIMEOUT = 300
TIMED_OUT = 124

READS = {
    "sw_vers": ("sw_vers",),
    "sysctl": ("sysctl",) + SYSCTL_NAMES,
    "boottime": ("sysctl", "kern.boottime"),
    "hardware": ("system_profiler", "SPHardwareDataType", "-json"),
    "thunderbolt": ("system_profiler", "SPThunderboltDataType", "-json"),
    "groups": ("id", "-Gn"),
    "sudo": ("sudo", "-n", "true"),
    "hardware_ports": ("networksetup", "-listallhardwareports"),
    "service_order": ("networksetup", "-listnetworkserviceorder"),
    "ifconfig": ("ifconfig",),
    "pmset": ("pmset", "-g", "custom"),
    "computer_name": ("scutil", "--get", "ComputerName"),
    "local_host_name": ("scutil", "--get", "LocalHostName"),
    "host_name": ("scutil", "--get", "HostName"),
    "xcode_select": ("xcode-select", "-p"),
    "ibv_devices": ("ibv_devices",),
    "ibv_devinfo": ("ibv_devinfo", "-v"),  # -v: each port's GID table (its IPv4-mapped GID)
    "rdma_ctl": ("rdma_ctl", "status"),
    "default_route": ("route", "-n", "get", "default"),
    "filevault": ("fdesetup", "status"),
    # exo's LaunchDaemon that resets the Thunderbolt ports to DHCP (a competing network manager).
    "exo_networksetup": ("launchctl", "print", "system/io.exo.networksetup"),
    "wired_limit_daemon": ("launchctl", "print", "system/" + WIRED_LIMIT_LABEL),
    # Exit status 1 with "No new software available." on stderr when nothing is pending.
    "softwareupdate": ("softwareupdate", "--list"),
    # Exit status 1 and "The domain/default pair of (...) does not exist" when not set.
    "auto_install_macos": ("defaults", "read", SOFTWARE_UPDATE_DOMAIN, AUTO_INSTALL_MACOS),
}
# The reads above of LaunchDaemons that reconfigure the Thunderbolt ports: read name -> launchd label.
COMPETING_DAEMON_READS = {"exo_networksetup": "io.exo.networksetup"}


def capture_name(name):
    """File name a capture stores a read's output under."""
    return name + ".txt"


def capture(module, argv):
    """(rc, stdout, stderr) of a read-only command, both read to the end, in the C locale.

    Not module.run_command: its select loop can stop once the command has exited after a select
    timeout with its last output still unread (ansible/ansible#51393); a command silent for over a
    second (system_profiler, a hashing probe) that then prints everything loses it, and reads side
    by side in threads make that likely. communicate() reads both pipes to their end.
    """
    env = dict(os.environ, LC_ALL="C")
    env.pop("PYTHONPATH", None)  # Ansible's own module path, nothing the Mac's tools want
    try:
        process = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=env)
    except OSError as exc:
        module.fail_json(msg="{0}: cannot run it ({1})".format(argv[0], exc))
    try:
        out, err = process.communicate(timeout=READ_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return TIMED_OUT, "", "{0}: no answer within {1} s".format(" ".join(argv), READ_TIMEOUT)
    return (process.returncode, to_native(out, errors="surrogate_or_strict"),
            to_native(err, errors="surrogate_or_strict"))


def run_concurrently(module, argvs):
    """Run read-only commands all at once; [(rc, stdout, stderr)] in their order. A program not
    on PATH gives rc 127 rather than failing the module, so callers can name the missing tool.

    system_profiler takes a second or two on a Mac: the slowest command sets the time, not their sum.
    """
    def run(argv):
        path = module.get_bin_path(argv[0])
        if path is None:
            return 127, "", "{0}: command not found".format(argv[0])
        return capture(module, [path] + list(argv[1:]))

    with ThreadPoolExecutor(max_workers=max(len(argvs), 1)) as pool:
        return list(pool.map(run, argvs))


def run_reads(module, names, argvs=None):
    """Run the named reads, all at once; returns {name: (rc, stdout, stderr)}.

    argvs: {name: argv} for reads whose argument the inventory chooses (the same tool and form as
    READS[name], e.g. another launchd label)."""
    names = list(dict.fromkeys(names))
    return dict(zip(names, run_concurrently(module, [(argvs or {}).get(name) or READS[name] for name in names])))


def output_of(module, results, name):
    """A read's stdout; a failed read fails the module naming the command."""
    rc, out, err = results[name]
    if rc != 0:
        module.fail_json(msg="{0} failed (exit {1}): {2}".format(" ".join(READS[name]), rc, (err or out).strip()))
    return out


def parse_or_fail(module, parser, text, *args):
    """Parse an output; a format the parser does not know fails the module naming the command."""
    try:
        return parser(text, *args)
    except ValueError as exc:
        module.fail_json(msg="unexpected output: {0}".format(exc))


def parse_or_warn(module, parser, text, *args):
    """parse_or_fail for a line-by-line parser: a line of unknown wording is left out with a warning
    quoting it, so one new line in a macOS update does not fail the whole Mac."""
    warnings = []
    parsed = parse_or_fail(module, lambda out, *more: parser(out, *more, warnings=warnings), text, *args)
    for warning in warnings:
        module.warn(warning)
    return parsed


def start_detached(argv, stdin_text, log_fd):
    """Start a command in its own session with STDIN_TEXT on its standard input (a secret never goes in
    argv), its output to LOG_FD (the caller's open log); it outlives the module and its SSH connection.
    Returns the Popen (poll() says whether it ended)."""
    process = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=log_fd, stderr=log_fd,
                               start_new_session=True, close_fds=True, env=dict(os.environ, LC_ALL="C"))
    try:
        process.stdin.write(stdin_text.encode())
        process.stdin.close()
    except BrokenPipeError:
        pass  # it ended without reading its input: its exit status and output say why
    return process

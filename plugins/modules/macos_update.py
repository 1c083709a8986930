#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: macos_update
short_description: Start a macOS update on a Mac and confirm that its preparation started
description:
  - "Runs C(softwareupdate --install LABEL --agree-to-license --restart --user OWNER --stdinpass) detached, with the
    volume owner's password written to its standard input (never in its arguments, never in a file), and waits
    at most O(confirm_timeout) seconds for its output to say the download or the preparation began
    (C(Downloading ...), C(Downloaded: ...), C(Restarting...)) or that it failed (C(failed to authorize for
    installation))."
  - Returns once the preparation has started. The Mac then prepares the update for minutes and restarts by itself;
    this module never forces a restart (that aborts the update). Waiting for the Mac and checking it are the
    C(mlx_fleet.cluster.os_update) action's.
  - Does nothing when C(sw_vers) already reports O(build).
  - Needs root (C(become)); on Apple silicon root alone cannot install an OS update, hence O(user) and O(password).
  - The install's output is appended to O(log) (root only; a rerun keeps the earlier output); it never holds the
    password. The log's folder must be root's and not writable by others, and the log is never opened through a
    symbolic link.
version_added: "0.3.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  label:
    description: The update's label as C(softwareupdate --list) shows it (C(macOS Tahoe 26.5.2-25F84)).
    type: str
    required: true
  build:
    description: The build the update installs (C(25F84)).
    type: str
    required: true
  user:
    description: A volume owner of the Mac (an admin who can unlock its disk).
    type: str
    required: true
  password:
    description: That user's password; given to C(softwareupdate) on its standard input only.
    type: str
    required: true
  confirm_timeout:
    description: Seconds to wait for the output to show the preparation started.
    type: int
    default: 120
  log:
    description: Where the install's output is kept on the Mac.
    type: path
    default: /Library/Logs/mlx-fleet/softwareupdate-install.log
attributes:
  check_mode:
    description: In check mode it reads the build and returns whether it would start the install.
    support: full
  diff_mode:
    description: It returns no diff.
    support: none
  platform:
    description: The operating systems it runs on.
    support: full
    platforms: darwin
"""

EXAMPLES = r"""
- name: Start installing macOS 26.5.2
  mlx_fleet.cluster.macos_update:
    label: macOS Tahoe 26.5.2-25F84
    build: 25F84
    user: admin
    password: "{{ volume_owner_password }}"
  become: true
  no_log: true
"""

RETURN = r"""
started:
  description: The output showed the download or the preparation starting.
  type: bool
  returned: always
output:
  description: The install command's output so far (never the password).
  type: str
  returned: when it ran
build:
  description: The build C(sw_vers) reported before.
  type: str
  returned: always
error:
  description: The install command's line that says it failed, as it printed it.
  type: str
  returned: when it failed
"""

import errno
import os
import stat
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    output_of, parse_or_fail, run_reads, start_detached)


class UnsafeLog(Exception):
    """The log's folder or file is one another account could swap for a link to a file root then writes."""


def open_log(path):
    """The install's log opened for appending (a rerun keeps the earlier runs' output), in a folder only root
    can change, never through a link; (fd, the offset where this run's output starts)."""
    folder, name = os.path.split(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        info = os.fstat(folder_fd)
        if info.st_uid != 0 or info.st_mode & 0o022:
            raise UnsafeLog("{0}: owned by uid {1} with mode {2:o}; the install's log needs a folder only root can "
                            "change (chown root and chmod go-w it, or give another log)".format(
                                folder, info.st_uid, info.st_mode & 0o7777))
        try:
            fd = os.open(name, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=folder_fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeLog("{0}: a symbolic link; remove it (the install's log is never written through a "
                                "link)".format(path))
            raise
    finally:
        os.close(folder_fd)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != 0:
        os.close(fd)
        raise UnsafeLog("{0}: not a regular file of root's; remove it".format(path))
    return fd, info.st_size


def read_from(fd, offset):
    """What the log holds from OFFSET on."""
    return os.pread(fd, max(0, os.fstat(fd).st_size - offset), offset).decode("utf-8", "replace")


ARGUMENT_SPEC = dict(
    label=dict(type="str", required=True),
    build=dict(type="str", required=True),
    user=dict(type="str", required=True),
    password=dict(type="str", required=True, no_log=True),
    confirm_timeout=dict(type="int", default=120),
    log=dict(type="path", default="/Library/Logs/mlx-fleet/softwareupdate-install.log"),
)


def installed_build(module):
    return parse_or_fail(module, parsers.parse_sw_vers,
                         output_of(module, run_reads(module, ["sw_vers"]), "sw_vers"))["build_version"]


def watch(process, fd, offset, timeout):
    """Follow the install's log until it says it started, fails or ends, or TIMEOUT seconds pass;
    (its output, what it said, whether it ended)."""
    deadline = time.monotonic() + timeout
    while True:
        text = read_from(fd, offset)
        said = parsers.parse_softwareupdate_install(text)
        done = process.poll() is not None
        if said["error"] or said["started"] or done or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if done:
        text = read_from(fd, offset)  # all it wrote before it ended
        said = parsers.parse_softwareupdate_install(text)
    return text, said, done


def install(module, build):
    """Start the install and see its preparation begin; the result, or the module fails."""
    p = module.params
    tool = module.get_bin_path("softwareupdate", required=True)
    argv = [tool, "--install", p["label"], "--agree-to-license", "--restart", "--user", p["user"], "--stdinpass"]
    try:
        fd, offset = open_log(p["log"])
    except UnsafeLog as exc:
        module.fail_json(msg=str(exc), started=False, build=build)
    try:
        # Its own session: the install outlives this module and the SSH connection that started it.
        process = start_detached(argv, p["password"] + "\n", fd)
        text, said, done = watch(process, fd, offset, p["confirm_timeout"])
    finally:
        os.close(fd)
    if said["error"] or (done and process.returncode != 0):
        why = said["error"] or said["last"] or "exit {0}".format(process.returncode)
        module.fail_json(msg="softwareupdate --install failed: {0}".format(why), started=False, output=text,
                         build=build, error=why)
    if not said["started"]:
        why = "it ended without downloading or preparing anything" if done else \
            "its output showed no download or preparation within {0} s".format(p["confirm_timeout"])
        module.fail_json(msg="the update's preparation did not start: {0} (last line: {1!r})".format(why, said["last"]),
                         started=False, output=text, build=build)
    return dict(changed=True, started=True, output=text, build=build)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    build = installed_build(module)
    if build == module.params["build"]:
        module.exit_json(changed=False, started=False, build=build)
    if module.check_mode:
        module.exit_json(changed=True, started=False, build=build)
    module.exit_json(**install(module, build))


if __name__ == "__main__":
    main()

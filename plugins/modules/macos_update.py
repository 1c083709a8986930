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
  - The install's output goes to O(log) (root only); it never holds the password.
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

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    output_of, parse_or_fail, run_reads, start_detached)


def main():
    module = AnsibleModule(
        argument_spec=dict(label=dict(type="str", required=True), build=dict(type="str", required=True),
                           user=dict(type="str", required=True), password=dict(type="str", required=True, no_log=True),
                           confirm_timeout=dict(type="int", default=120),
                           log=dict(type="path", default="/Library/Logs/mlx-fleet/softwareupdate-install.log")),
        supports_check_mode=True,
    )
    p = module.params
    sw = parse_or_fail(module, parsers.parse_sw_vers, output_of(module, run_reads(module, ["sw_vers"]), "sw_vers"))
    if sw["build_version"] == p["build"]:
        module.exit_json(changed=False, started=False, build=sw["build_version"])
    if module.check_mode:
        module.exit_json(changed=True, started=False, build=sw["build_version"])
    tool = module.get_bin_path("softwareupdate", required=True)
    argv = [tool, "--install", p["label"], "--agree-to-license", "--restart", "--user", p["user"], "--stdinpass"]
    folder = os.path.dirname(p["log"])
    if not os.path.isdir(folder):
        os.makedirs(folder, 0o755)
    # Its own session: the install outlives this module and the SSH connection that started it.
    process = start_detached(argv, p["password"] + "\n", p["log"])
    deadline = time.monotonic() + p["confirm_timeout"]
    while True:
        with open(p["log"]) as handle:
            text = handle.read()
        said = parsers.parse_softwareupdate_install(text)
        done = process.poll() is not None
        if said["error"] or said["started"] or done or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if said["error"] or (done and process.returncode != 0):
        why = said["error"] or said["last"] or "exit {0}".format(process.returncode)
        module.fail_json(msg="softwareupdate --install failed: {0}".format(why), started=False, output=text,
                         build=sw["build_version"], error=why)
    if not said["started"]:
        why = "it ended without downloading or preparing anything" if done else \
            "its output showed no download or preparation within {0} s".format(p["confirm_timeout"])
        module.fail_json(msg="the update's preparation did not start: {0} (last line: {1!r})".format(why, said["last"]),
                         started=False, output=text, build=sw["build_version"])
    module.exit_json(changed=True, started=True, output=text, build=sw["build_version"])


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: os_update_facts
short_description: Read what a macOS update of a Mac depends on, in one call
description:
  - Reads the Mac's macOS (C(sw_vers)), the updates Apple offers it (C(softwareupdate --list), which needs no
    authorisation), the processes of a running MLX job (C(ps -axo pid,ppid,etime,rss,command)) and, with O(checks), what an
    update must leave as it was (C(rdma_ctl status), the Thunderbolt ports' IPv4 addresses, whether the MLX
    environment's Python still imports C(mlx.core)). Changes nothing.
  - A process is an MLX job's when it is an C(mlx.launch) or runs from O(env_path) (module_utils.mlx_jobs, the
    read C(mlx-fleet ps) makes too). Run it with C(become) so every user's processes are listed.
  - The controller side (the plan, the order, the checks) is M(mlx_fleet.cluster.os_update_plan) and the
    C(mlx_fleet.cluster.os_update) action.
version_added: "0.3.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  env_path:
    description: The MLX environment (venv) whose processes are an MLX job, and whose Python must import MLX.
    type: path
    default: /opt/mlx-fleet/venv
  checks:
    description: Also read RDMA, the Thunderbolt addresses and whether the environment imports MLX.
    type: bool
    default: false
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.facts
"""

EXAMPLES = r"""
- name: Read every Mac's build, its offered updates and its MLX jobs
  mlx_fleet.cluster.os_update_facts:
    env_path: /opt/mlx-fleet/venv
  become: true
"""

RETURN = r"""
ansible_facts:
  description: What the Mac says.
  returned: success
  type: dict
  contains:
    mlx_fleet_os_update:
      description: C(version), C(build), C(updates) (as C(softwareupdate --list) lists them, each with C(label),
        C(title), C(version), C(build), C(macos)), C(warnings) (list lines in no known wording), C(jobs)
        (C(pid), C(command), C(age_seconds), C(rss_kib) of its process tree, C(pids) of that tree, C(launcher),
        C(orphan)); with O(checks) also C(rdma_enabled) (null when unknown), C(addresses) (per
        Thunderbolt device its IPv4 addresses) and C(mlx_imports) with C(mlx_error).
      type: dict
      returned: success
      sample: {"version": "26.2", "build": "25C56", "jobs": [], "updates": [{"label": "macOS Tahoe 26.5.2-25F84",
               "title": "macOS Tahoe 26.5.2", "version": "26.5.2", "build": "25F84", "macos": true}]}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import (
    output_of, parse_or_fail, parse_or_warn, run_reads)
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_jobs import PS, jobs

READS = ("sw_vers", "softwareupdate")
CHECK_READS = ("rdma_ctl", "hardware_ports", "ifconfig")


def updates(module, results):
    """The installed version and build, the pending updates, and the warnings of softwareupdate --list
    (each also given to Ansible)."""
    sw = parse_or_fail(module, parsers.parse_sw_vers, output_of(module, results, "sw_vers"))
    rc, out, err = results["softwareupdate"]
    listed = parsers.parse_softwareupdate_list(out + "\n" + err)
    if rc not in (0, 1) or (rc == 1 and parsers.SU_NOTHING not in err + out):
        listed["warnings"].append("softwareupdate --list failed (exit {0}): {1}".format(rc, (err or out).strip()))
    for warning in listed["warnings"]:
        module.warn(warning)
    return {"version": sw["product_version"], "build": sw["build_version"], "updates": listed["updates"],
            "warnings": listed["warnings"]}


def running_jobs(module, env_path):
    rc, out, err = module.run_command(PS, environ_update={"LC_ALL": "C"})
    if rc != 0:
        module.fail_json(msg="{0} failed (exit {1}): {2}".format(" ".join(PS), rc, (err or out).strip()))
    return jobs(parse_or_warn(module, parsers.parse_ps, out), env_path)


def checks(module, results, env_path):
    """What the checks after an update read: RDMA, the Thunderbolt ports' addresses, whether MLX imports."""
    rc, out, err = results["rdma_ctl"]
    facts = {"rdma_enabled": parsers.parse_rdma_ctl_status(out) if rc == 0 and out.strip() in (
        "enabled", "disabled") else None}
    ports = parse_or_fail(module, parsers.parse_hardware_ports, output_of(module, results, "hardware_ports"))
    interfaces = parse_or_fail(module, parsers.parse_ifconfig, output_of(module, results, "ifconfig"))
    facts["addresses"] = dict(
        (device, sorted(a["address"] for a in interfaces.get(device, {}).get("inet", [])))
        for device in parsers.thunderbolt_interfaces(ports).values())
    python = os.path.join(env_path, "bin", "python")
    if os.access(python, os.X_OK):
        rc, out, err = module.run_command([python, "-c", "import mlx.core"])
        facts["mlx_imports"], facts["mlx_error"] = rc == 0, (err.strip().splitlines() or [""])[-1]
    else:
        facts["mlx_imports"], facts["mlx_error"] = False, "{0} is missing".format(python)
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(env_path=dict(type="path", default="/opt/mlx-fleet/venv"),
                           checks=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    env_path = module.params["env_path"]
    results = run_reads(module, READS + (CHECK_READS if module.params["checks"] else ()))
    facts = dict(updates(module, results), jobs=running_jobs(module, env_path))
    if module.params["checks"]:
        facts.update(checks(module, results, env_path))
    module.exit_json(changed=False, ansible_facts={"mlx_fleet_os_update": facts})


if __name__ == "__main__":
    main()

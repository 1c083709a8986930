#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: os_update
short_description: Update one Mac to the planned macOS build, wait for it to come back, and check it
description:
  - An action plugin run on each Mac in the plan's order (C(serial 1)). Reads the Mac with
    M(mlx_fleet.cluster.os_update_facts); unless it already runs the target, starts the install with
    M(mlx_fleet.cluster.macos_update) (the volume owner's password only there, on its standard input), then waits
    at most O(timeout) seconds, looking every O(poll) seconds, for the Mac to restart by itself and come back on the
    target build. It never forces a restart.
  - Then checks the build, RDMA (still enabled if it was), the Thunderbolt ports' addresses (still there) and the
    MLX environment (still imports C(mlx.core)); then the Mac's audit (C(plugin_utils.checks.audit) on this Mac's
    M(mlx_fleet.cluster.node_state) read, as C(mlx-fleet audit) reads it); a finding about this Mac that its
    audit before the update did not have stops the run like the other checks.
  - On the first problem it fails with one line saying why; where a person is needed (FileVault at the login
    window, a Mac that did not come back, RDMA off) it writes a visit sheet C(os-update-visit-NAME.txt) into
    O(output_dir). Each step is written to the record C(os-update.json) there, so a rerun resumes.
  - The password comes from C(mlx-fleet os-update) over a private socket (environment C(MLX_FLEET_SECRET_SOCKET)),
    else from the variable C(mlx_fleet_os_update_password); it is never a task argument.
version_added: "0.3.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  plan:
    description: The plan M(mlx_fleet.cluster.os_update_plan) made (C(mlx_fleet_os_update_plan)).
    type: dict
    required: true
  output_dir:
    description: Where the record and the visit sheets go.
    type: path
    required: true
  user:
    description: The volume owner whose password authorises the install.
    type: str
    required: true
  env_path:
    description: The MLX environment to check.
    type: path
    default: /opt/mlx-fleet/venv
  timeout:
    description: Seconds the Mac may take to prepare, restart and come back.
    type: int
    default: 2400
  poll:
    description: Seconds between looks at the restarting Mac.
    type: float
    default: 10
  confirm_timeout:
    description: Seconds for the install's output to show the preparation started.
    type: int
    default: 120
  inventory:
    description: The inventory named on the visit sheet.
    type: str
attributes:
  action:
    description: An action plugin; it runs modules on the Mac and waits on the controller.
    support: full
  check_mode:
    description: Not supported; plan with M(mlx_fleet.cluster.os_update_plan) and its C(check) option instead.
    support: none
  diff_mode:
    description: It returns no diff.
    support: none
  platform:
    description: The Macs.
    support: full
    platforms: darwin
"""

EXAMPLES = r"""
- name: Install, wait for the Mac to come back, and check it
  mlx_fleet.cluster.os_update:
    plan: "{{ mlx_fleet_os_update_plan }}"
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    user: admin
  become: true
"""

RETURN = r"""
problem:
  description: On failure, the reason, whether a person must go to the Mac (visit), and the steps.
  returned: failure
  type: dict
visit_sheet:
  description: The visit sheet written for the person who goes to the Mac.
  returned: failure, when a person must go to the Mac
  type: str
"""

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: os_update_hold
short_description: Whether an unfinished macOS update holds the cluster (its hostfiles must not be used)
description:
  - Reads the record of M(mlx_fleet.cluster.os_update) (C(os-update.json) in O(output_dir)). While an update is
    unfinished and a Mac's build may already differ from the others, the cluster is held - JACCL needs one build on
    every Mac - until C(mlx-fleet os-update) finishes it.
  - Keeps C(hostfile.held) in O(output_dir) as the record says (one line; removed once released), beside the
    hostfiles, which stay as they are (C(mlx.launch) reads only C(hostfile.json)). Nothing is written in check mode.
  - Returns the hold line for the tasks that put the same C(hostfile.held) on every Mac (the mlx_fabric role's
    C(held) entry point), and as a warning for the run's summary.
  - Runs on the controller only (C(plugin_utils.checks.os_update)); run it once per play.
version_added: "0.3.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: Where the record and the hostfiles are kept.
    type: path
    required: true
  inventory:
    description: The inventory as the user gave it, for the line's C(mlx-fleet os-update -i INVENTORY).
    type: str
  starting:
    description: An update is about to install (os-update's plan is made); held already, no warning.
    type: bool
    default: false
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Read whether an unfinished macOS update holds the cluster
  mlx_fleet.cluster.os_update_hold:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
  run_once: true
  register: hold
"""

RETURN = r"""
held:
  description: Whether the cluster is held.
  returned: success
  type: bool
line:
  description: The hold in one line (empty when not held).
  returned: success
  type: str
  sample: "held: os-update in progress (1 of 4 Macs on 25F84, macOS 26.5.2; ...); run mlx-fleet os-update -i inv
    to finish"
"""

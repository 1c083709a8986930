#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: os_update_plan
short_description: Plan a macOS update of the cluster (the target, the order, the record to resume from)
description:
  - Reads from hostvars what M(mlx_fleet.cluster.os_update_facts) set on every Mac (C(mlx_fleet_os_update)) and
    decides, before any Mac changes, the target (O(to), else the newest macOS update every Mac is offered or
    already runs), the Macs to update and their order (the canary first, never rank 0; the others in inventory
    order; rank 0, the group's first host, last).
  - Refuses, naming the Mac, while an MLX job runs on any Mac, or when a Mac is not offered the target.
  - Resumes from the record C(os-update.json) in O(output_dir) - a Mac done for this target is left alone - and
    writes the plan into it (unless O(check)).
  - Sets the fact C(mlx_fleet_os_update_plan); runs on the controller only (C(plugin_utils.checks.os_update)); run it
    once per play.
version_added: "0.3.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: Where the record is kept.
    type: path
    required: true
  to:
    description: The target version or build; the newest common one when omitted.
    type: str
  canary:
    description: The Mac updated first (not rank 0); the first Mac that is not rank 0 when omitted.
    type: str
  check:
    description: Plan only; write no record.
    type: bool
    default: false
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Plan the update
  mlx_fleet.cluster.os_update_plan:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    to: "26.5.2"
  run_once: true
"""

RETURN = r"""
plan:
  description: target (version, build), labels (per Mac the update's label), current (per Mac version, build),
    offers (per Mac the macOS updates offered), order, install (the Macs to install on), done (done earlier),
    rank0, resumed.
  returned: success
  type: dict
"""

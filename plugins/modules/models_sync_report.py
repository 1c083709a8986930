#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: models_sync_report
short_description: Say what a models sync moved, per Mac, from where and at what rate
description:
  - Reads every Mac's C(mlx_fleet_model_copy) facts (M(mlx_fleet.cluster.model_copy)) against O(plan)
    (M(mlx_fleet.cluster.models_sync_plan)'s), per Mac the files and bytes received, the senders, the rate, the
    files that failed and why. A Mac without the facts received nothing.
  - Prints one line per Mac and a last line (also returned as C(msg)). Runs on the controller only (an action
    plugin); run it once per play.
version_added: "0.5.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: The cluster's output folder (C(mlx_fleet_output_dir)).
    type: path
    required: true
  plan:
    description: The C(plan) of M(mlx_fleet.cluster.models_sync_plan)'s result.
    type: dict
    required: true
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: What moved
  mlx_fleet.cluster.models_sync_report:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    plan: "{{ mlx_fleet_models_sync_plan.plan }}"
  run_once: true
"""

RETURN = r"""
report:
  description: C(rows) (per Mac C(mac), C(planned), C(received), C(bytes), C(seconds), C(senders), C(failed),
    C(done)), C(bytes), C(complete).
  returned: success
  type: dict
"""

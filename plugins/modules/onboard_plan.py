#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: onboard_plan
short_description: Check a new Mac against the cluster, advise the cables to add and print the visit sheet
description:
  - Reads every host's C(mlx_fleet_macos) and C(mlx_fleet_thunderbolt) facts from hostvars (set them first with
    M(mlx_fleet.cluster.macos_facts) and M(mlx_fleet.cluster.thunderbolt_facts)); O(host) is the Mac joining.
  - Refuses a serial number the inventory already has under another name. Takes the model from
    C(mlx_fleet_model), or derives it from the Mac's model identifier. Warns when the Mac runs another macOS
    build than the cluster.
  - The logic lives in C(plugin_utils.checks.onboarding); advises the cables to add (see docs/onboarding.md)
    from the ports every Mac has free, the cables found and
    planned (C(mlx_fleet_cables)) and the backend (C(mlx_fleet_backend)); C(jaccl) wants a full mesh on ports
    that carry RDMA, and when the ports make it impossible the module fails saying why and what the ring
    alternative is. With C(auto), a cluster cabled as a full mesh is advised a full mesh, and the ring
    alternative is taken (and said) when a mesh is impossible.
  - "Writes the visit sheet (C(onboard-HOST.html), C(onboard-HOST.txt)) into O(output_dir): the cables with both
    ends, the Recovery step when the Mac needs RDMA enabled, and O(afterwards). Nothing is written in check mode."
  - Runs on the controller only (an action plugin); run it once per play.
version_added: "0.2.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  host:
    description: The inventory name of the Mac joining the cluster.
    type: str
    required: true
  output_dir:
    description: The folder next to the hostfile (C(mlx_fleet_output_dir)).
    type: path
    required: true
  inventory:
    description: The inventory path printed on the sheet.
    type: str
    required: true
  afterwards:
    description: Commands to run from the controller once the visit is done, printed on the sheet.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Advise the cables for studio-4 and print the visit sheet
  mlx_fleet.cluster.onboard_plan:
    host: studio-4
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    inventory: "{{ inventory_file }}"
    afterwards: ["mlx-fleet converge -i inventory/mine"]
  run_once: true
"""

RETURN = r"""
model:
  description: The Mac's model key (null when mlx-fleet has no model for its identifier).
  returned: success
  type: str
serial_number:
  description: The Mac's serial number.
  returned: success
  type: str
backend:
  description: The backend the advised cabling runs (jaccl, jaccl-ring or ring).
  returned: success
  type: str
headline:
  description: What the advice comes to ("3 cables to add for a full mesh (jaccl)"); summary adds the steps.
  returned: success
  type: str
steps:
  description: What to do at the rack, in order ("connect studio-4 Thunderbolt 2 to studio-1 Thunderbolt 4").
  returned: success
  type: list
  elements: str
add:
  description: The cables to add to C(mlx_fleet_cables), lower end first.
  returned: success
  type: list
  elements: str
unplug:
  description: Planned cables to take out first (and out of C(mlx_fleet_cables)), when a ring needs a port freed.
  returned: success
  type: list
  elements: str
seen:
  description: Advised cables already plugged in.
  returned: success
  type: list
  elements: str
seen_steps:
  description: The steps whose cable is in already.
  returned: success
  type: list
  elements: str
needs_recovery:
  description: Whether the sheet carries the Recovery step for the Mac.
  returned: success
  type: bool
sheet:
  description: Paths of the HTML and text visit sheet.
  returned: success
  type: dict
"""

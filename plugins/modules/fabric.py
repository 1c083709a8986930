#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric
short_description: Build the Thunderbolt fabric from every Mac's ports and write the mlx.launch hostfiles
description:
  - Joins the C(mlx_fleet_thunderbolt) facts of every host in O(group) into the cabling graph, checks it
    against the cable plan (C(mlx_fleet_cables)), decides the backend (C(mlx_fleet_backend)), warns where a
    user would get hurt later, and gives each cable a stable /30 from C(mlx_fleet_ip_pool). See docs/fabric.md.
  - Writes the picture, C(fabric.dot) and C(fabric.svg), into O(output_dir) on every run, faults in red; a failed
    run names it. The picture reports what was read, so rewriting it is not a change.
  - With O(write), also writes C(hostfile.json), C(hostfile-ring.json) (when a ring exists) and
    C(fabric-addresses.json), only when the fabric has no errors, so a failed run leaves the last good hostfile in
    place. Every file is replaced atomically and only when its content changes.
  - Fails with one line per problem (missing cables with the ports to connect, wrong ports with the move,
    slow links, topologies the backend needs).
  - Runs on the controller only (an action plugin); use it with C(run_once).
version_added: "0.1.0"
author: mlx-fleet contributors
options:
  output_dir:
    description: Controller folder for the hostfiles, the address ledger and the pictures.
    type: path
    required: true
  write:
    description: Write the hostfiles and the address ledger, not only the picture (nothing is written in check
      mode either way).
    type: bool
    default: true
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Build the fabric and write the hostfiles
  mlx_fleet.cluster.fabric:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
  run_once: true
"""

RETURN = r"""
backend:
  description: The backend the hostfile is for (null when none can run).
  returned: always
  type: str
reason:
  description: Why that backend; with C(auto), what it chose and why.
  returned: always
  type: str
cables:
  description: Cables found, C(host:port -- host:port) to speed in Gb/s.
  returned: always
  type: dict
addresses:
  description: Each cable's /30.
  returned: always
  type: dict
network:
  description: Per host, the ports to configure, as M(mlx_fleet.cluster.thunderbolt_network) takes them
    (device, hardware_port, address, prefix, peer).
  returned: always
  type: dict
findings:
  description: The cable plan compared with the cables found.
  returned: always
  type: list
  elements: dict
warnings:
  description: Things that will hurt later.
  returned: always
  type: list
  elements: str
errors:
  description: Why no hostfile could be written.
  returned: always
  type: list
  elements: str
hostfile:
  description: Path of the hostfile on the controller.
  returned: always
  type: str
hostfiles:
  description: The texts of C(hostfile.json) and C(hostfile-ring.json) (null when there is no ring, or both
    null when the fabric has errors), as M(mlx_fleet.cluster.hostfiles) takes them.
  returned: always
  type: dict
"""

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
    C(cluster.json) (the cluster model, which replaces the address ledger C(fabric-addresses.json) of earlier
    versions, read once so every cable keeps its /30), published together with the picture as one set; the
    hostfiles only when the fabric has no errors, every host of the group is still in the play (none failed or
    stopped answering earlier in the run), and every address of the fabric is on its port by the hosts'
    C(mlx_fleet_thunderbolt) facts. Otherwise the last good hostfiles stay in place. Every file is replaced only
    when its content changes.
  - With O(write=false) before a network step, RV(publication) carries what
    M(mlx_fleet.cluster.fabric_publish) writes once that step came through, so the fabric is judged once.
  - Writing holds the output folder's run lock (C(run.lock)); a second run waits for it (30 s, or
    E(MLX_FLEET_LOCK_WAIT) seconds) and then fails naming the run that holds it.
  - Given O(bridge), fails before any Mac is touched when the network plan would turn off, re-address or bridge
    the interface a Mac is managed over (C(management_interface) in C(mlx_fleet_macos)).
  - Fails with one line per problem (missing cables with the ports to connect, wrong ports with the move,
    slow links, topologies the backend needs).
  - Runs on the controller only (an action plugin); use it with C(run_once).
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: Controller folder for the hostfiles, the cluster model and the pictures.
    type: path
    required: true
  write:
    description: Write the hostfiles and the cluster model, not only the picture (nothing is written in check
      mode either way).
    type: bool
    default: true
  bridge:
    description:
      - What M(mlx_fleet.cluster.thunderbolt_network) will do to the Thunderbolt Bridge with the returned
        RV(network); given, the plan is checked to keep every Mac's management interface untouched.
      - Leave it out when the network is not configured in this run.
    type: str
    choices: [disabled, enabled, unchanged]
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
cable_ends:
  description: Cables found, each as its two ends C([[host, Thunderbolt port], [host, Thunderbolt port]]).
  returned: always
  type: list
  elements: list
addresses:
  description: Each cable's /30.
  returned: always
  type: dict
ip_pool:
  description: The pool the /30s come from - C(mlx_fleet_ip_pool), or with none set the range chosen (and
    kept in C(cluster.json)).
  returned: always
  type: str
ip_pool_note:
  description: With no C(mlx_fleet_ip_pool), the line saying which range was chosen on this run; null otherwise.
  returned: always
  type: str
network:
  description: Per host, the ports to configure, as M(mlx_fleet.cluster.thunderbolt_network) takes them
    (device, hardware_port, address, prefix, peer).
  returned: always
  type: dict
changes:
  description: With no cable plan, what changed since the cables of the cluster model (the last converge), one
    line each (a cable moved, two cables swapped on one Mac, a cable unplugged, a new cable).
  returned: always
  type: list
  elements: str
  sample: ["cable mini-1:1 -- mini-2:1 moved to mini-1:1 -- mini-2:3"]
configure_on:
  description: The Macs whose ports differ from RV(network) by their facts (a planned address not on its port, or
    a port out of the fabric still holding an address of the ledger's cables); the role's C(hostfiles) entry point
    configures only these.
  returned: always
  type: list
  elements: str
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
dropped:
  description: The Macs that failed or did not answer earlier in the run; the fabric then builds nothing, writes
    nothing, and returns only this and a message.
  returned: when a Mac dropped out of the run
  type: list
  elements: str
  sample: [studio-3]
hostfile_dir:
  description: The folder the mlx_fabric role puts the hostfiles in on every Mac (C(mlx_fabric_hostfile_dir)); null
    outside the role.
  returned: always
  type: str
  sample: /opt/mlx-fleet
write_on:
  description: The Macs whose hostfiles differ from RV(hostfiles), here every Mac (what each has is known after its
    network step, which M(mlx_fleet.cluster.fabric_publish) returns).
  returned: always
  type: list
  elements: str
  sample: [studio-3]
publication:
  description: What M(mlx_fleet.cluster.fabric_publish) writes (the picture's source, the hostfiles and the
    cluster model), so the fabric is judged once per run.
  returned: always
  type: dict
bridge_cautions:
  description: The warnings about an active Thunderbolt Bridge held back because O(bridge=disabled) turns it off
    (each with its C(host) and C(message)); M(mlx_fleet.cluster.fabric_publish) says those still on after the
    network step.
  returned: always
  type: list
  elements: dict
"""

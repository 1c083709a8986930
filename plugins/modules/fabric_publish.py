#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: fabric_publish
short_description: Write the fabric's hostfiles, cluster model and picture once the network step came through
description:
  - Publishes what M(mlx_fleet.cluster.fabric) judged before the network step (its RV(mlx_fleet.cluster.fabric#module:publication)), namely
    C(hostfile.json), C(hostfile-ring.json) (when a ring exists), C(cluster.json) and the picture, as one set
    in O(output_dir). The fabric is not judged again.
  - Writes only when every host of the group is still in the play, the cables each Mac's network step read back
    are the ones it configured, and every address the hostfiles name is on its port; otherwise fails with one
    line and the last good hostfiles stay in place. Every file is replaced only when its content changes.
  - It writes under the output folder's run lock, as M(mlx_fleet.cluster.fabric) does, on the controller only (an
    action plugin, used with C(run_once)).
version_added: "0.3.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: Where the fabric's files are published (O(mlx_fleet.cluster.fabric#module:output_dir)).
    type: path
    required: true
  fabric:
    description: The result of M(mlx_fleet.cluster.fabric) with O(mlx_fleet.cluster.fabric#module:write=false) the
      network step was configured from.
    type: dict
    required: true
  network:
    description:
      - Per host, its M(mlx_fleet.cluster.thunderbolt_network) result (with
        O(mlx_fleet.cluster.thunderbolt_network#module:read_ports) and
        O(mlx_fleet.cluster.thunderbolt_network#module:hostfile_dir)); null for a host whose step did not run.
      - The ports it read back feed the write guard; the hostfiles' sha256 it read leave out of RV(write_on) the
        Macs whose copies are already these. A host whose step did not run is judged by its fact
        C(mlx_fleet_hostfiles) (M(mlx_fleet.cluster.macos_facts) with
        O(mlx_fleet.cluster.macos_facts#module:hostfile_dir)), when it has one.
    type: dict
    default: {}
  held:
    description:
      - The line of an unfinished macOS update's hold (M(mlx_fleet.cluster.os_update_hold)'s
        RV(mlx_fleet.cluster.os_update_hold#module:line)), empty when not held. While held, RV(write_on) names the
        Macs whose C(hostfile.held) differs (their hostfiles stay as they are); otherwise also those that still
        have one.
    type: str
    default: ""
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Publish the fabric once every Mac's ports are configured
  mlx_fleet.cluster.fabric_publish:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    fabric: "{{ fabric_plan }}"
    network: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars)
      | map(attribute='network_step', default=None))) }}"
  run_once: true
"""

RETURN = r"""
backend:
  description: The backend the hostfile is for, as M(mlx_fleet.cluster.fabric) returned it (with its other
    results, RV(mlx_fleet.cluster.fabric#module:reason), RV(mlx_fleet.cluster.fabric#module:hostfiles), ...).
  returned: unless skipped
  type: str
bridges_off:
  description: The Macs whose network step turned their Thunderbolt Bridge service off (or in check mode would).
  returned: unless skipped
  type: list
  elements: str
write_on:
  description:
    - The Macs whose hostfiles (or hold, O(held)) differ from the fabric's, by what each Mac's network step or
      facts read; the ones M(mlx_fleet.cluster.hostfiles) is to run on.
    - With nothing published (skipped, or a Mac dropped out), the Macs whose hold mark differs, with
      the carried RV(mlx_fleet.cluster.fabric#module:hostfiles) empty.
  returned: always
  type: list
  elements: str
  sample: [studio-3]
dropped:
  description: The Macs that failed or did not answer earlier in the run; nothing is written.
  returned: when a Mac dropped out of the run
  type: list
  elements: str
"""

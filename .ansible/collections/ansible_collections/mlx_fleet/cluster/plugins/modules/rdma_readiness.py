#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rdma_readiness
short_description: Say which Macs are ready for RDMA, and print the Recovery checklist for the others
description:
  - Reads every host's C(mlx_fleet_macos) and C(mlx_fleet_thunderbolt) facts from hostvars (set them first with
    M(mlx_fleet.cluster.macos_facts) with O(mlx_fleet.cluster.macos_facts#module:thunderbolt)) and classifies each Mac as
    C(ready), C(needs_recovery) (Thunderbolt 5 on macOS 26.2 or later with RDMA disabled), C(not_capable)
    (Thunderbolt 4 hardware or macOS older than 26.2; the ring backend is the way for it) or
    C(enabled_not_working) (RDMA devices present but a cabled port down).
  - Writes into O(output_dir) a printable checklist, one page per Mac that needs a person to enable RDMA in
    macOS Recovery (C(recovery-checklist.html), C(recovery-checklist.txt)), and the ledger C(rdma-ledger.json),
    which records when each Mac was last seen ready and on which macOS build, so that a Mac an update has
    switched off again is named as such. Files are replaced atomically; nothing is written in check mode.
  - Only a person at the Mac can enable RDMA; this module never tries.
  - With C(mlx_fleet_backend) C(jaccl) or C(jaccl-ring) it fails, after writing the checklist, while any Mac needs
    the Recovery step or cannot do RDMA. With C(auto) it does not block; the summary says what the cluster gains
    once the checklist is done.
  - Prints one line per Mac and the summary (also returned as C(msg)) whatever the verbosity, for the person at
    the console.
  - Runs on the controller only (an action plugin); run it once per play.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: The folder next to the hostfile (C(mlx_fleet_output_dir)).
    type: path
    required: true
  inventory:
    description: The inventory path printed in the checklist's controller commands (default the first host's C(inventory_file)).
    type: str
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
notes:
  - C(changed) reports a new checklist or a change in the ledger's record (a Mac newly ready, or ready on another
    build); refreshing the ledger's last-seen times alone is not a change, so an unchanged cluster re-runs with
    C(changed=false).
"""

EXAMPLES = r"""
- name: Judge RDMA readiness and print the Recovery checklist
  mlx_fleet.cluster.rdma_readiness:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
  run_once: true
"""

RETURN = r"""
nodes:
  description: Per host, its status (ready, needs_recovery, not_capable, enabled_not_working), a one-line message,
    and regression (a line when RDMA was switched off since the Mac was last seen ready, else null).
  returned: always
  type: dict
needs_recovery:
  description: The Macs with a checklist page.
  returned: always
  type: list
  elements: str
summary:
  description: What the cluster can run now and once the checklist is done.
  returned: always
  type: str
checklist:
  description: Paths of the HTML and text checklist.
  returned: always
  type: dict
ledger:
  description: Path of rdma-ledger.json.
  returned: always
  type: str
"""

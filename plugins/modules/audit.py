#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: audit
short_description: Compare every Mac with the declared state and with the other Macs; write audit.json and audit.html
description:
  - Reads from hostvars what M(mlx_fleet.cluster.node_state) set on every Mac (C(mlx_fleet_macos),
    C(mlx_fleet_thunderbolt), C(mlx_fleet_node), C(mlx_fleet_declared)) and compares, per Mac, the macOS
    version and build (one build on every Mac), model, memory and serial number, the environment (path,
    Python, every locked package at its version with its files as installed, no extra package), the node
    settings (pmset, names, the wired limit and its LaunchDaemon), the Thunderbolt addresses against the
    cluster model, the Thunderbolt Bridge, RDMA against the RDMA ledger, and the hostfiles against the
    controller's; for the cluster, the cables against the plan (C(mlx_fleet_cables), else the cables of the
    last converge in the cluster model) and the lock against the inventory's declaration.
  - Writes C(audit.json) (format C(mlx-fleet-audit/1), docs/audit.md) and C(audit.html) (a printable Macs x
    facts table) into O(output_dir), atomically. Changes nothing on any Mac.
  - A Mac that was not read (unreachable, or its read failed) is listed in C(not_audited); the others are
    still compared.
  - Runs on the controller only (an action plugin, C(plugin_utils.checks.audit)); run it once per play.
version_added: "0.2.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: Where the hostfiles and ledgers are, and where the report goes (default C(mlx_fabric_output_dir)).
    type: path
  inventory:
    description: The inventory path printed in the fixes (default the first host's C(inventory_file)).
    type: str
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
notes:
  - "Reports C(changed=false): the report is written on the controller and no Mac changes."
"""

EXAMPLES = r"""
- name: Read every Mac
  mlx_fleet.cluster.node_state:

- name: Compare them
  mlx_fleet.cluster.audit:
  run_once: true
"""

RETURN = r"""
report:
  description: The report as written to audit.json (format, generated, inventory, macs, not_audited, facts_compared,
    drift, findings, checks; each check with topic, fact, macs, expected, found, ok, fix).
  returned: success
  type: dict
json:
  description: Path of audit.json.
  returned: success
  type: str
html:
  description: Path of audit.html.
  returned: success
  type: str
record:
  description: What the run record (C(mlx-fleet record)) says about the Macs and the cluster.
  returned: success
  type: dict
"""

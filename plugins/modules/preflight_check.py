#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_check
short_description: Decide on the controller whether a Mac can join the cluster
description:
  - Judges the C(mlx_fleet_macos) facts set by M(mlx_fleet.cluster.macos_facts) and fails with one line
    per problem, each naming the host, what is wrong and the fix; not Apple Silicon, macOS older than
    C(mlx_fleet_min_macos), a model other than C(mlx_fleet_model), no sudo, sudo that needs a password
    when none was given (C(--ask-become-pass)), a management address inside C(mlx_fleet_ip_pool), the
    same Mac listed under two names (one serial number; both names are said).
  - With I(bridge), also the fabric's lockout check, before any Mac changes - the network plan the
    fabric will make from every Mac's C(mlx_fleet_thunderbolt) facts must not turn off, re-address or
    bridge the interface this Mac's management connection arrives on (C(management_interface)) - and
    the address pool against the cables found (too small is bad input). With no C(mlx_fleet_ip_pool),
    the pool is a private range neither the controller nor any Mac uses (kept in C(fabric-addresses.json)).
  - Runs on the controller only (an action plugin); connects to no host.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  bridge:
    description:
      - What the fabric will do to the Thunderbolt Bridge (the mlx_fabric role's C(mlx_fabric_bridge));
        without it the lockout check is not made.
    type: str
    choices: [disabled, enabled, unchanged]
  output_dir:
    description:
      - The controller folder of the fabric's address ledger (C(fabric-addresses.json)), so a refusal names
        the address the fabric would give.
    type: path
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Read the Mac
  mlx_fleet.cluster.macos_facts:

- name: Check it can join the cluster, and that the fabric will not cut its management network
  mlx_fleet.cluster.preflight_check:
    bridge: disabled
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
"""

RETURN = r"""
problems:
  description: One line per problem.
  returned: failure
  type: list
  elements: str
input_errors:
  description:
    - The problems that are bad input (the same Mac listed twice, a C(mlx_fleet_model) that is not the Mac,
      a management connection the fabric would cut), to fix in the inventory; C(mlx-fleet) exits 2 for them.
  returned: failure
  type: list
  elements: str
"""

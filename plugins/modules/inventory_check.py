#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: inventory_check
short_description: Check the cluster inventory on the controller before any Mac is touched
description:
  - Reads the hosts of O(group) and their mlx-fleet variables and fails with one line per problem
    when the inventory cannot be right. Host names that are not host names, two hosts with one address or
    one Bonjour name, a host reached as C(NAME.local) that roles/macos_node would rename; unknown or
    non-string models (C(mlx_fleet_model)), locations that are not one line of text (C(mlx_fleet_location)),
    a launchd label that is not reverse-DNS, a wired-memory fraction above 0.9; an unknown
    C(mlx_fleet_backend); versions that are malformed or YAML numbers (26.10 reads as 26.1);
    C(mlx_fleet_envs) that is not a list of C(NAME=VALUE); cables naming an unknown host or port or using a
    port twice (C(mlx_fleet_cables)); an C(mlx_fleet_ip_pool) that is malformed, has host bits set, is not
    a private range (loopback, link-local, multicast, C(0.0.0.0/0)...), is too small for the planned cables,
    or overlaps this controller's networks, the management network or a Mac's address.
  - Runs on the controller only (an action plugin); connects to no host.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options: {}
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Check the inventory
  mlx_fleet.cluster.inventory_check:
    group: mlx_cluster
"""

RETURN = r"""
hosts:
  description: Number of Macs checked.
  returned: success
  type: int
problems:
  description: One line per problem.
  returned: failure
  type: list
  elements: str
input_errors:
  description: The lines of the failure (C(inventory:) and the problem), all bad input; C(mlx-fleet) exits 2 for them.
  returned: failure
  type: list
  elements: str
"""

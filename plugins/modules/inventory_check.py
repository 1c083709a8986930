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
    when the inventory cannot be right; duplicate addresses, unknown models (C(mlx_fleet_model)),
    an unknown C(mlx_fleet_backend), malformed versions, cables naming an unknown host or port or
    using a port twice (C(mlx_fleet_cables)), and an C(mlx_fleet_ip_pool) that overlaps the
    management network.
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
"""

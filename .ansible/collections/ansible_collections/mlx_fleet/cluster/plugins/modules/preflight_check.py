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
    when none was given (C(--ask-become-pass)), a management address inside C(mlx_fleet_ip_pool).
  - Runs on the controller only (an action plugin); connects to no host.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options: {}
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Read the Mac
  mlx_fleet.cluster.macos_facts:

- name: Check it can join the cluster
  mlx_fleet.cluster.preflight_check:
"""

RETURN = r"""
problems:
  description: One line per problem.
  returned: failure
  type: list
  elements: str
"""

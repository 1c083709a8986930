#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mlx_env_plan
short_description: Plan every node's MLX environment and download each artifact once
description:
  - Runs on the controller only (an action plugin, C(plugin_utils.envplan)); run it once per play.
  - Loads the lock file, stops when the declaration no longer matches it ("run mlx-fleet lock"),
    turns each node's platform report (the result of M(mlx_fleet.cluster.mlx_env_facts) registered
    as O(state_var)) into wheel tags and marker values, picks each locked package's wheel for it,
    downloads what any node lacks once into O(cache_dir), verifies every sha256 against the lock,
    and lists per node what to push.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  lock_file:
    description: The lock made by C(mlx-fleet lock).
    type: path
    required: true
  declaration:
    description: The inventory's declaration (python_version, uv_version, mlx_version, mlx_lm_version, extra_packages).
    type: dict
    required: true
  python_interpreter:
    description: An interpreter already on every node; empty for a uv-managed Python.
    type: str
    default: ""
  store:
    description: The store folder on the nodes.
    type: str
    required: true
  cache_dir:
    description: The controller's download cache.
    type: path
    required: true
  state_var:
    description: The variable each host registered the M(mlx_fleet.cluster.mlx_env_facts) result in.
    type: str
    default: mlx_env_state
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Plan and download
  mlx_fleet.cluster.mlx_env_plan:
    lock_file: "{{ mlx_env_lock_file }}"
    declaration: {python_version: "3.12", uv_version: 0.13.9, mlx_version: 0.32.4, mlx_lm_version: 0.32.2, extra_packages: []}
    store: /opt/mlx-fleet/store
    cache_dir: ~/.cache/mlx-fleet/env
  run_once: true
  register: plan
"""

RETURN = r"""
lock_hash:
  description: sha256 of the lock file.
  returned: success
  type: str
hosts:
  description: Per host, the interpreter, python_build, requirements, whether it already matches, and the files to push (src, dest, mode).
  returned: success
  type: dict
artifacts:
  description: Distinct artifacts some node lacks.
  returned: success
  type: int
downloads:
  description: Artifacts really downloaded from the registry in this run.
  returned: success
  type: int
downloaded:
  description: Their file names.
  returned: success
  type: list
  elements: str
cache_hits:
  description: Artifacts already in the cache with the right sha256.
  returned: success
  type: int
"""

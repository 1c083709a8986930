#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: env_lock
short_description: Resolve the declared MLX environment into its lock file, with the sha256 of every artifact
description:
  - Resolves the environment the inventory declares (the mlx_env role's C(mlx_env_*) variables) with C(uv pip compile)
    against O(index) into the JSON lock the M(mlx_fleet.cluster.mlx_env_plan) step installs from offline (every
    pinned package with its wheels for the declared platforms and their sha256, uv's wheels, and the uv-managed Python
    builds with the sha256 from the locked uv release).
  - The same resolution as C(mlx-fleet lock -i INVENTORY) (C(plugin_utils.env.lock_resolve)), for an install with
    the collection alone (the C(mlx_fleet.cluster.lock) playbook).
  - Writes O(lock_file) only when its text differs (C(changed)); in check mode it resolves and writes nothing.
  - Needs C(uv) on the controller (O(uv), else beside the controller's Python, else on C(PATH)). Runs on the
    controller only; connects to no Mac. Run it once per play.
version_added: "0.3.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  lock_file:
    description: The lock to write (the role's C(mlx_env_lock_file)).
    type: path
    required: true
  declaration:
    description:
      - The environment, by the mlx_env role's variable names without C(mlx_env_) (as M(mlx_fleet.cluster.mlx_env_plan)
        takes it).
    type: dict
    required: true
  index:
    description: The package index to resolve from (PEP 691 simple API), C(https://) or C(file://).
    type: str
    default: https://pypi.org/simple
  uv:
    description: The uv to resolve with.
    type: path
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Resolve the declared environment into its lock
  mlx_fleet.cluster.env_lock:
    lock_file: "{{ mlx_env_lock_file }}"
    declaration: "{{ mlx_env_declaration }}"  # the mlx_env role's, from its mlx_env_* variables
  run_once: true
"""

RETURN = r"""
lock_file:
  description: The lock's path.
  returned: success
  type: str
sha256:
  description: The sha256 of the lock's text (the lock hash the Macs' fingerprints carry).
  returned: success
  type: str
packages:
  description: How many packages the lock pins.
  returned: success
  type: int
wheels:
  description: How many wheels it lists, for every declared platform.
  returned: success
  type: int
"""

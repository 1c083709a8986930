#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: env_lock
short_description: Resolve the declared MLX environment into its lock file, with the sha256 of every artifact; pin the Hub models
description:
  - Resolves the environment the inventory declares (the mlx_env role's C(mlx_env_*) variables) with C(uv pip compile)
    against O(index) into the JSON lock the M(mlx_fleet.cluster.mlx_env_plan) step installs from offline (every
    pinned package with its wheels for the declared platforms and their sha256, uv's wheels, and the uv-managed Python
    builds with the sha256 from the locked uv release).
  - The same resolution as C(mlx-fleet lock -i INVENTORY) (C(plugin_utils.env.lock_resolve)), for an install with
    the collection alone (the C(mlx_fleet.cluster.lock) playbook).
  - Writes O(lock_file) only when its text differs (C(changed)); in check mode it resolves and writes nothing.
  - Pins every Hub model the inventory declares (C(mlx_fleet_models)) to a commit, with every file's size and hash as
    the Hub gives them (the LFS sha256, the git blob id of a small file), into C(.mlx-models.lock.json) beside
    O(lock_file), a file of its own so that the environment's lock hash stays as it is. A model pinned before for the
    same repo and revision stays pinned (its commit checked to be still on the Hub) unless O(update_models) names it.
    The Hub is the one C(huggingface_hub) knows (C(HF_ENDPOINT), the user's token); that package is needed on the
    controller only when a Hub model is declared.
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
  models_only:
    description: Pin the models only; the environment's lock stays as it is (no uv, no index).
    type: bool
    default: false
  update_models:
    description: The models to pin again at their declared revision (C(all) for every Hub model).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Resolve the declared environment into its lock
  mlx_fleet.cluster.env_lock:
    lock_file: "{{ mlx_env_lock_file }}"
    declaration: "{{ mlx_env_declaration }}"  # the mlx_env role's, from its mlx_env_* variables
  run_once: true

- name: Pin the model qwen3 again at its declared revision, and nothing else
  mlx_fleet.cluster.env_lock:
    lock_file: "{{ mlx_env_lock_file }}"
    declaration: "{{ mlx_env_declaration }}"
    models_only: true
    update_models: [qwen3]
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
models:
  description: The models' lock.
  returned: always
  type: dict
  contains:
    changed:
      description: Whether the models' lock changed.
      type: bool
    models_lock_file:
      description: Its path.
      type: str
    pinned:
      description: The models pinned now (new, changed in the inventory, or asked for).
      type: list
      elements: str
    kept:
      description: The models kept at the commit pinned before.
      type: list
      elements: str
    files:
      description: How many files the pinned models have.
      type: int
    bytes:
      description: Their size.
      type: int
"""

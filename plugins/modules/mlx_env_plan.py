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
  - Runs on the controller only (an action plugin, C(plugin_utils.env.artifacts)); run it once per play.
  - Loads the lock file, stops when the declaration no longer matches it ("run mlx-fleet lock"),
    turns each node's platform report (the result of M(mlx_fleet.cluster.mlx_env_facts) registered
    as O(states)) into wheel tags and marker values, picks each locked package's wheel for it,
    and judges whether the node already is the locked environment (versions compared as PEP 440
    versions, a working MLX, the same fingerprint).
  - Downloads what any node lacks once into O(cache_dir), verifies every sha256 against the lock
    (also for a file already in the cache), and puts each node's missing artifacts in one bundle
    (a tar in O(cache_dir)/bundles, shared by nodes that lack the same files) for
    M(mlx_fleet.cluster.mlx_env) to send. In check mode no bundle is made.
  - Stops before any node changes when the lock has no sha256 for a CPython build it would push,
    or a download does not have the locked sha256 (one line naming the file).
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  lock_file:
    description: The lock made by C(mlx-fleet lock).
    type: path
    required: true
  declaration:
    description: The inventory's declaration (python_version, uv_version, mlx_version, mlx_lm_version, extra_packages, platforms).
    type: dict
    required: true
  python_interpreter:
    description: An interpreter already on every node; empty for a uv-managed Python.
    type: str
    default: ""
  python_mirror:
    description:
      - Where to download the CPython builds from instead of
        V(https://github.com/astral-sh/python-build-standalone/releases/download), a folder laid out
        the same way (V(file:///srv/python-builds) or an https URL); empty for the lock's URLs.
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
  states:
    description: Per host, its M(mlx_fleet.cluster.mlx_env_facts) result (null, failed or skipped for a host left out).
    type: dict
    required: true
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Plan and download
  mlx_fleet.cluster.mlx_env_plan:
    lock_file: "{{ mlx_env_lock_file }}"
    declaration: {python_version: "3.12", uv_version: 0.13.9, mlx_version: 0.32.4, mlx_lm_version: 0.32.2, extra_packages: [],
                  platforms: [macos-arm64]}
    store: /opt/mlx-fleet/store
    cache_dir: ~/.cache/mlx-fleet/env
    states: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars)
      | map(attribute='env_facts', default=None))) }}"
  run_once: true
  register: plan
"""

RETURN = r"""
lock_hash:
  description: sha256 of the lock file.
  returned: success
  type: str
hosts:
  description:
    - Per host, its plan for M(mlx_fleet.cluster.mlx_env) - the interpreter, python_build, requirements,
      whether it already matches (and then its fingerprint), the expected package changes, the uv it
      must have, and its bundle (src, sha256, members) with the names of the files in it (push).
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

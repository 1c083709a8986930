#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: models_manifest
short_description: The pinned files of every model the inventory declares, for the Macs to be read against
description:
  - Reads C(mlx_fleet_models) (one value for the whole cluster). A Hub entry's manifest (commit, every file's size
    and hash) is the one C(mlx-fleet lock) pinned in the models' lock, C(.mlx-models.lock.json) beside
    O(lock_file); an entry the lock lacks, or pins at another repo or revision, is listed in C(not_pinned).
  - A path entry's controller folder is hashed (sha256 of every file); its manifest is recorded in
    C(O(output_dir)/models/<name>.json) with each file's size and modification time, so an unchanged file is not
    read again and a change to the folder since the last record is named (C(changed_folders)). Nothing is
    written in check mode.
  - Runs on the controller only (an action plugin); run it once per play.
version_added: "0.5.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  output_dir:
    description: The cluster's output folder (C(mlx_fleet_output_dir)), where the path entries' records are kept.
    type: path
    required: true
  lock_file:
    description: The environment's lock (C(mlx_env_lock_file)), beside which the models' lock is; none, or no
      models' lock, leaves every Hub entry not pinned.
    type: path
  pinned_only:
    description: Fail (bad input, naming them and C(mlx-fleet lock)) when a Hub entry is not pinned as declared,
      for a step that must know every entry's pinned files (M(mlx_fleet.cluster.models_prune)).
    type: bool
    default: false
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: The declared models' pinned files
  mlx_fleet.cluster.models_manifest:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    lock_file: "{{ inventory_dir }}/.mlx-env.lock.json"
  run_once: true
  register: mlx_fleet_models_pinned
"""

RETURN = r"""
manifests:
  description: Per pinned model its manifest (C(name), C(source), C(files) with C(path), C(size), C(sha256) or
    C(git_sha1); a Hub entry's C(repo), C(repo_type), C(revision), C(commit)).
  returned: success
  type: list
  elements: dict
not_pinned:
  description: The Hub entries the lock does not pin as declared.
  returned: success
  type: list
  elements: str
changed_folders:
  description: Per path entry whose folder changed since its last record, the files C(added), C(removed), C(changed).
  returned: success
  type: dict
folders:
  description: Per path entry, its folder on the controller (where its files come from).
  returned: success
  type: dict
hf_cache:
  description: C(mlx_fleet_models_hf_cache), where the Macs keep the Hub entries.
  returned: success
  type: str
models_dir:
  description: C(mlx_fleet_models_dir), where the Macs keep the path entries.
  returned: success
  type: str
source:
  description: C(mlx_fleet_models_source), the Mac that fetches the Hub entries from the Hub (refused when it is not
    a Mac of the cluster); null when the controller fetches them.
  returned: success
  type: str
"""

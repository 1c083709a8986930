#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: models_status
short_description: Judge every Mac's declared models against their pinned files
description:
  - Reads every Mac's C(mlx_fleet_model_files) facts (M(mlx_fleet.cluster.model_files_facts)) and compares them
    with O(expected) (M(mlx_fleet.cluster.models_manifest)'s result), per Mac and model present, verified (every
    byte hashed), the files missing or differing, the bytes still to copy, the free bytes, the revision.
  - A Mac without the facts (failed, unreachable) is listed as not read. Changes nothing.
  - Prints one line per Mac and model and what to run next (also returned as C(msg)) whatever the verbosity.
  - Runs on the controller only (an action plugin); run it once per play.
version_added: "0.5.0"
author: mlx-fleet contributors (!UNKNOWN)
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.options.models_step
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Judge every Mac's models
  mlx_fleet.cluster.models_status:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    expected: "{{ mlx_fleet_models_pinned }}"
  run_once: true
"""

RETURN = r"""
report:
  description: C(rows) (per Mac and model C(mac), C(model), C(source), C(present), C(verified), C(missing),
    C(differing) (path -> state), C(bytes_missing), C(free_bytes), C(revision), C(commit); a Hub entry's C(ref),
    C(ref_commit)), C(lacking) (the Macs lacking a declared model), C(unread), C(not_pinned), C(changed_folders),
    C(complete).
  returned: success
  type: dict
"""

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: models_sync_plan
short_description: Plan a models sync, which Mac pulls which file from where, with every Mac's free space checked
description:
  - From O(expected) (M(mlx_fleet.cluster.models_manifest)'s result) and every Mac's C(mlx_fleet_model_files)
    facts (M(mlx_fleet.cluster.model_files_facts), every byte hashed), the files each Mac lacks or holds with other
    bytes. Refuses, naming each Mac with the bytes needed and free, when a Mac has too little space, before any
    byte moves.
  - Per file, the Macs holding it verified are its sources; a file no Mac holds comes from the controller to one
    Mac only (the management network carries one copy). Every other copy goes Mac to Mac along the cables of the
    cluster model (C(cluster.json) in O(output_dir)), over their /30 addresses, in parallel.
  - Fetches the Hub entries the controller must send once, with huggingface_hub into the user's own Hugging Face
    cache (HF_ENDPOINT and the user's login as huggingface_hub reads them); not in check mode.
  - With C(mlx_fleet_models_source) (O(expected)'s C(source)), the Hub entries' files no Mac holds are fetched by
    that Mac instead (a sender C(hub) in its C(receive); M(mlx_fleet.cluster.model_copy) fetches them), the first
    source along the cables; the controller fetches none of them. A Mac no cable path reaches from it is refused
    before any byte moves.
  - Prints what each Mac is to receive (also returned as C(msg)). Runs on the controller only (an action
    plugin); run it once per play.
version_added: "0.5.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  names:
    description: Only these declared models (all when empty).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - mlx_fleet.cluster.options
  - mlx_fleet.cluster.options.models_step
  - mlx_fleet.cluster.attributes.controller
"""

EXAMPLES = r"""
- name: Plan the copy of every declared model
  mlx_fleet.cluster.models_sync_plan:
    output_dir: "{{ inventory_dir }}/.mlx-fleet"
    expected: "{{ mlx_fleet_models_pinned }}"
  run_once: true
  register: mlx_fleet_models_sync_plan
"""

RETURN = r"""
plan:
  description: C(macs) (per Mac C(receive), per sender C(sender), C(address),
    C(port), C(files); C(serve), C(finish) (Hub entries to link and ref, every file there), C(files), C(bytes)),
    C(short_of_space), C(fetched) (per Hub entry fetched, where, C(controller) or the Mac), C(manifests),
    C(folders) (per model the controller folder it sends from).
  returned: success
  type: dict
"""

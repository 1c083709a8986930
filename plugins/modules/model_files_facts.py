#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_files_facts
short_description: Read what a Mac holds of the declared models' files, in one call
description:
  - For each pinned model in O(models) (its manifest, source C(hub) or C(path), its files with size and hash),
    reads the files where the cluster keeps them on the Mac and says per file whether it is there and has the
    pinned size and, for a file the sync verified as it wrote it, still of the size and modification time the
    sync's record of it says (C(.mlx-fleet-written)); with O(deep), whether its bytes hash to the pinned hash
    (sha256, or the git blob id of a small Hub file); with O(verify), the same for every file but those the sync
    verified and which are still as its record says (as git's index trusts an unchanged file). Also the bytes free
    on the volume that holds (or would hold) each model, and the bytes hashed.
  - A Hub entry is read in the Hugging Face cache O(hf_cache) as huggingface_hub lays it out
    (C(models--ORG--NAME/blobs/<hash>), C(snapshots/<commit>/<path>) a relative link to its blob,
    C(refs/<revision>) naming the commit); it is present only when its ref names the pinned commit and every
    snapshot link leads to its own blob. A path entry is read in C(O(models_dir)/<name>).
  - Odd things on disk (a link leading elsewhere, a folder where a file should be, a file this user cannot
    read) are the file's state, never a failure. Changes nothing.
  - The manifests come from the controller (the C(mlx_fleet.cluster.models_manifest) action); the judgement of
    every Mac is the C(mlx_fleet.cluster.models_status) action's.
version_added: "0.5.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  models:
    description: The pinned manifests, as C(mlx_fleet.cluster.models_manifest) returns them (C(name), C(source),
      C(files) of C(path), C(size), C(sha256) or C(git_sha1); a Hub entry also C(repo), C(repo_type), C(revision),
      C(commit)).
    type: list
    elements: dict
    required: true
  deep:
    description: Hash every byte of every file, not only compare sizes.
    type: bool
    default: false
  verify:
    description: Hash every file but those the sync verified as it wrote them whose size and modification time are
      still those its record says (what C(mlx-fleet models sync) reads before it plans). A same-size edit that
      keeps the modification time is then seen only with O(deep).
    type: bool
    default: false
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.facts
  - mlx_fleet.cluster.options.models
"""

EXAMPLES = r"""
- name: Read the declared models' files on every Mac, hashing every byte
  mlx_fleet.cluster.model_files_facts:
    models: "{{ mlx_fleet_models_pinned.manifests }}"
    deep: true
  become: true

- name: Read them as a sync does, hashing every file the sync has not verified as it is
  mlx_fleet.cluster.model_files_facts:
    models: "{{ mlx_fleet_models_pinned.manifests }}"
    verify: true
"""

RETURN = r"""
ansible_facts:
  description: What the Mac holds.
  returned: success
  type: dict
  contains:
    mlx_fleet_model_files:
      description: C(deep) (whether every file was hashed), C(hashed_bytes) (the bytes read to hash them) and
        C(models), per model C(name), C(root) (its folder on the Mac), C(present), C(free_bytes) (free on its
        volume), C(hashed_bytes), C(files) (C(path), C(state) one of C(ok), C(missing), C(size_differs),
        C(hash_differs), C(changed_since_sync) (not hashed, a file the sync verified whose size or modification
        time is other than its record says), C(not_a_file), C(unreadable), C(not_linked), C(link_outside),
        C(link_broken); C(size) on disk or null; C(hashed)) and for a Hub entry C(ref) (C(ok), C(missing),
        C(other)) with C(ref_commit).
      type: dict
      returned: success
      sample: {"deep": false, "hashed_bytes": 0, "models": [{"name": "tiny", "root": "/opt/mlx-fleet/models/tiny",
               "present": false, "free_bytes": 52428800000, "hashed_bytes": 0,
               "files": [{"path": "config.json", "state": "missing", "size": null, "hashed": false}]}]}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults, model_files


def main():
    module = AnsibleModule(
        argument_spec=dict(models=dict(type="list", elements="dict", required=True),
                           hf_cache=dict(type="path", default=defaults.MODELS_HF_CACHE),
                           models_dir=dict(type="path", default=defaults.MODELS_DIR),
                           deep=dict(type="bool", default=False),
                           verify=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    params = module.params
    facts = model_files.read_models(params["models"], params["hf_cache"], params["models_dir"], params["deep"],
                                    params["verify"])
    module.exit_json(changed=False, ansible_facts={"mlx_fleet_model_files": facts})


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: models_prune
short_description: Remove from a Mac the model files the sync wrote that no declared model pins any more
description:
  - Removes only files mlx-fleet's sync wrote, as its record of them says (C(.mlx-fleet-written) in a Hub entry's
    repo folder of O(hf_cache), C(O(models_dir)/.mlx-fleet-written/<name>) for a path entry; written by
    M(mlx_fleet.cluster.model_copy)). A file the sync did not write is never removed, nor a folder that still holds
    anything.
  - In a Hub entry's repo folder, the snapshots of commits no entry of O(models) pins, the refs of revisions none
    pins, and the blobs no pinned snapshot and no remaining snapshot link (the sync's or not) uses. A repo folder
    with no pinned entry loses every file the sync wrote there.
  - In a folder of O(models_dir) whose name no path entry of O(models) has, the files the sync wrote there.
  - Then the folders those removals left empty, and the records of what is gone.
  - Reads first and removes only what it listed; in check mode lists the same and removes nothing; with diff, the
    paths that go (before) and none of them left (after).
version_added: "0.5.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  models:
    description: Every declared model's pinned manifest, as C(mlx_fleet.cluster.models_manifest) returns them
      (with every Hub entry pinned); what they pin is kept.
    type: list
    elements: dict
    required: true
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
  - mlx_fleet.cluster.options.models
"""

EXAMPLES = r"""
- name: Remove what no declared model pins any more
  mlx_fleet.cluster.models_prune:
    models: "{{ mlx_fleet_models_pinned.manifests }}"
  become: true
"""

RETURN = r"""
removed:
  description: The files removed (in check mode, that would be), absolute paths on the Mac, in order.
  returned: success
  type: list
  elements: str
  sample: ["/opt/mlx-fleet/models/old/model.safetensors"]
bytes:
  description: The bytes they held.
  returned: success
  type: int
"""

import os
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults, model_files


def _snapshot_links(root):
    """Every snapshot link of the repo folder, whoever made it: its path -> what it links to (relative to root)."""
    links = {}
    for folder, dirs, files in os.walk(os.path.join(root, "snapshots")):
        for name in files + dirs:
            entry = os.path.join(folder, name)
            if os.path.islink(entry):
                target = os.path.normpath(os.path.join(folder, os.readlink(entry)))
                links[os.path.relpath(entry, root)] = os.path.relpath(target, root)
    return links


def _hub_going(root, pinned, written):
    """What the sync wrote in a Hub repo folder that no pinned entry (PINNED: its manifests there) uses."""
    commits = set(m["commit"] for m in pinned)
    revisions = set(m.get("revision") for m in pinned)
    keep = set(os.path.relpath(model_files.file_path(m, root, f), root) for m in pinned for f in m["files"])
    keep.update(os.path.relpath(model_files.blob_path(root, f), root) for m in pinned for f in m["files"])
    going = set()
    for path in written:
        kind, rest = path.split("/", 1) if "/" in path else (path, "")
        if path in keep:
            continue
        if (kind == "snapshots" and rest.split("/", 1)[0] not in commits) or (kind == "refs" and rest not in revisions):
            going.add(path)
    linked = set(target for entry, target in _snapshot_links(root).items() if entry not in going)
    going.update(p for p in written if p.startswith("blobs/") and p not in keep and p not in linked)
    return going


def plan(params):
    """(record, root, the paths under ROOT to remove) per record of what the sync wrote on this Mac."""
    hf_cache, models_dir, models = params["hf_cache"], params["models_dir"], params["models"]
    found = []
    if os.path.isdir(hf_cache):
        for folder in sorted(os.listdir(hf_cache)):
            root = os.path.join(hf_cache, folder)
            record = os.path.join(root, model_files.WRITTEN)
            if not os.path.isfile(record):
                continue
            pinned = [m for m in models if m["source"] == model_files.HUB
                      and model_files.repo_folder(m.get("repo_type", "model"), m["repo"]) == folder]
            found.append((record, root, _hub_going(root, pinned, model_files.read_written(record))))
    records = os.path.join(models_dir, model_files.WRITTEN)
    declared = set(m["name"] for m in models if m["source"] == model_files.PATH)
    if os.path.isdir(records):
        for name in sorted(set(os.listdir(records)) - declared):
            record = os.path.join(records, name)
            if os.path.isfile(record) and model_files.safe_relative_path(name):
                found.append((record, os.path.join(models_dir, name), set(model_files.read_written(record))))
    return found


def _files(root, paths):
    """(absolute path, bytes) of each path under ROOT that is a file or a link (never followed); others stay."""
    out = []
    for path in sorted(paths):
        full = os.path.join(root, path)
        try:
            info = os.lstat(full)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            out.append((full, info.st_size if stat.S_ISREG(info.st_mode) else 0))
    return out


def _remove_empty_parents(path, root):
    """The folders between PATH and ROOT (ROOT too) that removing PATH left empty; a folder with anything stays."""
    folder = os.path.dirname(path)
    while folder.startswith(root):
        try:
            os.rmdir(folder)
        except OSError:
            return
        if folder == root:
            return
        folder = os.path.dirname(folder)


def apply(found):
    """Remove what PLAN listed, then the folders it left empty, and update each record."""
    for record, root, going in found:
        for full, size in _files(root, going):
            os.remove(full)
            _remove_empty_parents(full, root)
        left = [p for p in model_files.read_written(record) if p not in going and os.path.lexists(os.path.join(root, p))]
        model_files.write_written(record, left)
        if not left and os.path.isdir(root):
            _remove_empty_parents(record, root)


def main():
    module = AnsibleModule(
        argument_spec=dict(models=dict(type="list", elements="dict", required=True),
                           hf_cache=dict(type="path", default=defaults.MODELS_HF_CACHE),
                           models_dir=dict(type="path", default=defaults.MODELS_DIR)),
        supports_check_mode=True,
    )
    found = plan(module.params)
    going = [item for record, root, paths in found for item in _files(root, paths)]
    removed = [full for full, size in going]
    result = dict(changed=bool(removed), removed=removed, bytes=sum(size for full, size in going),
                  diff={"before": "".join(path + "\n" for path in removed), "after": ""})
    if removed and not module.check_mode:
        try:
            apply(found)
        except OSError as exc:
            module.fail_json(msg="models prune: {0}: {1}".format(getattr(exc, "filename", ""), exc.strerror or exc),
                             **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

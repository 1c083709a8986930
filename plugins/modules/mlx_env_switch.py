#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mlx_env_switch
short_description: Put the venv M(mlx_fleet.cluster.mlx_env) built beside a node's venv in its place, in one step
description:
  - M(mlx_fleet.cluster.mlx_env) builds a venv that must change whole in C(.NAME.next) beside O(path) and proves
    MLX runs there; the old venv at O(path) is untouched until this module swaps the two folders in one atomic
    rename (C(renamex_np) with C(RENAME_SWAP) on macOS, C(renameat2) with C(RENAME_EXCHANGE) on Linux). An
    interrupt before the swap leaves the old venv; the next run builds again.
  - Swaps only a folder mlx-fleet made (its marker file) holding the fingerprint of the venv just built
    (O(built.digest)), then empties it of the old venv, keeping its marker.
  - Runs as root (C(become)) where the venv's parent folder is not the owner's.
  - When O(built) is null (the node needed no new venv) the action plugin returns at once; nothing runs on the node.
version_added: "0.2.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  path:
    description: The venv's absolute path, the same on every Mac.
    type: path
    required: true
  built:
    description: The RV(mlx_fleet.cluster.mlx_env#module:switch) result of M(mlx_fleet.cluster.mlx_env), or null.
    type: dict
    suboptions:
      next:
        description: The folder the new venv was built in.
        type: path
        required: true
      path:
        description: The venv it replaces (O(path)).
        type: path
        required: true
      digest:
        description: The digest of the new venv's fingerprint.
        type: str
        required: true
attributes:
  check_mode:
    description: In check mode nothing was built, so there is nothing to switch.
    support: full
  diff_mode:
    description: M(mlx_fleet.cluster.mlx_env) reports the environment's differences; the switch has none of its own.
    support: none
  platform:
    description: The operating systems it runs on.
    support: full
    platforms: darwin
"""

EXAMPLES = r"""
- name: Build the new environment beside the old one
  mlx_fleet.cluster.mlx_env:
    path: /opt/mlx-fleet/venv
    store: /opt/mlx-fleet/store
    plan: "{{ mlx_env_plan.hosts[inventory_hostname] }}"
    lock_hash: "{{ mlx_env_plan.lock_hash }}"
  register: mlx_env_built

- name: Switch to it in one step
  mlx_fleet.cluster.mlx_env_switch:
    path: /opt/mlx-fleet/venv
    built: "{{ mlx_env_built.switch | default(none) }}"
  become: true
"""

RETURN = r"""
swapped:
  description: How the two folders were swapped (C(atomic), or C(renames) on a system without an exchange call).
  returned: when changed
  type: str
  sample: atomic
"""

import ctypes
import errno
import json
import os
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import (
    VENV_MARKER, claim, fingerprint_path, folder_state, next_path)

RENAME_SWAP = 0x2  # macOS <stdio.h>, for renamex_np
RENAME_EXCHANGE = 0x2  # Linux <linux/fs.h>, for renameat2
AT_FDCWD = -100


def exchange(a, b):
    """Swap folders A and B in one atomic rename; False when this system or file system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    if sys.platform == "darwin":
        call, args = getattr(libc, "renamex_np", None), (a.encode(), b.encode(), RENAME_SWAP)
    else:
        call, args = getattr(libc, "renameat2", None), (AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE)
    if call is None:
        return False
    if call(*args) != 0:
        code = ctypes.get_errno()
        if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)):
            return False
        raise OSError(code, os.strerror(code), a)
    return True


def swap(new, path):
    """Swap NEW and PATH: atomically where the system can, else by three renames (a moment without PATH)."""
    if exchange(new, path):
        return "atomic"
    aside = new + ".old"
    os.rename(path, aside)
    os.rename(new, path)
    os.rename(aside, new)
    return "renames"


ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    built=dict(type="dict", options=dict(next=dict(type="path", required=True),
                                         path=dict(type="path", required=True),
                                         digest=dict(type="str", required=True))),
)


def check_built(module, path, built):
    """Fail unless BUILT names PATH and the folder beside it, both mlx-fleet's, the new one holding what was built;
    returns the new one's path."""
    new = next_path(path)
    if os.path.normpath(built["path"]) != path or os.path.normpath(built["next"]) != new:
        module.fail_json(msg="mlx_env_switch: built names %s and %s, not %s and %s beside it"
                             % (built["path"], built["next"], path, new))
    for folder in (path, new):
        if folder_state(folder, VENV_MARKER) != "ours":
            module.fail_json(msg="mlx_env_switch: %s is not a folder mlx-fleet made; nothing was switched" % folder)
    try:
        with open(fingerprint_path(new)) as handle:
            digest = json.load(handle).get("digest")
    except (IOError, OSError, ValueError, AttributeError):
        digest = None
    if digest != built["digest"]:
        module.fail_json(msg="mlx_env_switch: %s does not hold the environment just built (its fingerprint differs); "
                             "nothing was switched: run the play again" % new)
    return new


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    path, built = os.path.normpath(module.params["path"]), module.params["built"]
    if not built or module.check_mode:
        module.exit_json(changed=False, msg="no new environment to switch to")
    new = check_built(module, path, built)
    how = swap(new, path)
    claim(module, new, VENV_MARKER, clear=True)  # the old venv, now beside the new one
    module.exit_json(changed=True, swapped=how, msg="%s is the new environment" % path)


if __name__ == "__main__":
    main()

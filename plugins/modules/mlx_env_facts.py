#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mlx_env_facts
short_description: Read a node's MLX environment state in one call
description:
  - Asks the node's target Python (O(python_interpreter), or, for a uv-managed Python, the
    interpreter Ansible runs with, which reports the node's platform) for its platform, version
    and environment markers, so the controller can choose the wheels that node needs.
  - Reads the venv at O(path) (its Python, installed distributions, and whether MLX imports and
    computes there), the artifacts already pushed to O(store) (sha256 of each wheel and of uv, the
    extracted uv-managed Python builds re-hashed against what was extracted), the fingerprint in
    the venv, whether the two folders were made by mlx-fleet, and C(uname -m).
  - Fails with one line when O(path) or O(store) is not a usable folder (relative, a system or home
    folder, one inside the other).
  - Changes nothing.
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  python_interpreter:
    description: An interpreter already on the node to build the venv from; empty for a uv-managed Python.
    type: str
    default: ""
  owner:
    description: The user who must own the environment; empty for the login user.
    type: str
    default: ""
extends_documentation_fragment:
  - mlx_fleet.cluster.options.mlx_env
  - mlx_fleet.cluster.attributes.facts
"""

EXAMPLES = r"""
- name: Read the environment state
  mlx_fleet.cluster.mlx_env_facts:
    path: /opt/mlx-fleet/venv
    store: /opt/mlx-fleet/store
    python_interpreter: ""
  register: state
"""

RETURN = r"""
login_user:
  description: The user Ansible logs in as.
  returned: always
  type: str
  sample: admin
owner:
  description: The user who owns (or will own) the environment.
  returned: always
  type: str
  sample: admin
uname_machine:
  description: C(uname -m) on the node.
  returned: always
  type: str
  sample: arm64
to_make:
  description:
    - The folders to make before anything is installed - missing parents of O(path) and O(store)
      (to be root-owned), then O(path), C(.NAME.next) beside it (where the next venv is built) and
      O(store) when they are missing or not owned by O(owner).
      Empty once they exist.
  returned: always
  type: list
  elements: dict
  sample: [{path: /opt/mlx-fleet}, {path: /opt/mlx-fleet/venv, owner: admin, mode: "0755"}]
folders:
  description: For O(path) and O(store), C(missing), C(empty), C(ours) (made by mlx-fleet) or C(foreign).
  returned: always
  type: dict
  sample: {path: ours, store: ours}
target:
  description: The target interpreter (or, for a uv-managed Python, the node's platform) as its Python reports it.
  returned: always
  type: dict
  contains:
    source: {description: C(interpreter) or C(managed), type: str}
    path: {description: The interpreter asked, type: str}
    info: {description: "Platform, version and markers, or null when it cannot run", type: dict}
    error: {description: Why it could not be asked, type: str}
managed_builds:
  description: The uv-managed Python builds extracted in the store, by key.
  returned: always
  type: dict
  sample: {cpython-3.12.16-macos-aarch64-none: {sha256: "...", intact: true, prefix: /opt/mlx-fleet/store/python/cpython-3.12.16-macos-aarch64-none/python}}
venv:
  description: The venv at O(path).
  returned: always
  type: dict
  contains:
    exists: {description: Whether its Python runs, type: bool}
    info: {description: "Its Python's version, base prefix, installed distributions and the MLX proof", type: dict}
    home: {description: C(home) from pyvenv.cfg, type: str}
wheels:
  description: Wheels already in the store, file name to sha256.
  returned: always
  type: dict
uv_sha256:
  description: sha256 of the store's uv binary, empty when absent.
  returned: always
  type: str
fingerprint:
  description: The fingerprint file in the venv, or null.
  returned: always
  type: dict
"""

import json
import os
import pwd
import sys
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import (
    STORE_MARKER, VENV_MARKER, build_state, fingerprint_path, folder_state, next_path, path_problems, pyvenv_home,
    run_probe, sha256_file, store_paths)


def _to_make(path, store, owner, uid):
    """Missing parents (root-owned), then the venv, the folder its next version is built in beside it, and the
    store, unless they exist owned by OWNER."""
    out = []
    for parent in (os.path.dirname(path), os.path.dirname(store)):
        if not os.path.isdir(parent) and {"path": parent} not in out:
            out.append({"path": parent})
    for folder in (path, next_path(path), store):
        try:
            owned = os.path.isdir(folder) and not os.path.islink(folder) and os.lstat(folder).st_uid == uid
        except OSError:
            owned = False
        if not owned:
            out.append({"path": folder, "owner": owner, "mode": "0755"})
    return out


ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    store=dict(type="path", required=True),
    python_interpreter=dict(type="str", default=""),
    owner=dict(type="str", default=""),
)


def checked_paths(module):
    """(path, store) normalised, once they are folders mlx_env may manage."""
    path, store = module.params["path"], module.params["store"]
    problems = path_problems(path, store)
    if problems:
        module.fail_json(msg="mlx_env: " + "; ".join(problems))
    return os.path.normpath(path), os.path.normpath(store)


def users(module):
    """(the login user, the environment's owner, the owner's uid)."""
    login = pwd.getpwuid(os.getuid()).pw_name
    owner = module.params["owner"] or login
    try:
        return login, owner, pwd.getpwnam(owner).pw_uid
    except KeyError:
        module.fail_json(msg="mlx_env: the owner %r is not a user on this node; set mlx_env_owner" % owner)


def uname_machine(module):
    rc, out, err = module.run_command([module.get_bin_path("uname", required=True), "-m"])
    if rc != 0:
        module.fail_json(msg="uname -m failed: %s" % err.strip())
    return out.strip()


def read_target(module):
    """The target interpreter as its Python reports it; for a uv-managed CPython, the Python Ansible runs with,
    which reports the node's platform the build is made for (the controller supplies the build's version)."""
    interpreter = module.params["python_interpreter"]
    target = {"source": "interpreter" if interpreter else "managed", "path": interpreter or sys.executable,
              "info": None, "error": ""}
    if os.path.isabs(target["path"]) and not os.access(target["path"], os.X_OK):
        target["error"] = "%s is not an executable on this node" % target["path"]
    else:
        target["info"], target["error"] = run_probe(module, target["path"])
    return target


def managed_builds(store, pythons):
    builds = {}
    if os.path.isdir(pythons):
        for name in sorted(os.listdir(pythons)):
            if name.endswith(".json"):
                state = build_state(store, name[:-len(".json")])
                if state:
                    builds[name[:-len(".json")]] = state
    return builds


def wheels_in(folder):
    wheels = {}
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            full = os.path.join(folder, name)
            if name.endswith(".whl") and os.path.isfile(full):
                wheels[name] = sha256_file(full)
    return wheels


def read_fingerprint(path):
    try:
        with open(fingerprint_path(path)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError, RecursionError):
        return None


def read_store(store):
    """What the store holds: the managed Python builds, the wheels, uv's sha256."""
    layout = store_paths(store)
    return dict(managed_builds=managed_builds(store, layout["pythons"]), wheels=wheels_in(layout["wheels"]),
                uv_sha256=sha256_file(layout["uv"]) if os.path.isfile(layout["uv"]) else "")


def read_venv(module, path):
    """The venv at path: its probe (it imports MLX) runs beside the other reads, as the slowest read sets the
    time; returns a function that waits for it and gives the venv's state."""
    probes = ThreadPoolExecutor(max_workers=1)
    venv_python = os.path.join(path, "bin", "python")
    venv_probe = probes.submit(run_probe, module, venv_python, "installed", "prove") \
        if os.access(venv_python, os.X_OK) else None

    def venv():
        state = {"exists": False, "info": None, "home": pyvenv_home(path)}
        if venv_probe is not None:
            state["info"], state["error"] = venv_probe.result()
            state["exists"] = state["info"] is not None
        probes.shutdown()
        return state
    return venv


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    path, store = checked_paths(module)
    login, owner, uid = users(module)
    result = dict(changed=False, owner=owner, login_user=login, uname_machine=uname_machine(module),
                  to_make=_to_make(path, store, owner, uid),
                  folders={"path": folder_state(path, VENV_MARKER), "store": folder_state(store, STORE_MARKER)})
    venv = read_venv(module, path)
    result["target"] = read_target(module)
    result.update(read_store(store), fingerprint=read_fingerprint(path), venv=venv())
    module.exit_json(**result)


if __name__ == "__main__":
    main()

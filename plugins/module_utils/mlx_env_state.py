# -*- coding: utf-8 -*-
"""A node's MLX environment state as mlx_env_facts returns it: the folders, the target interpreter, the store,
the venv. macos_facts reads it in the preflight with the same code (its option mlx_env), so a converge needs no
mlx_env_facts run of its own. Stdlib only, Python 3.9 compatible: it runs on the Mac.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import pwd
import sys
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import (
    STORE_MARKER, VENV_MARKER, build_state, fingerprint_path, folder_state, known_sha256, next_path, path_problems,
    pyvenv_home, read_verified, run_probe, store_paths)

__metaclass__ = type


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


def problem(params):
    """Why the environment cannot be read with these params (one line), or None: a folder mlx_env may not manage,
    an owner who is no user on this node."""
    problems = path_problems(params["path"], params["store"])
    if problems:
        return "mlx_env: " + "; ".join(problems)
    owner = params["owner"] or pwd.getpwuid(os.getuid()).pw_name
    try:
        pwd.getpwnam(owner)
    except KeyError:
        return "mlx_env: the owner %r is not a user on this node; set mlx_env_owner" % owner
    return None


def users(params):
    """(the login user, the environment's owner, the owner's uid), once problem(params) is None."""
    login = pwd.getpwuid(os.getuid()).pw_name
    owner = params["owner"] or login
    return login, owner, pwd.getpwnam(owner).pw_uid


def uname_machine(module):
    rc, out, err = module.run_command([module.get_bin_path("uname", required=True), "-m"])
    if rc != 0:
        module.fail_json(msg="uname -m failed: %s" % err.strip())
    return out.strip()


def read_target(module, params):
    """The target interpreter as its Python reports it; for a uv-managed CPython, the Python Ansible runs with,
    which reports the node's platform the build is made for (the controller supplies the build's version)."""
    interpreter = params["python_interpreter"]
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


def wheels_in(store, verified):
    wheels, folder = {}, store_paths(store)["wheels"]
    if os.path.isdir(folder):
        for name in sorted(os.listdir(folder)):
            full = os.path.join(folder, name)
            if name.endswith(".whl") and os.path.isfile(full):
                wheels[name] = known_sha256(store, full, verified)
    return wheels


def read_fingerprint(path):
    try:
        with open(fingerprint_path(path)) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError, RecursionError):
        return None


def read_store(store):
    """What the store holds: the managed Python builds, the wheels, uv's sha256 (those two hashed unless recorded
    as mlx_env checked them: read_verified)."""
    layout, verified = store_paths(store), read_verified(store)
    return dict(managed_builds=managed_builds(store, layout["pythons"]),
                wheels=wheels_in(store, verified),
                uv_sha256=known_sha256(store, layout["uv"], verified) if os.path.isfile(layout["uv"]) else "")


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


def read(module, params):
    """mlx_env_facts' result (without changed), once problem(params) is None: the folders, the target
    interpreter, the store and the venv, its probe beside the other reads."""
    path, store = os.path.normpath(params["path"]), os.path.normpath(params["store"])
    login, owner, uid = users(params)
    state = dict(owner=owner, login_user=login, uname_machine=uname_machine(module),
                 to_make=_to_make(path, store, owner, uid),
                 folders={"path": folder_state(path, VENV_MARKER), "store": folder_state(store, STORE_MARKER)})
    venv = read_venv(module, path)
    state["target"] = read_target(module, params)
    state.update(read_store(store), fingerprint=read_fingerprint(path), venv=venv())
    return state

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mlx_env
short_description: Make a node's MLX venv exactly the locked set, offline, and prove it works
description:
  - Compares the venv at O(path) with O(requirements) (name, version, wheel file and sha256 from the
    lock, chosen for this node by the controller) and with the wanted base interpreter, and changes
    only what differs.
  - Installs offline from wheels already pushed to the store, with the store's uv
    (C(uv pip sync --offline --no-index --require-hashes)), so the node needs no Internet and every
    node gets the same bytes. A package not in O(requirements) is removed.
  - For a uv-managed Python (O(python_build)), extracts the pushed build after checking its sha256.
  - Then proves the environment; the venv's Python imports C(mlx.core), runs a tiny computation,
    reports versions and device, and its architecture must match C(uname -m) (a Rosetta Python on a
    Mac fails here).
  - Writes the fingerprint (lock hash plus the installed set) next to the venv and returns it as
    the fact C(mlx_env_fingerprint).
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  interpreter:
    description: The base interpreter the venv must be made from.
    type: path
    required: true
  python_build:
    description: A uv-managed build to extract when O(interpreter) is missing (key, filename, sha256).
    type: dict
  requirements:
    description: The locked distributions this node needs.
    type: list
    elements: dict
    required: true
  lock_hash:
    description: sha256 of the lock file, recorded in the fingerprint.
    type: str
    required: true
extends_documentation_fragment:
  - mlx_fleet.cluster.options.mlx_env
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Converge the venv
  mlx_fleet.cluster.mlx_env:
    path: /opt/mlx-fleet/venv
    store: /opt/mlx-fleet/store
    interpreter: /usr/bin/python3
    requirements:
      - {name: mlx, version: 0.32.4, filename: mlx-0.32.4-cp311-cp311-manylinux_2_35_x86_64.whl, sha256: "..."}
    lock_hash: "..."
"""

RETURN = r"""
changes:
  description: Distributions that were (or in check mode would be) installed, replaced or removed.
  returned: always
  type: list
  elements: str
  sample: ["mlx 0.32.3 -> 0.32.4"]
actions:
  description: What was done, in order (extract_python, create_venv, sync, write_fingerprint).
  returned: always
  type: list
  elements: str
proof:
  description: The venv's own report (computation result, device, versions); null in check mode before the venv exists.
  returned: always
  type: dict
ansible_facts:
  description: The fingerprint.
  returned: always
  type: dict
  contains:
    mlx_env_fingerprint:
      description: lock_hash, python, machine, installed (name to version) and their digest.
      type: dict
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import (
    fingerprint, fingerprint_path, pyvenv_home, run_probe, sha256_file, store_paths)
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.node_files import write_json

UV_ENV = {"UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never", "UV_OFFLINE": "1", "UV_NO_CACHE": "1"}


def _listing(python_label, installed):
    lines = ["python: %s" % python_label] if python_label else []
    lines += ["%s==%s" % (k, v) for k, v in sorted(installed.items())]
    return "\n".join(lines) + "\n"


def _run(module, argv, what):
    rc, out, err = module.run_command(argv, environ_update=UV_ENV)
    if rc != 0:
        module.fail_json(msg="mlx_env: %s failed (rc=%d): %s" % (what, rc, (err or out).strip()[-2000:]), cmd=argv)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            store=dict(type="path", required=True),
            interpreter=dict(type="path", required=True),
            python_build=dict(type="dict"),
            requirements=dict(type="list", elements="dict", required=True),
            lock_hash=dict(type="str", required=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path, store, interpreter = p["path"].rstrip("/"), p["store"], p["interpreter"]
    layout = store_paths(store)
    uv = layout["uv"]
    desired = dict((r["name"], str(r["version"])) for r in p["requirements"])
    actions, changes = [], []

    # 1. The base interpreter (uv-managed builds are extracted from the pushed archive).
    if not os.access(interpreter, os.X_OK):
        build = p["python_build"]
        if not build:
            module.fail_json(msg="mlx_env: %s does not exist on this node; set mlx_env_python_interpreter to "
                                 "an interpreter every node has, or leave it empty for a uv-managed Python" % interpreter)
        archive = os.path.join(layout["downloads"], build["filename"])
        actions.append("extract_python")
        if not module.check_mode:
            if not os.path.isfile(archive) or sha256_file(archive) != build["sha256"]:
                module.fail_json(msg="mlx_env: %s is missing or does not match its locked sha256" % archive)
            dest = os.path.join(layout["pythons"], build["key"])
            if not os.path.isdir(dest):
                os.makedirs(dest)
            _run(module, [module.get_bin_path("tar", required=True), "-xzf", archive, "-C", dest],
                 "extracting %s" % build["filename"])
            if not os.access(interpreter, os.X_OK):
                module.fail_json(msg="mlx_env: %s has no %s after extraction" % (build["filename"], interpreter))

    # 2. The venv: made from the right interpreter, holding exactly the locked set.
    target = None
    if os.access(interpreter, os.X_OK):
        target, error = run_probe(module, interpreter)
        if target is None:
            module.fail_json(msg="mlx_env: %s does not run: %s" % (interpreter, error))
    venv_python = os.path.join(path, "bin", "python")
    current, installed = None, {}
    if os.access(venv_python, os.X_OK):
        current, dummy = run_probe(module, venv_python, "installed")
        if current is not None:
            installed = current.get("installed", {})
    want_home = os.path.dirname(interpreter)
    home = pyvenv_home(path)
    right_base = (current is not None and target is not None
                  and current["version"] == target["version"]
                  and current["base_prefix"] == target["prefix"])
    recreate = current is None or not right_base
    if recreate:
        actions.append("create_venv")
        if installed:
            changes.append("venv rebuilt from %s" % interpreter)
        installed_after_base = {}
    else:
        installed_after_base = installed
    for name in sorted(set(desired) | set(installed_after_base)):
        have, want = installed_after_base.get(name), desired.get(name)
        if have != want:
            changes.append("%s %s -> %s" % (name, have or "(none)", want or "(removed)"))
    need_sync = recreate or installed_after_base != desired
    if need_sync:
        actions.append("sync")

    before_label = "%s (%s)" % (home, ".".join(map(str, current["version"]))) if current else ""
    after_label = "%s (%s)" % (want_home, ".".join(map(str, target["version"]))) if target else "%s" % want_home
    diff = {"before_header": path, "after_header": path,
            "before": _listing(before_label, installed) if current else "",
            "after": _listing(after_label, desired)}

    if not module.check_mode and need_sync:
        if not os.access(uv, os.X_OK):
            module.fail_json(msg="mlx_env: uv is missing at %s" % uv)
        if recreate:
            _run(module, [uv, "venv", "--clear", "--python", interpreter, path], "uv venv")
        handle, reqfile = tempfile.mkstemp(prefix="mlx-env-", suffix=".txt")
        try:
            with os.fdopen(handle, "w") as req:
                for r in p["requirements"]:
                    req.write("%s==%s --hash=sha256:%s\n" % (r["name"], r["version"], r["sha256"]))
            _run(module, [uv, "pip", "sync", "--python", venv_python, "--offline", "--no-index",
                          "--find-links", layout["wheels"], "--require-hashes", "--link-mode", "copy", reqfile],
                 "uv pip sync")
        finally:
            os.unlink(reqfile)
        current, dummy = run_probe(module, venv_python, "installed")
        installed = (current or {}).get("installed", {})
        if installed != desired:
            module.fail_json(msg="mlx_env: after uv pip sync the venv still differs from the lock",
                             installed=installed, desired=desired)

    # 3. Proof: import mlx.core, compute, versions, device, architecture.
    rc, machine, err = module.run_command([module.get_bin_path("uname", required=True), "-m"])
    machine = machine.strip()
    proof = None
    if os.access(venv_python, os.X_OK) and not (module.check_mode and need_sync):
        info, error = run_probe(module, venv_python, "prove")
        if info is None:
            module.fail_json(msg="mlx_env: the venv's Python does not run: %s" % error)
        proof = dict(info["proof"], machine=info["machine"], uname_machine=machine)
        if not proof.get("ok"):
            module.fail_json(msg="mlx_env: %s cannot use MLX: %s" % (venv_python, proof.get("error", proof)), proof=proof)
        if info["machine"] != machine:
            module.fail_json(msg="mlx_env: %s runs as %s but the node is %s (a Rosetta or foreign Python); "
                                 "use a native %s interpreter" % (venv_python, info["machine"], machine, machine),
                             proof=proof)

    # 4. The fingerprint, next to the venv.
    version = ".".join(map(str, target["version"])) if target else ""
    fact = fingerprint(p["lock_hash"], desired if (module.check_mode and need_sync) else installed, version, machine)
    fp_path = fingerprint_path(path)
    try:
        with open(fp_path) as handle:
            on_disk = json.load(handle)
    except (IOError, OSError, ValueError):
        on_disk = None
    if on_disk != fact:
        actions.append("write_fingerprint")
        if not module.check_mode:
            write_json(module, fp_path, fact)

    module.exit_json(changed=bool(actions), actions=actions, changes=changes, proof=proof, diff=diff,
                     ansible_facts={"mlx_env_fingerprint": fact})


if __name__ == "__main__":
    main()

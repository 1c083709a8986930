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
  - One install at a time on a Mac - an interrupted converge's install can outlive its ssh session - so the module
    waits (up to 300 s) for the store's lock C(.mlx-fleet-install.lock) before it clears what an earlier run left.
  - Applies this node's plan from M(mlx_fleet.cluster.mlx_env_plan) (O(plan)). When the plan says
    the node already is the locked environment, the action plugin returns at once and nothing
    runs on the node.
  - Otherwise the action plugin sends the node's bundle (one tar of the artifacts it lacks) and the
    module checks the bundle's sha256 and every file in it against the lock before using it, then
    puts the wheels in the store, extracts uv from its wheel, and extracts a uv-managed CPython
    build into the store (a build that is missing, unfinished or altered is replaced).
  - Before using them it re-checks the sha256 of the store's uv and the files of the Python build.
  - It records the store's wheels and uv it checked (size, modification time, sha256) in C(verified.json) in the
    store, as git's index does; the next converge's read takes the sha256 of a file still of that size and date from
    there and hashes only the others.
  - When the venv at O(path) is missing, made from another interpreter, holds another set or does not
    run MLX, a new one is built whole beside it, in C(.NAME.next) in the same folder (relocatable, so it
    runs once renamed), from the planned interpreter, installing offline with the store's uv
    (C(uv pip sync --offline --no-index --require-hashes)); the old venv stays untouched, and
    M(mlx_fleet.cluster.mlx_env_switch) swaps the two in one rename (RV(switch)). An interrupt
    before that leaves the old venv as it was.
  - Only a folder mlx-fleet made (it holds a marker file) or an empty one is ever cleared.
  - Then proves the environment; the venv's Python imports C(mlx.core), runs a tiny computation,
    reports versions and device, and its architecture must match C(uname -m) (a Rosetta Python on a
    Mac fails here).
  - Writes the fingerprint (lock hash plus the installed set) in the venv (the new one, last, so it
    says the venv is whole) and returns it as the fact C(mlx_env_fingerprint).
version_added: "0.1.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  plan:
    description: This node's entry in the RV(mlx_fleet.cluster.mlx_env_plan#module:hosts) of the plan.
    type: dict
    required: true
    suboptions:
      interpreter:
        description: The base interpreter the venv must be made from.
        type: path
        required: true
      python_build:
        description: The uv-managed build O(plan.interpreter) belongs to (key, filename, sha256), or null.
        type: dict
      requirements:
        description: The locked distributions this node needs (name, version, filename, sha256).
        type: list
        elements: dict
        required: true
      uv:
        description: The sha256 the store's uv must have, and the uv wheel (filename, sha256) when it is in the bundle.
        type: dict
      bundle:
        description: The bundle (src, sha256, members); the action plugin replaces src with its path on the node.
        type: dict
      push:
        description: The names of the files in the bundle.
        type: list
        elements: str
        default: []
      matches:
        description: Whether the node already is the locked environment.
        type: bool
        default: false
      fingerprint:
        description: The node's fingerprint when it matches.
        type: dict
      changes:
        description: The package changes the controller expects (shown in check mode).
        type: list
        elements: str
        default: []
  lock_hash:
    description: sha256 of the lock file, recorded in the fingerprint.
    type: str
    required: true
extends_documentation_fragment:
  - mlx_fleet.cluster.options.mlx_env
  - mlx_fleet.cluster.attributes.changes
"""

EXAMPLES = r"""
- name: Install the locked set offline and prove MLX runs
  mlx_fleet.cluster.mlx_env:
    path: /opt/mlx-fleet/venv
    store: /opt/mlx-fleet/store
    plan: "{{ mlx_env_plan.hosts[inventory_hostname] }}"
    lock_hash: "{{ mlx_env_plan.lock_hash }}"
"""

RETURN = r"""
changes:
  description: Distributions that were (or in check mode would be) installed, replaced or removed.
  returned: always
  type: list
  elements: str
  sample: ["mlx 0.32.3 -> 0.32.4"]
actions:
  description: What was done, in order (unpack_bundle, install_uv, extract_python, create_venv (made from another
    interpreter, or first made), sync (the locked set installed into a new venv), write_fingerprint).
  returned: always
  type: list
  elements: str
switch:
  description: The new venv for M(mlx_fleet.cluster.mlx_env_switch) to put in place (next, path, the digest of
    its fingerprint); null when none was built (nothing to change, or check mode).
  returned: always
  type: dict
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

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import zipfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import json_text, write_atomically
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.locks import LockTimeout, lock_within, open_lock_file
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import (
    STORE_MARKER, VENV_MARKER, build_marker, build_state, claim, fingerprint, fingerprint_path, known_sha256,
    next_path, path_problems, pyvenv_home, read_verified, run_probe, sha256_file, store_paths, tree_digest,
    verified_entry)

INSTALL_LOCK = ".mlx-fleet-install.lock"  # in the store: one install at a time on a Mac
INSTALL_WAIT = 300  # seconds an install waits for an earlier one to end
UV_ENV = {"UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never", "UV_OFFLINE": "1"}
PLAN_SPEC = dict(
    interpreter=dict(type="path", required=True),
    python_build=dict(type="dict"),
    requirements=dict(type="list", elements="dict", required=True),
    uv=dict(type="dict"),
    bundle=dict(type="dict"),
    push=dict(type="list", elements="str", default=[]),
    matches=dict(type="bool", default=False),
    fingerprint=dict(type="dict"),
    changes=dict(type="list", elements="str", default=[]),
)


def _listing(python_label, installed):
    lines = ["python: %s" % python_label] if python_label else []
    lines += ["%s==%s" % (k, v) for k, v in sorted(installed.items())]
    return "\n".join(lines) + "\n"


def _run(module, argv, what, environ=None):
    rc, out, err = module.run_command(argv, environ_update=dict(UV_ENV, **(environ or {})))
    if rc != 0:
        module.fail_json(msg="mlx_env: %s failed (rc=%d): %s" % (what, rc, (err or out).strip()[-2000:]), cmd=argv)
    return out


class _HashingReader(object):
    """A file read once, front to back, whose sha256 is known at the end."""

    def __init__(self, handle):
        self.handle, self.digest = handle, hashlib.sha256()

    def read(self, size=-1):
        block = self.handle.read(size)
        self.digest.update(block)
        return block


def _unpack(module, bundle, expected, staging):
    """Check BUNDLE's sha256 and each member's against EXPECTED (name -> sha256), in one read;
    the files, in STAGING, by name."""
    files = {}
    with open(bundle["src"], "rb") as raw:
        whole = _HashingReader(raw)
        with tarfile.open(fileobj=whole, mode="r|") as tar:
            for member in tar:
                want = expected.get(member.name)
                if want is None or not member.isfile():
                    module.fail_json(msg="mlx_env: the bundle holds %s, which the plan does not list" % member.name)
                dest = os.path.join(staging, "%d" % len(files))
                part = _HashingReader(tar.extractfile(member))
                with open(dest, "wb") as out:
                    shutil.copyfileobj(part, out, 1 << 20)
                if part.digest.hexdigest() != want:
                    module.fail_json(msg="mlx_env: %s in the bundle does not have its locked sha256 %s"
                                         % (member.name, want))
                files[member.name] = dest
        while whole.read(1 << 20):
            pass
    if whole.digest.hexdigest() != bundle["sha256"]:
        module.fail_json(msg="mlx_env: the bundle %s arrived with another sha256 than the controller sent; run again"
                             % bundle["src"])
    missing = sorted(set(expected) - set(files))
    if missing:
        module.fail_json(msg="mlx_env: the bundle lacks %s" % ", ".join(missing))
    return files


def _install_uv(module, wheel, uv_path, want):
    with zipfile.ZipFile(wheel) as zf:
        member = next((n for n in zf.namelist() if n.endswith(".data/scripts/uv")), None)
        if member is None:
            module.fail_json(msg="mlx_env: the uv wheel holds no uv binary")
        binary = zf.read(member)
    if hashlib.sha256(binary).hexdigest() != want:
        module.fail_json(msg="mlx_env: the uv in its wheel does not have the sha256 the controller computed")
    write_atomically(module, uv_path, binary, 0o755)


def _check_uv(module, uv_path, want):
    """The store's uv is used only with the sha256 the controller computed from the locked wheel."""
    if not (os.path.isfile(uv_path) and sha256_file(uv_path) == want):
        module.fail_json(msg="mlx_env: %s is missing or is not the locked uv; run the play again" % uv_path)


def _wait_for_other_installs(module, store):
    """The store's install lock, held until this module ends. An interrupted converge's install can outlive its
    ssh session and still be writing here: the leftovers are cleared only once it has ended (bounded wait)."""
    path = os.path.join(store, INSTALL_LOCK)
    try:
        fd = open_lock_file(path, 0o644)
    except OSError as exc:
        module.fail_json(msg="mlx_env: %s cannot be opened as the install lock (%s): a symlink or another kind of "
                             "file is there; remove it and run again" % (path, exc.strerror))
    try:
        lock_within(fd, INSTALL_WAIT, 0.5)
    except LockTimeout:
        module.fail_json(msg="mlx_env: another install (an interrupted run's) still holds %s after %d s; "
                             "let it end, then run again" % (path, INSTALL_WAIT))
    return fd


def _remove_leftovers(store):
    """What an interrupted run left in the store (called only once the store is known to be ours)."""
    layout = store_paths(store)
    leftovers = [os.path.join(layout["incoming"], n) for n in os.listdir(layout["incoming"])]
    leftovers += [os.path.join(layout["pythons"], n) for n in os.listdir(layout["pythons"]) if n.startswith(".partial-")]
    for old in leftovers:
        if os.path.isdir(old) and not os.path.islink(old):
            shutil.rmtree(old)
        else:
            os.unlink(old)


def _extract_python(module, store, build, archive):
    """Extract BUILD's verified ARCHIVE beside its place, then swap it in and mark it complete."""
    pythons = store_paths(store)["pythons"]
    partial = tempfile.mkdtemp(dir=pythons, prefix=".partial-")
    _run(module, [module.get_bin_path("tar", required=True), "-xzf", archive, "-C", partial],
         "extracting %s" % build["filename"])
    if not os.access(os.path.join(partial, "python", "bin", "python3"), os.X_OK):
        shutil.rmtree(partial)
        module.fail_json(msg="mlx_env: %s has no python/bin/python3" % build["filename"])
    marker = build_marker(store, build["key"])
    if os.path.exists(marker):
        os.unlink(marker)
    dest = os.path.join(pythons, build["key"])
    if os.path.lexists(dest):
        if os.path.isdir(dest) and not os.path.islink(dest):
            shutil.rmtree(dest)
        else:
            os.unlink(dest)
    os.rename(partial, dest)
    write_atomically(module, marker, json_text({"sha256": build["sha256"], "tree": tree_digest(dest)}))


class _Run:
    """One run of the module: the plan, the folders it works on, and what it did (actions, changes)."""

    def __init__(self, module):
        p, plan = module.params, module.params["plan"]
        problems = path_problems(p["path"], p["store"])
        if problems:
            module.fail_json(msg="mlx_env: " + "; ".join(problems))
        self.module, self.plan, self.lock_hash, self.check = module, plan, p["lock_hash"], module.check_mode
        self.path, self.store, self.interpreter = os.path.normpath(p["path"]), os.path.normpath(p["store"]), plan["interpreter"]
        self.layout = store_paths(self.store)
        self.build, self.uv = plan["python_build"], plan["uv"] or {}
        self.actions, self.changes = [], list(plan["changes"])
        self.install_lock = None  # the store's install lock, held to the end (_wait_for_other_installs)
        self.venv_python = os.path.join(self.path, "bin", "python")
        # A venv that must change is built whole beside it and proved there; mlx_env_switch then swaps the two
        # in one rename, so an interrupt at any point leaves the old venv as it was.
        self.new = next_path(self.path)
        self.new_python = os.path.join(self.new, "bin", "python")
        self.staging = None
        self.checked = {}  # the store's files this run checked against the lock: path in the store -> sha256


def _prepare_store(run):
    """Claim the folders, make the store's own, clear what an interrupted run left, stage (not in check mode)."""
    if run.check:
        return
    for folder, marker in ((run.store, STORE_MARKER), (run.path, VENV_MARKER), (run.new, VENV_MARKER)):
        claim(run.module, folder, marker)
    run.install_lock = _wait_for_other_installs(run.module, run.store)
    layout = run.layout
    for sub in (layout["wheels"], layout["incoming"], layout["pythons"], os.path.dirname(layout["uv"])):
        if not os.path.isdir(sub):
            os.makedirs(sub)
    _remove_leftovers(run.store)
    run.staging = tempfile.mkdtemp(dir=layout["incoming"])


def _receive_bundle(run):
    """1. What arrived: the bundle, every file checked against the lock; its files by name in the bundle."""
    files = {}
    if not run.plan["bundle"]:
        return files
    run.actions.append("unpack_bundle")
    if run.check:
        return files
    uv, build = run.uv, run.build
    expected = {"wheels/%s" % r["filename"]: r["sha256"] for r in run.plan["requirements"]}
    if uv.get("wheel"):
        expected["uv/%s" % uv["wheel"]["filename"]] = uv["wheel"]["sha256"]
    if build:
        expected["python/%s" % build["filename"]] = build["sha256"]
    files = _unpack(run.module, run.plan["bundle"], dict((n, expected.get(n)) for n in run.plan["push"]), run.staging)
    for name, tmp in files.items():
        if name.startswith("wheels/"):
            os.rename(tmp, os.path.join(run.layout["wheels"], name.split("/", 1)[1]))
            run.checked[name] = expected[name]
    return files


def _install_tools(run, files):
    """2. uv and the Python build, re-checked before use."""
    uv, build, layout = run.uv, run.build, run.layout
    if uv.get("wheel"):
        run.actions.append("install_uv")
        if not run.check:
            _install_uv(run.module, files["uv/%s" % uv["wheel"]["filename"]], layout["uv"], uv["sha256"])
    if not build:
        return
    if run.check:
        if not os.access(run.interpreter, os.X_OK):
            run.actions.append("extract_python")
        return
    state = build_state(run.store, build["key"])
    if not state or state["sha256"] != build["sha256"] or not state["intact"]:
        archive = files.get("python/%s" % build["filename"])
        if archive is None:
            run.module.fail_json(msg="mlx_env: the Python build %s is missing or altered in %s and the controller "
                                     "did not send it; run the play again" % (build["key"], layout["pythons"]))
        run.actions.append("extract_python")
        _extract_python(run.module, run.store, build, archive)


def _read_venv(run):
    """3. The venv as it is against the locked set: whether it must be rebuilt, and the diff."""
    module, interpreter, path = run.module, run.interpreter, run.path
    target = None
    if os.access(interpreter, os.X_OK):
        target, error = run_probe(module, interpreter)
        if target is None:
            module.fail_json(msg="mlx_env: %s does not run: %s" % (interpreter, error))
    current, installed = None, {}
    if os.access(run.venv_python, os.X_OK):
        current, dummy = run_probe(module, run.venv_python, "installed", "prove")
        if current is not None:
            installed = current.get("installed", {})
    right_base = (current is not None and target is not None and current["version"] == target["version"]
                  and current["base_prefix"] == target["prefix"])
    desired = dict((r["name"], str(r["version"])) for r in run.plan["requirements"])
    # Rebuilt when made from another interpreter, holding another set or not running MLX, as read now
    # (after the Python build was repaired, say); a wrong fingerprint alone is rewritten in place.
    rebuild = not right_base or installed != desired or not (current or {}).get("proof", {}).get("ok")
    if not right_base:
        run.actions.append("create_venv")
    if run.check and rebuild:
        run.actions.append("sync")
    before_label = "%s (%s)" % (pyvenv_home(path), ".".join(map(str, current["version"]))) if current else ""
    after_label = "%s (%s)" % (os.path.dirname(interpreter), ".".join(map(str, target["version"]))) \
        if target else os.path.dirname(interpreter)
    diff = {"before_header": path, "after_header": path,
            "before": _listing(before_label, installed) if current else "",
            "after": _listing(after_label, desired)}
    return dict(target=target, current=current, installed=installed, before=dict(installed), desired=desired,
                rebuild=rebuild, diff=diff)


def _sync_new_venv(run):
    """Make the new venv from the interpreter and install exactly the locked set into it, offline."""
    module, layout = run.module, run.layout
    _check_uv(module, layout["uv"], run.uv.get("sha256"))
    run.checked[os.path.relpath(layout["uv"], run.store)] = run.uv.get("sha256")
    _record_store(run)
    claim(module, run.new, VENV_MARKER, clear=True)
    # Relocatable: its scripts find their Python beside them, so they run once it is renamed to PATH.
    _run(module, [layout["uv"], "venv", "--relocatable", "--allow-existing", "--python", run.interpreter, run.new],
         "uv venv")
    handle, reqfile = tempfile.mkstemp(prefix="mlx-env-", suffix=".txt")
    try:
        with os.fdopen(handle, "w") as req:
            for r in run.plan["requirements"]:
                req.write("%s==%s --hash=sha256:%s\n" % (r["name"], r["version"], r["sha256"]))
        # uv's cache lives (and goes) with the staging folder: the venv keeps uv's
        # platform link mode (a clone on APFS, a hard link on Linux), no second copy.
        _run(module, [layout["uv"], "pip", "sync", "--python", run.new_python, "--offline", "--no-index",
                      "--find-links", layout["wheels"], "--require-hashes", reqfile],
             "uv pip sync", {"UV_CACHE_DIR": os.path.join(run.staging, "uv-cache")})
    finally:
        os.unlink(reqfile)


def _record_store(run):
    """The store's record (module_utils.mlx_env.VERIFIED) of the wheels this install uses and its uv, each checked
    against the lock: by this run (run.checked), else by the record's sha256 while the file is as it recorded it,
    else hashed now. A file that differs is left out (uv's --require-hashes then names it)."""
    store, verified = run.store, read_verified(run.store)
    wanted = dict(("wheels/%s" % r["filename"], r["sha256"]) for r in run.plan["requirements"])
    wanted[os.path.relpath(run.layout["uv"], store)] = run.uv.get("sha256")
    record = {}
    for name, sha256 in sorted(wanted.items()):
        full = os.path.join(store, name)
        if not os.path.isfile(full):
            continue
        if (run.checked.get(name) or known_sha256(store, full, verified)) == sha256:
            record[name] = verified_entry(full, sha256)
    write_atomically(run.module, run.layout["verified"], json_text(record))


def _rebuild_venv(run, venv):
    """The new venv, synced and read back: it holds the locked set, and run.changes says what changed."""
    _sync_new_venv(run)
    current, error = run_probe(run.module, run.new_python, "installed", "prove")
    if current is None:
        run.module.fail_json(msg="mlx_env: the new venv's Python does not run: %s" % error)
    installed, before = current.get("installed", {}), venv["before"]
    if sorted(installed) != sorted(venv["desired"]):
        run.module.fail_json(msg="mlx_env: after uv pip sync the venv still differs from the lock",
                             installed=installed, desired=venv["desired"])
    run.changes = ["%s %s -> %s" % (n, before.get(n) or "(none)", installed.get(n) or "(removed)")
                   for n in sorted(set(before) | set(installed)) if before.get(n) != installed.get(n)]
    run.actions.append("sync")  # the locked set, installed whole into the new venv
    venv.update(current=current, installed=installed)


def _prove(run, current):
    """4. Proof: import mlx.core, compute, versions, device, architecture. The node's machine, and the proof."""
    module = run.module
    rc, machine, err = module.run_command([module.get_bin_path("uname", required=True), "-m"])
    machine = machine.strip()
    if run.check:
        return machine, None
    proof = dict(current["proof"], machine=current["machine"], uname_machine=machine)
    if not proof.get("ok"):
        module.fail_json(msg="mlx_env: %s cannot use MLX: %s" % (run.venv_python, proof.get("error", proof)), proof=proof)
    if current["machine"] != machine:
        module.fail_json(msg="mlx_env: %s runs as %s but the node is %s (a Rosetta or foreign Python); "
                             "use a native %s interpreter" % (run.venv_python, current["machine"], machine, machine),
                         proof=proof)
    return machine, proof


def _write_fingerprint(run, venv, machine):
    """5. The fingerprint, in the venv (the new one when rebuilt). The fact, and whether a new venv was built."""
    version = ".".join(map(str, (venv["current"] or venv["target"] or {}).get("version", [])))
    fact = fingerprint(run.lock_hash, venv["desired"] if run.check else venv["installed"], version, machine)
    try:
        with open(fingerprint_path(run.path)) as handle:
            on_disk = json.load(handle)
    except (IOError, OSError, ValueError):
        on_disk = None
    if on_disk != fact:
        run.actions.append("write_fingerprint")
    built = not run.check and venv["rebuild"]
    if built or (on_disk != fact and not run.check):
        # Written last: in the new venv, it says the venv is whole (mlx_env_switch checks it).
        write_atomically(run.module, fingerprint_path(run.new if built else run.path), json_text(fact))
    return fact, built


ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    store=dict(type="path", required=True),
    plan=dict(type="dict", required=True, options=PLAN_SPEC),
    lock_hash=dict(type="str", required=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run = _Run(module)
    _prepare_store(run)
    try:
        files = _receive_bundle(run)
        _install_tools(run, files)
        venv = _read_venv(run)
        if venv["rebuild"] and not run.check:
            _rebuild_venv(run, venv)
    finally:
        if run.staging:
            shutil.rmtree(run.staging, ignore_errors=True)
    machine, proof = _prove(run, venv["current"])
    fact, built = _write_fingerprint(run, venv, machine)
    module.exit_json(changed=bool(run.actions), actions=run.actions, changes=run.changes, proof=proof,
                     diff=venv["diff"], switch={"next": run.new, "path": run.path, "digest": fact["digest"]} if built
                     else None, ansible_facts={"mlx_env_fingerprint": fact})


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: model_copy
short_description: One Mac's part of a models sync, receiving its missing files and serving its neighbours
description:
  - Pulls the files of O(receive) from their senders over a raw TCP stream (a cable's address, or the
    controller's for the first copy), hashing every byte while it writes under a temporary name, resuming a
    temporary file left by an interrupted copy, and renaming a file into place only when it matches its pin. A Hub
    entry's blob is linked from its snapshot once verified, and its C(refs/<revision>) written last.
  - Meanwhile serves, on O(serve) (a one-shot listener on this Mac's cable addresses), the files it holds or has
    just verified to the neighbours the plan gave it, until each said it is done or O(timeout) passed. Both ends
    show the run's one-time O(token). Nothing keeps running after the module returns.
  - On the Mac C(mlx_fleet_models_source) names, the files of a sender C(hub) are fetched from the Hub (O(hub)) with
    the huggingface_hub of the cluster's environment, each hashed against its pin before it is put in place and
    served on.
  - The plan (which Mac pulls which file from where) is the C(mlx_fleet.cluster.models_sync_plan) action's; the
    C(mlx_fleet.cluster.model_copy) action serves the first copy from the controller, and gives the Mac that
    fetches from the Hub the controller's Hub settings and the user's token.
  - Never removes a file it did not write (a temporary file that fails its hash is its own). Keeps a record of
    what it wrote of each model (C(.mlx-fleet-written) in a Hub entry's repo folder, C(O(models_dir)/.mlx-fleet-written/<name>)
    for a path entry), the only files M(mlx_fleet.cluster.models_prune) removes, with each received file's size and
    modification time as verified, so that a later read
    (O(mlx_fleet.cluster.model_files_facts#module:verify)) need not hash a file still so.
version_added: "0.5.0"
author: mlx-fleet contributors (!UNKNOWN)
options:
  models:
    description: The pinned manifests of the models concerned, as C(mlx_fleet.cluster.models_manifest) returns them.
    type: list
    elements: dict
    required: true
  receive:
    description: Per sender, its C(address), C(port), C(sender) (its name, for the report) and the C(files)
      (C(model), C(path)) to pull from it.
    type: list
    elements: dict
    default: []
  serve:
    description: C(addresses) (this Mac's cable addresses to listen on), C(port), C(clients) (how many neighbours
      pull from it); none when no neighbour does.
    type: dict
  token:
    description: The run's one-time token, shown by every receiver to its sender.
    type: str
    required: true
  timeout:
    description: Seconds after which every wait ends (a dead peer never hangs the run); what did not arrive fails.
    type: int
    default: 3600
  hub:
    description: For a Mac that fetches Hub entries (C(mlx_fleet_models_source); a sender C(hub) in O(receive)),
      C(endpoint), C(etag_timeout) and C(download_timeout) (the Hub and the waits as the controller's
      huggingface_hub has them), C(python) (the cluster's environment's interpreter, whose huggingface_hub
      downloads), C(refusals) (the Hub's refusals by kind, the controller's table). Each file is downloaded into
      a staging cache in its repo folder (C(.mlx-fleet-fetch)), hashed against its pin and only then renamed into
      place and served on.
    type: dict
  hub_token:
    description: The user's Hub token for O(hub) (their login on the controller), given to the interpreter on its
      standard input only; none for a public repo.
    type: str
  progress:
    description: C(address), C(port) and C(name) of the controller's progress listener (C(mlx-fleet models sync)'s
      live line); twice a second one UDP datagram, JSON C([name, bytes held, bytes to receive]), is sent there,
      never waited on. Without it, nothing is sent.
    type: dict
extends_documentation_fragment:
  - mlx_fleet.cluster.attributes.changes
  - mlx_fleet.cluster.options.models
"""

EXAMPLES = r"""
- name: Copy this Mac's missing model files and serve its neighbours
  mlx_fleet.cluster.model_copy:
    models: "{{ mlx_fleet_models_pinned.manifests }}"
    receive: [{address: 192.168.0.1, port: 47181, files: [{model: tiny, path: config.json}]}]
    token: "{{ mlx_fleet_models_sync_token }}"  # a no_log fact: never in the registered plan, which is logged
  become: true
"""

RETURN = r"""
ansible_facts:
  description: What this Mac's part of the sync did.
  returned: success
  type: dict
  contains:
    mlx_fleet_model_copy:
      description: C(received) (per file C(model), C(path), C(bytes) that crossed the wire, C(from) the sender's
        name), C(failed)
        (C(model), C(path), C(from), C(why); a file the Hub refused also C(refusal), its kind, and C(endpoint)),
        C(bytes), C(seconds), C(served_bytes), C(refs) (the Hub entries whose
        ref was written).
      type: dict
      returned: success
      sample: {"received": [{"model": "tiny", "path": "config.json", "bytes": 120, "from": "192.168.0.1"}],
               "failed": [], "bytes": 120, "seconds": 0.4, "served_bytes": 0, "refs": []}
"""

import json
import os
import socket
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults, model_files, model_hub, model_stream


def _pull(params, manifests, sender, holdings, deadline, found, verified):
    """Every file of SENDER pulled in turn; a failed file does not stop the others. VERIFIED: (model, path) -> the
    stamp (size, modification time) of each file received, taken as soon as it was verified in place."""
    source = sender.get("sender") or sender["address"]  # a Mac's name, or the controller
    try:
        receiver = model_stream.Receiver(sender["address"], sender["port"], params["token"], deadline)
    except model_stream.CopyFailed as exc:
        for wanted in sender["files"]:
            holdings.failed((wanted["model"], wanted["path"]))
            found["failed"].append(dict(wanted, **{"from": source, "why": str(exc)}))
        return
    lost = None  # why the connection broke: the files after it fail at once, not after a silence each
    try:
        for wanted in sender["files"]:
            key = (wanted["model"], wanted["path"])
            manifest = manifests[wanted["model"]]
            pinned = next(f for f in manifest["files"] if f["path"] == wanted["path"])
            root = model_files.model_root(manifest, params["hf_cache"], params["models_dir"])
            final = model_stream.stored_path(manifest, root, pinned)
            why = lost
            if lost is None:
                try:
                    moved = receiver.fetch(manifest, pinned, final)
                except (model_stream.CopyFailed, OSError) as exc:
                    why = ("nothing arrived for {0} s".format(model_stream.IDLE_SECONDS)
                           if isinstance(exc, socket.timeout) else str(exc) or type(exc).__name__)
                    if not isinstance(exc, model_stream.FileRefused):
                        lost = why
                else:
                    verified[key] = model_files.stamp(final)
                    holdings.ready(key, final)
                    found["received"].append(dict(wanted, **{"from": source, "bytes": moved}))
                    continue
            holdings.failed(key)
            found["failed"].append(dict(wanted, **{"from": source, "why": why}))
    finally:
        receiver.close()


def _fetch(params, manifests, sender, holdings, deadline, found, verified):
    """Every file of SENDER, the Hub, fetched (this Mac is mlx_fleet_models_source), one model after the other,
    each hashed against its pin before it is put in place and served on; a refusal fails the rest of that model."""
    by_model = {}
    for wanted in sender["files"]:
        by_model.setdefault(wanted["model"], []).append(wanted["path"])
    for name, paths in sorted(by_model.items()):
        manifest = manifests[name]
        root = model_files.model_root(manifest, params["hf_cache"], params["models_dir"])
        pinned = dict((f["path"], f) for f in manifest["files"])
        left = list(paths)

        def fetched(path, staged):
            left.remove(path)
            final = model_stream.stored_path(manifest, root, pinned[path])
            try:
                if not os.path.isdir(os.path.dirname(final)):
                    os.makedirs(os.path.dirname(final))
                model_stream.put_in_place(pinned[path], model_files.digest_file(
                    staged, model_files.pinned_by_git(pinned[path])), staged, final)
            except (model_stream.CopyFailed, OSError) as exc:
                holdings.failed((name, path))
                found["failed"].append({"model": name, "path": path, "from": sender["sender"],
                                        "why": str(exc) or type(exc).__name__})
                return
            verified[(name, path)] = model_files.stamp(final)
            holdings.ready((name, path), final)
            found["received"].append({"model": name, "path": path, "from": sender["sender"],
                                      "bytes": pinned[path]["size"]})

        try:
            model_hub.fetch(params["hub"], params["hub_token"], manifest, paths, root, deadline, fetched)
        except (model_hub.HubRefused, OSError) as exc:
            refused = getattr(exc, "kind", None)
            for path in left:
                holdings.failed((name, path))
                found["failed"].append({"model": name, "path": path, "from": sender["sender"],
                                        "why": getattr(exc, "why", None) or str(exc), "refusal": refused,
                                        "endpoint": params["hub"]["endpoint"]})


def _finish_hub_entries(params, manifests, found):
    """Each Hub entry's snapshot links, then its ref: last, and only once every blob of it is in place (a ref lost
    on its own is written again too). What it wrote: model -> paths relative to its root."""
    failed = set(f["model"] for f in found["failed"])
    wrote = {}
    for name in sorted(set(manifests) - failed):
        manifest = manifests[name]
        if manifest["source"] != model_files.HUB:
            continue
        root = model_files.model_root(manifest, params["hf_cache"], params["models_dir"])
        if not all(os.path.isfile(model_files.blob_path(root, pinned)) for pinned in manifest["files"]):
            continue  # not this Mac's to finish: a blob is missing
        mine = wrote.setdefault(name, [])
        try:
            for pinned in manifest["files"]:
                if model_stream.link_snapshot(manifest, root, pinned):
                    mine.append(os.path.relpath(model_files.file_path(manifest, root, pinned), root))
            if model_stream.write_ref(root, manifest.get("revision"), manifest["commit"]):
                found["refs"].append(name)
                mine.append(os.path.relpath(model_files.ref_path(root, manifest["revision"]), root))
        except (model_stream.CopyFailed, OSError) as exc:
            found["failed"].append({"model": name, "path": "refs", "from": None, "why": str(exc)})
    return wrote


def _record_written(params, manifests, verified, wrote):
    """Add what this run wrote to each model's record of the sync's files (model_files.WRITTEN): the files
    received with their stamps as verified (a later sync trusts a file still so without hashing it again), the Hub
    links and refs made. `models prune` removes those files only."""
    new = dict((name, dict.fromkeys(paths)) for name, paths in wrote.items())  # model -> path -> stamp or None
    for (name, path), verified_as in verified.items():
        manifest = manifests[name]
        root = model_files.model_root(manifest, params["hf_cache"], params["models_dir"])
        pinned = next(f for f in manifest["files"] if f["path"] == path)
        new.setdefault(name, {})[os.path.relpath(model_stream.stored_path(manifest, root, pinned), root)] = verified_as
    for name, paths in new.items():
        record = model_files.written_path(manifests[name], params["hf_cache"], params["models_dir"])
        if paths:
            model_files.write_record(record, dict(model_files.read_record(record), **paths))


def holdings_of(params, manifests):
    """What this Mac may serve: every file of the manifests, ready, except those it is about to receive."""
    holdings = model_stream.Holdings()
    for manifest in manifests.values():
        root = model_files.model_root(manifest, params["hf_cache"], params["models_dir"])
        for pinned in manifest["files"]:
            holdings.ready((manifest["name"], pinned["path"]), model_stream.stored_path(manifest, root, pinned))
    for sender in params["receive"]:
        for wanted in sender["files"]:
            holdings.arriving((wanted["model"], wanted["path"]))
    return holdings


PROGRESS_SECONDS = 0.5


def _held_bytes(params, manifests, found):
    """The bytes this Mac holds of the files it is to receive: those received, and what arrived of the others."""
    received = set((f["model"], f["path"]) for f in found["received"])
    held = 0
    for sender in params["receive"]:
        for wanted in sender["files"]:
            manifest = manifests[wanted["model"]]
            pinned = next(f for f in manifest["files"] if f["path"] == wanted["path"])
            if (wanted["model"], wanted["path"]) in received:
                held += pinned["size"]
                continue
            root = model_files.model_root(manifest, params["hf_cache"], params["models_dir"])
            try:
                held += os.path.getsize(model_stream.part_path(manifest, model_stream.stored_path(manifest, root,
                                                                                                  pinned)))
            except OSError:
                pass  # not begun
    return held


def _report_progress(params, manifests, found, stopped):
    """Until STOPPED, and once more then: this Mac's bytes held and to receive, as one UDP datagram to the
    controller's progress listener (sent, never waited on: a lost datagram is a stale line)."""
    where = params["progress"]
    total = sum(next(f["size"] for f in manifests[w["model"]]["files"] if f["path"] == w["path"])
                for sender in params["receive"] for w in sender["files"])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
        while True:
            last = stopped.wait(PROGRESS_SECONDS)
            message = json.dumps([where["name"], _held_bytes(params, manifests, found), total]).encode()
            try:
                out.sendto(message, (where["address"], where["port"]))
            except OSError:
                pass
            if last:
                return


def copy(params):
    """Receive and serve at once; what happened (the mlx_fleet_model_copy fact)."""
    manifests = dict((m["name"], m) for m in params["models"])
    started = time.monotonic()
    deadline = started + params["timeout"]
    holdings = holdings_of(params, manifests)
    serve = params["serve"] or {}
    sender = None
    if serve.get("clients"):
        try:
            sender = model_stream.Sender(serve["addresses"], serve["port"], params["token"], holdings,
                                         serve["clients"], deadline)
        except OSError as exc:  # the port taken: another sync still running on this Mac, or another program
            raise model_stream.CopyFailed("cannot listen on {0} port {1}: {2}".format(
                ", ".join(serve["addresses"]), serve["port"], exc.strerror or exc))
    found = model_stream.nothing_copied()
    verified = {}
    pulls = [threading.Thread(target=_fetch if s["sender"] == model_hub.HUB_SENDER else _pull,
                              args=(params, manifests, s, holdings, deadline, found, verified))
             for s in params["receive"]]
    stopped = threading.Event()
    reporter = threading.Thread(target=_report_progress, args=(params, manifests, found, stopped), daemon=True)
    if params.get("progress") and params["receive"]:
        reporter.start()
    for pull in pulls:
        pull.start()
    for pull in pulls:
        pull.join()
    stopped.set()
    if reporter.is_alive():
        reporter.join()  # its last datagram: every byte this Mac holds now
    seconds = time.monotonic() - started
    _record_written(params, manifests, verified, _finish_hub_entries(params, manifests, found))
    found.update(bytes=sum(f["bytes"] for f in found["received"]), seconds=round(seconds, 3),
                 served_bytes=sender.wait() if sender else 0)
    return found


def main():
    module = AnsibleModule(
        argument_spec=dict(models=dict(type="list", elements="dict", required=True),
                           hf_cache=dict(type="path", default=defaults.MODELS_HF_CACHE),
                           models_dir=dict(type="path", default=defaults.MODELS_DIR),
                           receive=dict(type="list", elements="dict", default=[]),
                           serve=dict(type="dict"),
                           token=dict(type="str", required=True, no_log=True),
                           timeout=dict(type="int", default=3600),
                           progress=dict(type="dict"),
                           hub=dict(type="dict"),
                           hub_token=dict(type="str", no_log=True)),
        supports_check_mode=True,
    )
    wanted = ["{0}/{1}".format(f["model"], f["path"]) for s in module.params["receive"] for f in s["files"]]
    diff = {"before": "", "after": "".join(line + "\n" for line in wanted)}
    if module.check_mode:
        module.exit_json(changed=bool(wanted), diff=diff,
                         ansible_facts={"mlx_fleet_model_copy": model_stream.nothing_copied()})
    try:
        found = copy(module.params)
    except model_stream.CopyFailed as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=bool(found["received"] or found["refs"]), diff=diff,
                     ansible_facts={"mlx_fleet_model_copy": found})


if __name__ == "__main__":
    main()

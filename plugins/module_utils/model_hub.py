# -*- coding: utf-8 -*-
"""A Hub entry fetched on the Mac that mlx_fleet_models_source names (docs/models-on-macs.md, "Sync"): huggingface_hub
as the cluster's environment holds it downloads each file into a staging cache of the sync's own, in the model's
repo folder (so on the same volume); the caller hashes each file against its pin and renames it into the Mac's
Hugging Face cache (model_stream.put_in_place), as a file received from a neighbour.

Stdlib only, Python 3.9 compatible: the model_copy module runs it on the Mac. The user's token reaches the
environment's interpreter on its stdin only (never its argv, environment or a file), with the Hub's address and
the controller's bounded waits; the download ends by the sync's deadline whatever the Hub does.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

__metaclass__ = type

HUB_SENDER = "hub"  # in a sync plan, the sender of the files the Mac fetches from the Hub itself
STAGING = ".mlx-fleet-fetch"  # in the model's repo folder: huggingface_hub's own cache layout, the sync's to remove

# Run by the environment's interpreter: the request (with the token) on stdin, one JSON line per file fetched
# (["fetched", path, where]) and at most one refusal (["refused", kind, detail]: the table of the controller's
# plugin_utils.models.hub_pin.REFUSALS, sent with the request) or ["failed", why] on stdout.
FETCH_SCRIPT = r"""
import json, os, sys
request = json.loads(sys.stdin.readline())
def say(*words):
    sys.stdout.write(json.dumps(words) + "\n")
    sys.stdout.flush()
try:
    from huggingface_hub import errors, hf_hub_download
except ImportError as exc:
    say("failed", "huggingface_hub cannot be imported: " + str(exc))
    sys.exit(0)
for path in request["paths"]:
    try:
        got = hf_hub_download(request["repo"], path, repo_type=request["repo_type"], revision=request["commit"],
                              cache_dir=request["cache_dir"], endpoint=request["endpoint"],
                              token=request["token"] or False, etag_timeout=request["etag_timeout"])
    except Exception as exc:
        kind = next((k for k, name in request["refusals"] if isinstance(exc, getattr(errors, name, ()))), None)
        lines = [line for line in str(exc).splitlines() if line.strip()]
        detail = lines[0] if lines else type(exc).__name__
        say("refused", kind or "unreachable", detail if kind else type(exc).__name__ + ": " + detail)
        sys.exit(0)
    say("fetched", path, os.path.realpath(got))
"""


class HubRefused(Exception):
    """The fetch ended before every file came: KIND (a refusal's kind, or None when the client could not run or was
    stopped) and why in a few words."""

    def __init__(self, kind, why):
        super(HubRefused, self).__init__(why)
        self.kind, self.why = kind, why


def _environment(staging, hub):
    """The interpreter's environment: the controller's bounded waits, no progress bars, no token or Hub of the Mac's
    own, and every file huggingface_hub keeps under STAGING."""
    env = dict((name, value) for name, value in os.environ.items()
               if name not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_ENDPOINT", "HF_HOME"))
    env.update(HF_HUB_ETAG_TIMEOUT=str(hub["etag_timeout"]), HF_HUB_DOWNLOAD_TIMEOUT=str(hub["download_timeout"]),
               HF_HUB_DISABLE_PROGRESS_BARS="1", HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=os.path.join(staging, "home"))
    return env


def fetch(hub, token, manifest, paths, root, deadline, fetched):
    """Fetch PATHS of MANIFEST (a Hub entry) at its pinned commit with the interpreter HUB["python"] into the
    staging cache under ROOT (its repo folder), calling FETCHED(path, staged file) as each one comes; the staging
    cache is removed once every file came. HubRefused: the Hub's refusal, the interpreter's failure, or DEADLINE
    (time.monotonic) passed; what arrived of a file cut stays in staging, for huggingface_hub to resume it at the
    next sync."""
    staging = os.path.join(root, STAGING)
    if not os.path.isdir(staging):
        os.makedirs(staging)
    if not os.path.isfile(hub["python"]):
        raise HubRefused(None, "the cluster's environment has no interpreter at {0}: converge first".format(
            hub["python"]))
    request = {"repo": manifest["repo"], "repo_type": manifest.get("repo_type", "model"),
               "commit": manifest["commit"], "paths": list(paths), "cache_dir": staging, "endpoint": hub["endpoint"],
               "etag_timeout": hub["etag_timeout"], "refusals": hub["refusals"], "token": token}
    with tempfile.TemporaryFile() as errors:
        # Popen rather than AnsibleModule.run_command: each file is read as the interpreter says it came, so that it
        # is verified and served on to the neighbours while the next one downloads.
        process = subprocess.Popen([hub["python"], "-c", FETCH_SCRIPT], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=errors, env=_environment(staging, hub), cwd=staging)
        stopper = threading.Timer(max(0.0, deadline - time.monotonic()), process.kill)
        stopper.daemon = True
        stopper.start()
        try:
            try:
                process.stdin.write(json.dumps(request).encode() + b"\n")
                process.stdin.close()
            except OSError:
                pass  # it ended at once: its error output says why
            ended = _follow(process, fetched)
        finally:
            stopper.cancel()
            if process.poll() is None:
                process.kill()
            process.wait()
        if ended is None and process.returncode != 0:
            errors.seek(0)
            said = [line for line in errors.read().decode("utf-8", "replace").splitlines() if line.strip()]
            ended = HubRefused(None, "the sync's timeout passed" if time.monotonic() >= deadline else
                               "huggingface_hub stopped: {0}".format(said[-1] if said else process.returncode))
    if ended is not None:
        raise ended
    shutil.rmtree(staging)


def _follow(process, fetched):
    """Each line the interpreter says: FETCHED called per file; the refusal it ended with, if any."""
    for line in iter(process.stdout.readline, b""):
        try:
            said = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            continue  # not ours: a library's print
        if said[0] == "fetched":
            fetched(said[1], said[2])
        elif said[0] == "refused":
            return HubRefused(said[1], said[2])
        elif said[0] == "failed":
            return HubRefused(None, said[1])
    return None

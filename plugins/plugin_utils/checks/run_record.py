"""What the run record (`mlx-fleet record`, docs/audit.md) says about the cluster, from the audit's reads.

Per Mac: macOS version and build, model, serial number, memory, the environment's Python and every
distribution with its version and a digest of the installed files' hashes (files_sha256),
the wired limit now. For the cluster: the backend and the hostfile (content and sha256) with its envs,
the cables with their link speeds, each Mac's RDMA status. Per declared model: its source (the Hub repo,
revision and commit, or the controller folder), every file's size and hash as pinned, and how each Mac held it
when the audit read it. Only what stays the same while the cluster does: two records of an unchanged cluster are
equal here.
"""

from __future__ import annotations

import hashlib

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import fabric as fab
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import status as models_status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json


def _mac(observed: dict) -> dict:
    macos, node = observed["mlx_fleet_macos"], observed["mlx_fleet_node"]
    env = node["environment"]
    records = env.get("records") or {}
    return {
        "macos": {"version": str(macos["product_version"]), "build": macos["build_version"]},
        "model": {"identifier": macos["model_identifier"], "name": macos["model_name"], "chip": macos["chip"]},
        "serial_number": macos["serial_number"],
        "memory_bytes": macos["memory_bytes"],
        "wired_limit_mb": node["wired_limit"]["now_mb"],
        "python": ({"version": env["python"]["version"], "executable": env["python"]["executable"]}
                   if env["exists"] else None),
        "packages": {name: {"version": version, "files_sha256": (records.get(name) or {}).get("files_sha256")}
                     for name, version in sorted(env["installed"].items())},
    }


# How a Mac held a declared model when the record was made.
VERIFIED, PRESENT, NOT_PRESENT = "verified", "present", "not present"  # every byte hashed; sizes only; else


def _models(macs: list[str], observed: dict, expected: dict | None) -> dict:
    """Per declared model its source, its pinned files (path -> size and hash) and each Mac's hold of it."""
    if not expected:
        return {}
    held = {mac: {row["model"]: row for row in models_status.mac_rows(
        mac, expected["manifests"], observed[mac].get("mlx_fleet_model_files") or {})} for mac in macs}
    found = {}
    for manifest in expected["manifests"]:
        name = manifest["name"]
        source = ({"repo": manifest["repo"], "repo_type": manifest["repo_type"], "revision": manifest["revision"],
                   "commit": manifest["commit"]} if manifest["source"] == "hub"
                  else {"path": expected["folders"].get(name)})
        rows = {mac: held[mac][name] for mac in macs}
        found[name] = {"source": source,
                       "files": {f["path"]: {k: v for k, v in f.items() if k != "path"} for f in manifest["files"]},
                       "macs": {mac: VERIFIED if row["verified"] else PRESENT if row["present"] else NOT_PRESENT
                                for mac, row in rows.items()}}
    found.update({name: {"source": None, "files": {}, "macs": {}} for name in expected["not_pinned"]})
    return found


def record_facts(macs: list[str], observed: dict, models: dict, hostfile_text: str | None,
                 declared_models: dict | None = None) -> dict:
    """{"macs": {...}, "cluster": {...}, "models": {...}} for the Macs that were read (inventory order);
    DECLARED_MODELS: the declared models' pinned files (models.status.Expected's JSON), none without."""
    thunderbolt = {h: observed[h]["mlx_fleet_thunderbolt"] for h in macs}
    macos = {h: observed[h]["mlx_fleet_macos"] for h in macs}
    links = fab.build_fabric(thunderbolt, macos, models=models).links if len(macs) > 1 else []
    assessment = rdma.assess(macos, thunderbolt, models=models) if macs else None
    hostfile = None
    if hostfile_text is not None:
        try:
            content = load_json(hostfile_text)
        except ValueError:
            content = None
        hostfile = {"sha256": hashlib.sha256(hostfile_text.encode()).hexdigest(), "content": content}
    content = (hostfile or {}).get("content")
    content = content if isinstance(content, dict) else {}
    return {
        "macs": {h: _mac(observed[h]) for h in macs},
        "cluster": {
            "backend": content.get("backend"),
            "hostfile": hostfile,
            "envs": content.get("envs", []),
            "cables": [{"cable": str(link), "speed_gbps": link.speed_gbps} for link in links],
            "rdma": {h: assessment.nodes[h].status for h in macs} if assessment else {},
        },
        "models": _models(macs, observed, declared_models),
    }

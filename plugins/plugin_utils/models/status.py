"""`mlx-fleet models status`: what every Mac should hold of the declared models (the pinned manifests), and each
Mac against them.

A Hub entry's manifest is the models' lock's (`mlx-fleet lock` pins it in `.mlx-models.lock.json` beside the
environment's lock, `{"format": 1, "models": [ModelManifest JSON]}`); an entry the lock lacks, or pins at another
repo or revision, is not pinned and cannot be judged. A path entry's manifest is hashed here from its controller folder (models.path_manifest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import model_files as on_mac
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import ModelManifest
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import ModelDeclaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.path_manifest import FolderChange, hash_folder


@dataclass
class Expected:
    """The manifests every Mac should hold, the Hub entries not pinned yet, the path entries' folder changes, and
    the path entries' controller folders (where their files come from, for the run record)."""

    manifests: list[ModelManifest] = field(default_factory=list)
    not_pinned: list[str] = field(default_factory=list)
    changed_folders: dict[str, FolderChange] = field(default_factory=dict)
    folders: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"manifests": [m.to_json() for m in self.manifests], "not_pinned": self.not_pinned,
                "changed_folders": {name: change.to_json() for name, change in self.changed_folders.items()},
                "folders": self.folders}


def _pinned_as_declared(manifest: ModelManifest | None, declared: ModelDeclaration) -> bool:
    return (manifest is not None and manifest.repo == declared.repo and manifest.revision == declared.revision
            and manifest.repo_type == declared.repo_type)


def expected(declared: tuple[ModelDeclaration, ...], locked: dict[str, ModelManifest], output_dir: Path, *,
             write: bool) -> Expected:
    """What every Mac should hold: a path entry hashed (its record rewritten when WRITE), a Hub entry from LOCKED
    (the models' lock, by name)."""
    found = Expected()
    for model in declared:
        if model.is_hub:
            manifest = locked.get(model.name)
            if _pinned_as_declared(manifest, model):
                found.manifests.append(manifest)
            else:
                found.not_pinned.append(model.name)
            continue
        manifest, change = hash_folder(model.name, model.path, output_dir, write=write)
        found.manifests.append(manifest)
        found.folders[model.name] = str(model.path)
        if change:
            found.changed_folders[model.name] = change
    return found


_BAD = (on_mac.SIZE_DIFFERS, on_mac.HASH_DIFFERS, on_mac.CHANGED_SINCE_SYNC, on_mac.NOT_A_FILE, on_mac.UNREADABLE,
        on_mac.NOT_LINKED, on_mac.LINK_OUTSIDE, on_mac.LINK_BROKEN)
# The kinds of finding of a model on a Mac (base.findings.KINDS), the same for models status and the audit.
MODEL_MISSING, MODEL_FILE_DIFFERS = "model-missing", "model-file-differs"
# What a file that is there but not as pinned is found to be, by its state on the Mac (module_utils.model_files).
STATE_FOUND = {on_mac.SIZE_DIFFERS: "another size", on_mac.HASH_DIFFERS: "other bytes",
               on_mac.CHANGED_SINCE_SYNC: "modified after the sync wrote it",
               on_mac.NOT_A_FILE: "not a file", on_mac.UNREADABLE: "unreadable",
               on_mac.NOT_LINKED: "not a link to its blob", on_mac.LINK_OUTSIDE: "a link that leads elsewhere",
               on_mac.LINK_BROKEN: "a link to a missing blob"}
FIX_SYNC = "{models}"  # filled with the models sync's command by base.fixes.fill


def model_fact(model: str, path: str = "") -> str:
    """The fact a model's finding is about: the model, or one of its files ("model tiny: config.json")."""
    return f"model {model}: {path}" if path else f"model {model}"


def _pinned(manifest: dict, path: str) -> str:
    """How a file is pinned, for a finding's expected: its size and hash."""
    (pinned,) = [f for f in manifest["files"] if f["path"] == path]
    digest = f"sha256 {pinned['sha256'][:12]}" if pinned.get("sha256") else f"git blob {pinned['git_sha1'][:12]}"
    return f"{pinned['size']} bytes, {digest}"


def row_findings(row: dict, manifest: dict, fix: str = FIX_SYNC) -> list[Finding]:
    """What a Mac's row says is wrong, as findings: the model absent (every file missing), each file missing or
    differing (the Mac and the file named), a Hub entry's ref that is missing or names another commit. FIX: the
    command that copies them (FIX_SYNC until base.fixes.fill fills it)."""
    mac, name = (row["mac"],), row["model"]
    if row["present"]:
        return []
    if len(row["missing"]) == len(manifest["files"]) and manifest["files"]:
        return [Finding(MODEL_MISSING, mac, "absent", f"{len(manifest['files'])} files as pinned", fix,
                        fact=model_fact(name))]
    found = [Finding(MODEL_MISSING, mac, "missing", _pinned(manifest, path), fix, fact=model_fact(name, path))
             for path in row["missing"]]
    found += [Finding(MODEL_FILE_DIFFERS, mac, STATE_FOUND[state], _pinned(manifest, path), fix,
                      fact=model_fact(name, path)) for path, state in row["differing"].items()]
    ref = model_fact(name, f"refs/{row['revision']}")
    if row.get("ref") == on_mac.REF_OTHER:
        found.append(Finding(MODEL_FILE_DIFFERS, mac, f"commit {row['ref_commit']}", f"commit {row['commit']}",
                             fix, fact=ref))
    elif row.get("ref") == on_mac.REF_MISSING:
        found.append(Finding(MODEL_MISSING, mac, "missing", f"commit {row['commit']}", fix, fact=ref))
    return found


def mac_rows(mac: str, manifests: list[dict], held: dict, fix: str = FIX_SYNC) -> list[dict]:
    """One row per model of what MAC holds (its model_files_facts) against the pinned MANIFESTS: present,
    verified (present and every byte hashed), the files missing, those that differ (with their state), the bytes
    still to copy (of missing and differing files), the free bytes, the revision, and what is wrong as findings
    (row_findings, in their JSON form)."""
    by_name = {m["name"]: m for m in held.get("models", [])}
    rows = []
    for manifest in manifests:
        model = by_name.get(manifest["name"], {"files": [], "present": False})
        states = {f["path"]: f["state"] for f in model["files"]}
        sizes = {f["path"]: f["size"] for f in manifest["files"]}
        missing = [p for p in sizes if states.get(p, on_mac.MISSING) == on_mac.MISSING]
        differing = {p: states[p] for p in sizes if states.get(p) in _BAD}
        row = {"mac": mac, "model": manifest["name"], "source": manifest["source"],
               "present": bool(model["present"]), "verified": bool(model["present"] and held.get("deep")),
               "missing": missing, "differing": differing,
               "bytes_missing": sum(sizes[p] for p in missing + list(differing)),
               "free_bytes": model.get("free_bytes"), "revision": manifest.get("revision"),
               "commit": manifest.get("commit")}
        if manifest["source"] == on_mac.HUB:
            row["ref"], row["ref_commit"] = model.get("ref", on_mac.REF_MISSING), model.get("ref_commit")
        row["findings"] = [f.to_dict() for f in row_findings(row, manifest, fix)]
        rows.append(row)
    return rows


def report(expected_json: dict, facts: dict[str, dict], unread: list[str], fix: str = FIX_SYNC) -> dict:
    """The status of every Mac read (FACTS: host -> mlx_fleet_model_files) against EXPECTED_JSON; UNREAD: the
    Macs that could not be read. `complete`: every declared model pinned and present on every Mac read. FIX: the
    findings' fix (the sync's command)."""
    rows = [row for mac, held in facts.items() for row in mac_rows(mac, expected_json["manifests"], held, fix)]
    lacking = sorted({row["mac"] for row in rows if not row["present"]})
    return {"rows": rows, "lacking": lacking, "unread": unread, "not_pinned": expected_json["not_pinned"],
            "changed_folders": expected_json["changed_folders"],
            "complete": not lacking and not expected_json["not_pinned"]}

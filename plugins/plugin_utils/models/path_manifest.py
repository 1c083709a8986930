"""A path entry's manifest: its controller folder hashed (sha256 of every file), and the record of it kept in the
cluster's output folder (`models/<name>.json`), so a change to the folder is named at the next status or sync.

The record also keeps each file's size and modification time as last hashed: a file whose size and time are
unchanged is not read again (as git's index does), so a status of an unchanged 1 GiB folder reads no byte of it.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.model_files import digest_file
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import (
    PATH, ModelFile, ModelFileError, ModelManifest)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json, load_json

RECORDS = "models"  # the folder of the records in the output folder
RECORD_FORMAT = 1


class PathEntryError(ValueError):
    """A path entry's folder that cannot be a model (not a folder, a link out of it, a file unreadable): one line."""


@dataclass(frozen=True)
class FolderChange:
    """What differs between the folder's last recorded manifest and now: file paths."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def to_json(self) -> dict:
        return {"added": list(self.added), "removed": list(self.removed), "changed": list(self.changed)}


def record_path(output_dir: Path, name: str) -> Path:
    return Path(output_dir) / RECORDS / f"{name}.json"


def _files_of(folder: Path) -> dict[str, os.stat_result]:
    """Every regular file under FOLDER by its relative path; a link leading out of the folder, or anything that
    is neither a file nor a folder, is refused."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            relative = path.relative_to(folder).as_posix()
            if path.is_symlink() and not path.resolve().is_relative_to(folder.resolve()):
                raise PathEntryError(f"{folder}: {relative} is a link out of the folder")
            info = path.stat()
            if stat.S_ISREG(info.st_mode):
                found[relative] = info
            elif not stat.S_ISDIR(info.st_mode):
                raise PathEntryError(f"{folder}: {relative} is neither a file nor a folder")
    return found


def _load_record(path: Path) -> dict:
    """The last record, {} when there is none or it is not one mlx-fleet wrote (it is then rehashed)."""
    try:
        record = load_json(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) and record.get("format") == RECORD_FORMAT else {}


def _recorded_manifest(record: dict, name: str) -> ModelManifest | None:
    try:
        return ModelManifest.from_json(record.get("manifest"), f"the record of {name}")
    except ModelFileError:
        return None


def hash_folder(name: str, folder: str | Path, output_dir: Path, *, write: bool) -> tuple[ModelManifest, FolderChange]:
    """The path entry's manifest now, and what changed since the last record; rewrites the record when WRITE and
    it differs. Files whose size and modification time match the record keep their recorded hash."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise PathEntryError(f"model {name}: path {folder} is not a folder")
    record_file = record_path(output_dir, name)
    record = _load_record(record_file)
    before = _recorded_manifest(record, name)
    known = {f.path: f for f in before.files} if before else {}
    stamps = record.get("stamps", {})
    files, new_stamps = [], {}
    for relative, info in sorted(_files_of(folder).items()):
        stamp = [info.st_size, info.st_mtime_ns]
        if relative in known and stamps.get(relative) == stamp:
            files.append(known[relative])
        else:
            try:
                digests = digest_file(folder / relative)
            except OSError as exc:
                raise PathEntryError(f"model {name}: cannot read {folder / relative}: {exc.strerror}") from None
            files.append(ModelFile(relative, digests.size, sha256=digests.sha256))
        new_stamps[relative] = stamp
    manifest = ModelManifest(name, PATH, tuple(files))
    change = _change(before, manifest)
    fresh = {"format": RECORD_FORMAT, "folder": str(folder), "manifest": manifest.to_json(), "stamps": new_stamps}
    if write and fresh != record:
        record_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_json(record_file, fresh)
    return manifest, change


def _change(before: ModelManifest | None, after: ModelManifest) -> FolderChange:
    """What differs; nothing when there was no record (the first look at a folder is no change)."""
    if before is None:
        return FolderChange((), (), ())
    old, new = {f.path: f for f in before.files}, {f.path: f for f in after.files}
    return FolderChange(tuple(sorted(new.keys() - old.keys())), tuple(sorted(old.keys() - new.keys())),
                        tuple(sorted(p for p in old.keys() & new.keys() if old[p] != new[p])))

"""A model's files as the cluster pins them: the one type the lock, the sync, the audit and the record share.

A Hub entry's files are pinned by `mlx-fleet lock` from the Hub's own metadata: an LFS file by its sha256,
a small (git) file by its git blob id. A path entry's files are hashed on the controller (sha256). On a
Mac, a Hub entry lives in a Hugging Face cache laid out as huggingface_hub writes it
(`models--ORG--NAME/blobs/<etag>`, `snapshots/<commit>/<path>` a relative link to the blob,
`refs/<revision>` holding the commit), a path entry in `<models_dir>/<name>/<path>`.
"""

from __future__ import annotations

from dataclasses import dataclass

# The hashing and the layout on a Mac are the module's (module_utils.model_files), so both sides agree.
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.model_files import (
    HUB, PATH, REPO_FOLDER_PREFIX, FileDigests, blob_name, digests_match, repo_folder, safe_relative_path)


class ModelFileError(ValueError):
    """A manifest that is not one mlx-fleet wrote (a bad path, hash or size): names the entry and the field."""


@dataclass(frozen=True)
class ModelFile:
    """One file of a model: its path inside the snapshot or folder, its size, and the hash it is checked by."""

    path: str
    size: int
    sha256: str | None = None
    git_sha1: str | None = None

    @property
    def blob(self) -> str:
        """The name huggingface_hub gives the file's blob: the LFS sha256, else the git blob id."""
        return blob_name(self.to_json())

    def matches(self, digests: FileDigests) -> bool:
        return digests_match(self.to_json(), digests)

    def to_json(self) -> dict:
        data = {"path": self.path, "size": self.size}
        if self.sha256:
            data["sha256"] = self.sha256
        if self.git_sha1:
            data["git_sha1"] = self.git_sha1
        return data

    @classmethod
    def from_json(cls, data, where: str) -> "ModelFile":
        if not isinstance(data, dict):
            raise ModelFileError(f"{where}: a file entry is not a mapping")
        path = data.get("path")
        size = data.get("size")
        sha256, git_sha1 = data.get("sha256"), data.get("git_sha1")
        if not isinstance(path, str) or not safe_relative_path(path):
            raise ModelFileError(f"{where}: file path {path!r} is not a relative path inside the model")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ModelFileError(f"{where}: {path}: size {size!r} is not a byte count")
        if sha256 is not None and not _is_hex(sha256, 64):
            raise ModelFileError(f"{where}: {path}: sha256 {sha256!r} is not 64 hex digits")
        if git_sha1 is not None and not _is_hex(git_sha1, 40):
            raise ModelFileError(f"{where}: {path}: git_sha1 {git_sha1!r} is not 40 hex digits")
        if not (sha256 or git_sha1):
            raise ModelFileError(f"{where}: {path}: no sha256 or git_sha1 to check it by")
        return cls(path, size, sha256, git_sha1)


@dataclass(frozen=True)
class ModelManifest:
    """What one declared model is on every Mac: where it comes from and its files."""

    name: str
    source: str  # HUB or PATH
    files: tuple[ModelFile, ...]
    repo: str | None = None
    repo_type: str = "model"
    revision: str | None = None
    commit: str | None = None

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def repo_folder(self) -> str:
        """The Hub entry's folder in a Hugging Face cache (huggingface_hub's repo_folder_name)."""
        return repo_folder(self.repo_type, self.repo)

    def to_json(self) -> dict:
        data = {"name": self.name, "source": self.source, "files": [f.to_json() for f in self.files]}
        for key in ("repo", "revision", "commit"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.source == HUB:
            data["repo_type"] = self.repo_type
        return data

    @classmethod
    def from_json(cls, data, where: str) -> "ModelManifest":
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ModelFileError(f"{where}: a model entry without a name")
        name = data["name"]
        here = f"{where}: model {name}"
        source = data.get("source")
        if source not in (HUB, PATH):
            raise ModelFileError(f"{here}: source {source!r} is neither {HUB!r} nor {PATH!r}")
        files = data.get("files")
        if not isinstance(files, list):
            raise ModelFileError(f"{here}: no list of files")
        parsed = tuple(ModelFile.from_json(f, here) for f in files)
        if len({f.path for f in parsed}) != len(parsed):
            raise ModelFileError(f"{here}: a file is listed twice")
        repo_type = data.get("repo_type", "model")
        if source == HUB:
            if not isinstance(data.get("repo"), str) or repo_type not in REPO_FOLDER_PREFIX:
                raise ModelFileError(f"{here}: a Hub entry needs a repo and a repo_type of {sorted(REPO_FOLDER_PREFIX)}")
            if not _is_hex(data.get("commit"), 40):
                raise ModelFileError(f"{here}: commit {data.get('commit')!r} is not 40 hex digits")
        return cls(name, source, parsed, data.get("repo"), repo_type, data.get("revision"), data.get("commit"))


def _is_hex(text, length: int) -> bool:
    return isinstance(text, str) and len(text) == length and all(c in "0123456789abcdef" for c in text)

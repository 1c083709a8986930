"""The Hub stand-in's repositories: a folder the user gives, read as the Hub stores repos (docs/macsim.md, "A Hub").

FOLDER/ORG/NAME holds the files of the model ORG/NAME at revision `main`, FOLDER/ORG/NAME@REV those at the branch or
tag REV, FOLDER/datasets/ORG/NAME[@REV] a dataset's. The folder is read at every request, so a file changed there is
a branch that moved. A revision's commit id is a hash of its files (the same files, the same commit); a commit id is
served while some revision holds that content (the stand-in keeps no history).

A file is stored in LFS, as the Hub stores it, when the repo's .gitattributes marks it `filter=lfs` (the Hub's
default .gitattributes when the repo has none) or it is over the Hub's 10 MB limit for plain git files; the Hub
then gives its sha256 and the git blob id of its LFS pointer, else the git blob id of the file itself.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

COMMIT = re.compile(r"[0-9a-f]{40}")
# Files over this size must be LFS on the Hub ("Your push was rejected because it contains files larger than 10 MiB").
LFS_OVER = 10 * 1024 * 1024
# The .gitattributes a new repo on the Hub starts with (the LFS part, the common weight formats of it).
DEFAULT_LFS_PATTERNS = ("*.7z", "*.arrow", "*.bin", "*.bz2", "*.ckpt", "*.ftz", "*.gguf", "*.gz", "*.h5", "*.joblib",
                        "*.mlmodel", "*.model", "*.msgpack", "*.npy", "*.npz", "*.onnx", "*.ot", "*.parquet", "*.pb",
                        "*.pickle", "*.pkl", "*.pt", "*.pth", "*.rar", "*.safetensors", "*.tar", "*.tflite", "*.tgz",
                        "*.wasm", "*.xz", "*.zip", "*.zst", "*tfevents*")
DATASETS = "datasets"


@dataclass(frozen=True)
class HubFile:
    path: str  # inside the repo, "/"-separated
    disk: Path
    size: int
    blob_id: str  # git blob id: of the file, or of its LFS pointer
    sha256: str | None  # an LFS file's
    pointer_size: int | None

    @property
    def etag(self) -> str:
        """What the Hub's resolve answers as the file's etag (huggingface_hub names the cached blob after it)."""
        return self.sha256 or self.blob_id


@dataclass(frozen=True)
class Snapshot:
    repo_type: str
    repo_id: str
    revision: str
    commit: str
    files: tuple[HubFile, ...]
    modified: float

    def file(self, path: str) -> HubFile | None:
        return next((f for f in self.files if f.path == path), None)

    def folders(self) -> list[str]:
        return sorted({"/".join(f.path.split("/")[:i]) for f in self.files for i in range(1, f.path.count("/") + 1)})

    def tree_id(self, folder: str) -> str:
        inside = [f"{f.path}\0{f.blob_id}" for f in self.files if f.path.startswith(folder + "/")]
        return _git_sha1(f"tree\0{folder}\0" + "\n".join(inside))


class RepoNotFound(LookupError):
    pass


class RevisionNotFound(LookupError):
    pass


class HubFolder:
    """The repos under a folder, read when asked; file hashes kept while a file's size and mtime stay."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        self._digests: dict[tuple, tuple] = {}
        self._lock = threading.Lock()

    def snapshot(self, repo_type: str, repo_id: str, revision: str) -> Snapshot:
        """The repo at REVISION (a branch or tag folder, or a commit one of them has)."""
        base = self.root / DATASETS / repo_id if repo_type == "dataset" else self.root / repo_id
        if not _plain_repo_id(repo_id) or (repo_type == "model" and repo_id.split("/")[0] == DATASETS):
            raise RepoNotFound(repo_id)
        revisions = {"main": base} if base.is_dir() else {}
        revisions.update({p.name.split("@", 1)[1]: p for p in base.parent.glob(f"{base.name}@*") if p.is_dir()})
        if not revisions:
            raise RepoNotFound(repo_id)
        if revision in revisions:
            return self._read(repo_type, repo_id, revision, revisions[revision])
        if COMMIT.fullmatch(revision):
            for name, folder in sorted(revisions.items()):
                snapshot = self._read(repo_type, repo_id, name, folder)
                if snapshot.commit == revision:
                    return snapshot
        raise RevisionNotFound(revision)

    def _read(self, repo_type: str, repo_id: str, revision: str, folder: Path) -> Snapshot:
        patterns = _lfs_patterns(folder / ".gitattributes")
        files, modified = [], 0.0
        for disk in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            path = disk.relative_to(folder).as_posix()
            if path.startswith(".git/"):
                continue
            stat = disk.stat()
            modified = max(modified, stat.st_mtime)
            files.append(self._file(path, disk, stat, patterns))
        listing = "".join(f"{f.path}\0{f.blob_id}\n" for f in files)
        return Snapshot(repo_type, repo_id, revision, _git_sha1(f"commit\0{repo_type}/{repo_id}\0{listing}"),
                        tuple(files), modified)

    def _file(self, path: str, disk: Path, stat: os.stat_result, patterns: list[str]) -> HubFile:
        key = (str(disk), stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with self._lock:
            known = self._digests.get(key)
        if known is None:
            sha256, git = hashlib.sha256(), hashlib.sha1(f"blob {stat.st_size}\0".encode(), usedforsecurity=False)
            with open(disk, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    sha256.update(chunk)
                    git.update(chunk)
            known = (sha256.hexdigest(), git.hexdigest())
            with self._lock:
                self._digests[key] = known
        sha256, blob_id = known
        name = path.rsplit("/", 1)[-1]
        if stat.st_size > LFS_OVER or any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(path, p) for p in patterns):
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {stat.st_size}\n".encode()
            return HubFile(path, disk, stat.st_size, _git_blob_id(pointer), sha256, len(pointer))
        return HubFile(path, disk, stat.st_size, blob_id, None, None)


def _lfs_patterns(gitattributes: Path) -> list[str]:
    try:
        lines = gitattributes.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return list(DEFAULT_LFS_PATTERNS)
    return [words[0] for words in (line.split() for line in lines) if len(words) > 1 and "filter=lfs" in words[1:]]


def _plain_repo_id(repo_id: str) -> bool:
    parts = repo_id.split("/")
    return 1 <= len(parts) <= 2 and all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", p) and ".." not in p
                                        and "@" not in p for p in parts)


def _git_blob_id(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data, usedforsecurity=False).hexdigest()


def _git_sha1(text: str) -> str:
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()

# -*- coding: utf-8 -*-
"""A declared model's files on a Mac: where they live, how their bytes are hashed, and what a Mac holds of them.

Stdlib only, Python 3.9 compatible: it runs on the Mac (the model_files_facts module), and the controller imports
the same hashing and layout (plugin_utils.base.model_files), so both sides name a file's place and hash alike.

A Hub entry lives in a Hugging Face cache laid out as huggingface_hub writes it (file_download.py,
_create_symlink / _cache_commit_hash_for_specific_revision): ``<cache>/models--ORG--NAME/blobs/<etag>``, the
etag being the LFS file's sha256 or a small file's git blob id; ``snapshots/<commit>/<path>`` a relative link
to its blob; ``refs/<revision>`` holding the commit. A path entry lives in ``<models_dir>/<name>/<path>``.
"""

from __future__ import absolute_import, division, print_function

import collections
import errno
import hashlib
import json
import os
import stat

__metaclass__ = type

HUB = "hub"
PATH = "path"
# huggingface_hub's repo folder prefixes (constants.REPO_TYPES_URL_PREFIXES / repo_folder_name).
REPO_FOLDER_PREFIX = {"model": "models", "dataset": "datasets", "space": "spaces"}
_CHUNK = 1 << 20

# A file's state on a Mac. OK: its size (and when hashed, its hash) is the pinned one.
OK = "ok"
MISSING = "missing"
SIZE_DIFFERS = "size_differs"
HASH_DIFFERS = "hash_differs"  # only when hashed
CHANGED_SINCE_SYNC = "changed_since_sync"  # not hashed: a file the sync verified, its size or date changed since
NOT_A_FILE = "not_a_file"  # a folder, a device, ... where the file should be
UNREADABLE = "unreadable"  # this user may not read it (a read without become)
NOT_LINKED = "not_linked"  # Hub snapshot entry that is no link to its blob
LINK_OUTSIDE = "link_outside"  # Hub snapshot link that leads out of the repo's own blobs, or to another blob
LINK_BROKEN = "link_broken"  # Hub snapshot link to its blob, which is missing
FILE_STATES = (OK, MISSING, SIZE_DIFFERS, HASH_DIFFERS, CHANGED_SINCE_SYNC, NOT_A_FILE, UNREADABLE, NOT_LINKED,
               LINK_OUTSIDE, LINK_BROKEN)
# The refs file of a Hub entry: naming the pinned commit, missing, or naming another commit.
REF_OK, REF_MISSING, REF_OTHER = "ok", "missing", "other"
# What the sync wrote of a model, the only files `models prune` removes: a JSON object, each path relative to the
# model's root -> the [size, modification time in ns] of the file as the sync verified it (hashed as it arrived), or
# null for what it wrote unhashed (a Hub snapshot link, a ref). As git's index: a file whose size and date are still
# those needs no re-hash to be known verified (read_models' verify). Kept in a Hub entry's repo folder, beside blobs/,
# snapshots/ and refs/ (as huggingface_hub keeps .no_exist); for a path entry in models_dir/.mlx-fleet-written/NAME,
# outside its folder, which holds the controller's files only.
WRITTEN = ".mlx-fleet-written"

FileDigests = collections.namedtuple("FileDigests", "size sha256 git_sha1")


class Digester:
    """The sha256 of a file of SIZE bytes, fed its bytes in order (a copy hashes while it writes), and its git blob id
    with GIT (a file pinned by that id alone: pinned_by_git). Not both for every file: a file pinned by its sha256
    is judged by that alone (digests_match), and a second hash of every byte cost the 4-Mac copy a sixth of its time."""

    def __init__(self, size, git=False):
        self.size = size
        self.sha256 = hashlib.sha256()
        self.git = hashlib.sha1("blob {0}\0".format(size).encode(), usedforsecurity=False) if git else None

    def update(self, chunk):
        self.sha256.update(chunk)
        if self.git is not None:
            self.git.update(chunk)

    def feed(self, handle, length):
        """Hash LENGTH bytes read from HANDLE; the bytes read (fewer only at its end)."""
        read = 0
        while read < length:
            chunk = handle.read(min(_CHUNK, length - read))
            if not chunk:
                break
            self.update(chunk)
            read += len(chunk)
        return read

    def digests(self):
        return FileDigests(self.size, self.sha256.hexdigest(), self.git.hexdigest() if self.git is not None else None)


def pinned_by_git(pinned):
    """Whether a pinned file (a ModelFile's JSON) is known by its git blob id alone (a small file of a Hub entry)."""
    return not pinned.get("sha256")


def digest_file(path, git=False):
    """Size, sha256 and, with GIT, git blob id of a file, read once."""
    with open(path, "rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(0)
        digester = Digester(size, git)
        digester.feed(handle, size)
    return digester.digests()


def digests_match(pinned, digests):
    """Whether DIGESTS are the pinned file's (a ModelFile's JSON): its size and its sha256, else its git blob id."""
    if digests.size != pinned["size"]:
        return False
    if pinned.get("sha256"):
        return digests.sha256 == pinned["sha256"]
    return digests.git_sha1 == pinned.get("git_sha1")


def blob_name(pinned):
    """The name huggingface_hub gives a file's blob: the LFS sha256, else the git blob id."""
    return pinned.get("sha256") or pinned.get("git_sha1") or ""


def repo_folder(repo_type, repo):
    """A Hub entry's folder in a Hugging Face cache (huggingface_hub's repo_folder_name)."""
    return "--".join([REPO_FOLDER_PREFIX[repo_type]] + repo.split("/"))


def model_root(manifest, hf_cache, models_dir):
    """Where a model (a ModelManifest's JSON) lives on a Mac: its repo folder in the cache, or its own folder."""
    if manifest["source"] == HUB:
        return os.path.join(hf_cache, repo_folder(manifest.get("repo_type", "model"), manifest["repo"]))
    return os.path.join(models_dir, manifest["name"])


def file_path(manifest, root, pinned):
    """Where a pinned file is read: its snapshot entry (Hub) or its place in the model's folder (path)."""
    if manifest["source"] == HUB:
        return os.path.join(root, "snapshots", manifest["commit"], pinned["path"])
    return os.path.join(root, pinned["path"])


def blob_path(root, pinned):
    return os.path.join(root, "blobs", blob_name(pinned))


def ref_path(root, revision):
    return os.path.join(root, "refs", revision)


def written_path(manifest, hf_cache, models_dir):
    """Where the record of what the sync wrote of a model (a ModelManifest's JSON) is kept on a Mac."""
    if manifest["source"] == HUB:
        return os.path.join(model_root(manifest, hf_cache, models_dir), WRITTEN)
    return os.path.join(models_dir, WRITTEN, manifest["name"])


def read_record(path):
    """A record of what the sync wrote: relative path inside the model -> (size, modification time in ns) as the
    sync verified the file, or None (written unhashed; or listed by an earlier mlx-fleet's record, a JSON list of
    paths). A path outside the model, or a record that is neither, counts as nothing written."""
    try:
        with open(path) as handle:
            listed = json.load(handle)
    except (IOError, OSError, ValueError):
        return {}
    if isinstance(listed, list):
        listed = dict.fromkeys(p for p in listed if isinstance(p, str))
    if not isinstance(listed, dict):
        return {}
    return dict((p, _stamp_of(value)) for p, value in listed.items() if safe_relative_path(p))


def _stamp_of(value):
    """(size, modification time in ns) from a record's [size, mtime_ns], else None."""
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return None


def stamp(path):
    """(size, modification time in ns) of the file at PATH, as a record keeps it."""
    info = os.stat(path)
    return info.st_size, info.st_mtime_ns


def read_written(path):
    """The paths a record of what the sync wrote lists."""
    return sorted(read_record(path))


def safe_relative_path(path):
    """A path that stays inside the model's folder: relative, no "..", no empty or dot parts."""
    if not path or path.startswith("/") or "\\" in path or "\0" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def write_written(path, paths):
    """Keep of the record at PATH only PATHS, with the stamps it holds for them."""
    kept = read_record(path)
    write_record(path, dict((p, kept.get(p)) for p in paths))


def write_record(path, record):
    """Replace the record at PATH by RECORD (path -> stamp or None; empty: the record goes), under a temporary name
    then renamed."""
    if not record:
        if os.path.lexists(path):
            os.remove(path)
        return
    if not os.path.isdir(os.path.dirname(path)):
        os.makedirs(os.path.dirname(path))
    with open(path + ".part", "w") as handle:
        json.dump(dict((p, list(s) if s else None) for p, s in record.items()), handle, indent=0, sort_keys=True)
    os.rename(path + ".part", path)


def free_bytes(path):
    """Bytes free to this user on the volume that holds PATH, or would hold it: its nearest existing folder.

    os.statvfs: on macOS's Python 3.9 its block counts are 32-bit (CPython gh-87804, fixed in 3.12), which APFS
    keeps exact by its 4 KiB fragments up to 16 TiB free."""
    folder = path
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    found = os.statvfs(folder)
    return found.f_bavail * found.f_frsize


def _state_of(path, pinned, deep, verify, verified):
    """(state, size on disk or None, whether its bytes were hashed) of the regular file PATH against the pinned
    file's JSON. VERIFIED: (size, modification time in ns) of PATH when the sync verified it, else None. Hashed
    with DEEP; with VERIFY unless it is still as the sync verified it; otherwise sizes and dates only."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return (MISSING if exc.errno in (errno.ENOENT, errno.ENOTDIR) else UNREADABLE), None, False
    if not stat.S_ISREG(info.st_mode):
        return NOT_A_FILE, None, False
    if info.st_size != pinned["size"]:
        return SIZE_DIFFERS, info.st_size, False
    unchanged = verified == (info.st_size, info.st_mtime_ns)
    if not (deep or (verify and not unchanged)):
        if verified is not None and not unchanged:
            return CHANGED_SINCE_SYNC, info.st_size, False
        return (OK if os.access(path, os.R_OK) else UNREADABLE), info.st_size, False
    try:
        digests = digest_file(path, pinned_by_git(pinned))
    except (IOError, OSError):
        return UNREADABLE, info.st_size, False
    return (OK if digests_match(pinned, digests) else HASH_DIFFERS), info.st_size, True


def _snapshot_link_state(entry, root, pinned):
    """None when the snapshot ENTRY links to the pinned file's own blob; else the entry's state."""
    try:
        info = os.lstat(entry)
    except OSError as exc:
        return MISSING if exc.errno in (errno.ENOENT, errno.ENOTDIR) else UNREADABLE
    if not stat.S_ISLNK(info.st_mode):
        return NOT_LINKED if stat.S_ISREG(info.st_mode) else NOT_A_FILE
    target = os.path.normpath(os.path.join(os.path.dirname(entry), os.readlink(entry)))
    if target != os.path.normpath(blob_path(root, pinned)):
        return LINK_OUTSIDE
    return LINK_BROKEN if not os.path.lexists(target) else None


def read_file(manifest, root, pinned, deep, verify=False, record=None):
    """What the Mac holds of one pinned file: path, state, size (None when there is no file to measure), hashed
    (whether its bytes were read). RECORD: the sync's record of the model (read_record)."""
    path = file_path(manifest, root, pinned)
    if manifest["source"] == HUB:
        linked = _snapshot_link_state(path, root, pinned)
        if linked is not None:
            return {"path": pinned["path"], "state": linked, "size": None, "hashed": False}
        path = blob_path(root, pinned)
    verified = (record or {}).get(os.path.relpath(path, root))
    state, size, hashed = _state_of(path, pinned, deep, verify, verified)
    return {"path": pinned["path"], "state": state, "size": size, "hashed": hashed}


def read_ref(root, revision, commit):
    """(state, the commit the ref names or None) of a Hub entry's refs/<revision>. A revision that is the commit
    itself has no ref file: huggingface_hub writes none for it."""
    if revision is None or revision == commit:
        return REF_OK, commit
    try:
        with open(ref_path(root, revision)) as handle:
            named = handle.read().strip()
    except (IOError, OSError):
        return REF_MISSING, None
    return (REF_OK if named == commit else REF_OTHER), named


def read_model(manifest, hf_cache, models_dir, deep, verify=False):
    """What the Mac holds of one model: its root, each file, the Hub ref, whether it is present (every file ok, and
    for a Hub entry its ref naming the pinned commit) and the bytes hashed. DEEP: every file hashed. VERIFY: every
    file hashed but those the sync verified (its record, WRITTEN) whose size and modification time are still those
    it recorded. Neither: sizes and dates, such a file with another date being CHANGED_SINCE_SYNC."""
    root = model_root(manifest, hf_cache, models_dir)
    record = None if deep else read_record(written_path(manifest, hf_cache, models_dir))
    files = [read_file(manifest, root, pinned, deep, verify, record) for pinned in manifest["files"]]
    found = {"name": manifest["name"], "root": root, "files": files,
             "hashed_bytes": sum(f["size"] for f in files if f["hashed"])}
    if manifest["source"] == HUB:
        found["ref"], found["ref_commit"] = read_ref(root, manifest.get("revision"), manifest["commit"])
    found["present"] = all(f["state"] == OK for f in files) and found.get("ref", REF_OK) == REF_OK
    return found


def read_models(manifests, hf_cache, models_dir, deep, verify=False):
    """Every model of MANIFESTS as the Mac holds it (read_model), with the free bytes of its volume (the fact
    mlx_fleet_model_files: model_files_facts, and macos_facts' models option in a converge)."""
    found = []
    for manifest in manifests:
        model = read_model(manifest, hf_cache, models_dir, deep, verify)
        model["free_bytes"] = free_bytes(model["root"])
        found.append(model)
    return {"deep": deep, "models": found,
            "hashed_bytes": sum(m["hashed_bytes"] for m in found)}

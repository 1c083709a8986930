# -*- coding: utf-8 -*-
"""Node-side helpers of the mlx_env modules: the probe a node's Python runs, the store's
layout, the checks on the two paths, and the markers that say what the toolkit made.

Stdlib only, Python 3.9 compatible: it runs on the Mac's /usr/bin/python3. PROBE is run by
*another* interpreter (the environment's target Python or the venv's), so it is a
self-contained script passed with ``-c``; it prints one JSON object.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import hashlib
import json
import os
import pwd
import stat

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.model_files import stamp

PROBE = r'''
import json, os, platform, re, struct, sys, sysconfig
out = {
    "executable": sys.executable,
    "implementation": sys.implementation.name,
    "version": list(sys.version_info[:3]),
    "machine": platform.machine(),
    "sys_platform": sys.platform,
    "mac_ver": platform.mac_ver()[0],
    "glibc": "",
    "soabi": sysconfig.get_config_var("SOABI") or "",
    "gil_disabled": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    "pointer_bits": struct.calcsize("P") * 8,
    "prefix": os.path.realpath(sys.prefix),
    "base_prefix": os.path.realpath(getattr(sys, "base_prefix", sys.prefix)),
}
try:
    out["glibc"] = (os.confstr("CS_GNU_LIBC_VERSION") or "").replace("glibc ", "")
except (AttributeError, ValueError, OSError):
    pass
iver = sys.implementation.version
iv = "%d.%d.%d" % (iver.major, iver.minor, iver.micro)
if iver.releaselevel != "final":
    iv += iver.releaselevel[0] + str(iver.serial)
out["markers"] = {
    "implementation_name": sys.implementation.name,
    "implementation_version": iv,
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
if "installed" in sys.argv[1:]:
    from importlib import metadata
    dists = {}
    for d in metadata.distributions():
        name = (d.metadata["Name"] or "").strip()
        if name:
            dists[re.sub(r"[-_.]+", "-", name).lower()] = d.version
    out["installed"] = dists
if "verify" in sys.argv[1:] or "digests" in sys.argv[1:]:
    # Every installed file against its distribution's RECORD line (PEP 376/627 hashes); "digests": only
    # files_sha256, no file read (the run record's, before a launch). files_sha256
    # digests the RECORD lines of what the distribution installed, leaving out the files an installer
    # writes about the install itself (its name, when, from where), so the same wheel installed on two
    # Macs digests the same.
    import base64, csv, hashlib, io
    from importlib import metadata
    LISTED = 20
    INSTALL_NOTES = ("INSTALLER", "REQUESTED", "RECORD", "direct_url.json", "uv_cache.json")
    records = {}
    for d in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", (d.metadata["Name"] or "").strip()).lower()
        rows = list(csv.reader(io.StringIO(d.read_text("RECORD") or "")))
        content = sorted(",".join(row) for row in rows if row and not (
            ".dist-info/" in row[0] and row[0].rsplit("/", 1)[-1] in INSTALL_NOTES))
        entry = {"files_sha256": hashlib.sha256("\n".join(content).encode("utf-8")).hexdigest() if rows else None,
                 "checked": 0, "modified": [], "missing": [], "modified_count": 0, "missing_count": 0}
        base = str(d.locate_file(""))
        for row in rows if "verify" in sys.argv[1:] else []:
            if len(row) < 2 or "=" not in row[1]:
                continue
            algorithm, want = row[1].split("=", 1)
            try:
                digest = hashlib.new(algorithm)
                with open(os.path.join(base, row[0]), "rb") as handle:
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
            except ValueError:
                continue
            except (IOError, OSError):
                kind = "missing"
            else:
                entry["checked"] += 1
                got = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
                if got == want:
                    continue
                kind = "modified"
            entry[kind + "_count"] += 1
            if len(entry[kind]) < LISTED:
                entry[kind].append(row[0])
        if name:
            records[name] = entry
    out["records"] = records
if "prove" in sys.argv[1:]:
    try:
        import mlx.core as mx
        a = mx.array([1.0, 2.0, 3.0])
        b = mx.matmul(a.reshape(1, 3), a.reshape(3, 1))
        mx.eval(b)
        from importlib import metadata
        def ver(n):
            try:
                return metadata.version(n)
            except metadata.PackageNotFoundError:
                return ""
        out["proof"] = {"ok": float(b.item()) == 14.0, "result": float(b.item()),
                        "device": str(mx.default_device()), "mlx": ver("mlx"), "mlx_lm": ver("mlx-lm"),
                        "python": platform.python_version()}
    except Exception as exc:
        out["proof"] = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
print(json.dumps(out))
'''


def run_probe(module, python, *what):
    """Run PROBE with PYTHON; (info dict or None, error text)."""
    rc, out, err = macos_commands.capture(module, [python, "-I", "-B", "-c", PROBE] + list(what))  # its JSON comes last
    if rc != 0:
        return None, (err or out).strip()
    try:
        return json.loads(out.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, "unreadable probe output: %s" % out[:200]


def sha256_file(path, blocksize=1 << 20):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(blocksize)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


# Files that say a folder was made by the toolkit: only such a folder (or an empty one) is
# ever cleared or has anything deleted in it.
VENV_MARKER = ".mlx-fleet-venv"
STORE_MARKER = ".mlx-fleet-store"

# Folders the environment must never be (nor its store): the system's and users' homes.
SYSTEM_DIRS = frozenset([
    "/", "/Applications", "/Library", "/System", "/Users", "/Users/Shared", "/Volumes", "/bin", "/cores", "/dev",
    "/etc", "/home", "/opt", "/opt/homebrew", "/private", "/private/etc", "/private/tmp", "/private/var", "/root",
    "/sbin", "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/libexec", "/usr/local", "/usr/local/bin",
    "/usr/local/lib", "/usr/sbin", "/usr/share", "/var", "/var/root", "/var/tmp"])


def next_path(venv):
    """Where the next environment is built and proved, beside the venv (same folder, so the switch is one
    rename there): a hidden sibling, .NAME.next."""
    parent, name = os.path.split(os.path.normpath(venv))
    return os.path.join(parent, ".%s.next" % name)


def claim(module, folder, marker, clear=False):
    """Mark FOLDER as made by mlx-fleet (it is ours already, or empty), emptying it first when
    CLEAR; a folder mlx-fleet did not make is never written to or cleared.

    Root does this in a folder another account owns (the venv's parent is the admin's): everything
    happens through FOLDER's descriptor and no link is followed, so a symlink planted meanwhile (at
    the marker, or for a subfolder, during a long removal) is refused or removed, never written through."""
    try:
        folder_fd = _open_folder(folder)
    except OSError as exc:
        folder_fd, state = None, "missing" if exc.errno == errno.ENOENT else "foreign"
    else:
        state = _state_at(folder_fd, marker)
    try:
        if state == "foreign":
            module.fail_json(msg="mlx_env: %s exists and was not made by mlx-fleet (it is not empty and has no %s); "
                                 "move it away or choose another folder" % (folder, marker))
        if state == "missing":
            module.fail_json(msg="mlx_env: %s does not exist; the role creates it before this task" % folder)
        if clear and state == "ours":
            _clear_at(folder_fd)
        if clear or state == "empty":
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder_fd)
            except OSError as exc:
                module.fail_json(msg="mlx_env: cannot mark %s as mlx-fleet's (%s: %s appeared while it was being "
                                     "cleared); nothing was written there: run the play again"
                                 % (folder, exc.strerror, marker))
            with os.fdopen(fd, "w") as handle:
                handle.write("Made by mlx-fleet (roles/mlx_env): it may clear this folder.\n")
    finally:
        if folder_fd is not None:
            os.close(folder_fd)


def _open_folder(path, dir_fd=None):
    """A descriptor of the folder PATH, never through a symlink (OSError: ENOTDIR or ELOOP when it is not a
    folder). O_NONBLOCK: a FIFO planted there fails at once rather than blocking the open."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)


def _state_at(folder_fd, marker):
    """empty, ours (holds MARKER, a plain file) or foreign, of the folder open at FOLDER_FD."""
    try:
        if stat.S_ISREG(os.stat(marker, dir_fd=folder_fd, follow_symlinks=False).st_mode):
            return "ours"
    except OSError:
        pass
    return "empty" if not os.listdir(folder_fd) else "foreign"


def _clear_at(folder_fd):
    """Remove everything in the folder open at FOLDER_FD, subfolders through their own descriptors: a link
    is unlinked, never followed."""
    for name in os.listdir(folder_fd):
        try:
            sub = _open_folder(name, dir_fd=folder_fd)
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            os.unlink(name, dir_fd=folder_fd)
            continue
        try:
            _clear_at(sub)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=folder_fd)


def store_paths(store):
    """The layout of the node's store (pushed artifacts)."""
    return {
        "wheels": os.path.join(store, "wheels"),
        "uv": os.path.join(store, "bin", "uv"),
        "pythons": os.path.join(store, "python"),
        "incoming": os.path.join(store, "incoming"),
        "marker": os.path.join(store, STORE_MARKER),
        "verified": os.path.join(store, VERIFIED),
    }


# The store's record of the files mlx_env checked against the lock before using them: each path relative to the
# store -> [size, modification time in ns, sha256]. As git's index (and the models' record, model_files.WRITTEN): a
# file whose size and date are still those is known by that sha256 unread, so a converge with nothing to do reads no
# byte of the store's wheels and uv (about 100 MB a Mac); any other file is hashed.
VERIFIED = "verified.json"


def read_verified(store):
    """The store's record (VERIFIED): relative path -> (size, mtime_ns, sha256); entries of another shape skipped."""
    try:
        with open(store_paths(store)["verified"]) as handle:
            listed = json.load(handle)
    except (IOError, OSError, ValueError, RecursionError):
        return {}
    if not isinstance(listed, dict):
        return {}
    return dict((path, tuple(entry)) for path, entry in listed.items()
                if isinstance(entry, list) and len(entry) == 3 and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in entry[:2])
                and isinstance(entry[2], str))


def known_sha256(store, path, verified):
    """The sha256 of PATH (a file of STORE): the record's (VERIFIED, read_verified) while the file's size and
    modification time are those it recorded, else hashed."""
    entry = verified.get(os.path.relpath(path, store))
    if entry is not None and entry[:2] == stamp(path):
        return entry[2]
    return sha256_file(path)


def verified_entry(path, sha256):
    """The record's entry for PATH, just checked to have SHA256."""
    return list(stamp(path)) + [sha256]


def managed_python(store, key):
    """The interpreter of an uv-managed build KEY extracted under the store (install_only layout)."""
    return os.path.join(store_paths(store)["pythons"], key, "python", "bin", "python3")


def build_marker(store, key):
    """Written once build KEY is completely extracted: its archive's sha256 and its files' digest."""
    return os.path.join(store_paths(store)["pythons"], key + ".json")


def fingerprint_path(venv):
    """The fingerprint file, inside the venv."""
    return os.path.join(venv, "mlx-fleet.fingerprint.json")


def path_problems(path, store):
    """One line per thing wrong with mlx_env_path and mlx_env_store (empty: both usable)."""
    homes = set(entry.pw_dir.rstrip("/") for entry in pwd.getpwall() if entry.pw_dir.startswith("/"))
    problems, paths = [], {}
    for name, value in (("mlx_env_path", path), ("mlx_env_store", store)):
        normal = os.path.normpath(value or "")
        if not value or not os.path.isabs(value) or ".." in value.split("/"):
            problems.append("%s %r must be an absolute path, like /opt/mlx-fleet/%s"
                            % (name, value, "venv" if name == "mlx_env_path" else "store"))
        elif normal in SYSTEM_DIRS or normal in homes or os.path.dirname(normal) in ("/Users", "/home"):
            problems.append("%s %r is a system or home folder; use a folder of its own, like /opt/mlx-fleet/%s"
                            % (name, value, "venv" if name == "mlx_env_path" else "store"))
        else:
            paths[name] = normal
    if len(paths) == 2:
        venv, store_dir = paths["mlx_env_path"], paths["mlx_env_store"]
        if venv == store_dir or venv.startswith(store_dir + "/") or store_dir.startswith(venv + "/"):
            problems.append("mlx_env_path %r and mlx_env_store %r overlap; give them separate folders, like "
                            "/opt/mlx-fleet/venv and /opt/mlx-fleet/store" % (path, store))
    return problems


def folder_state(path, marker):
    """missing, empty, ours (holds MARKER) or foreign (anything else, a symlink too: never cleared)."""
    try:
        folder_fd = _open_folder(path)
    except OSError as exc:
        return "missing" if exc.errno == errno.ENOENT else "foreign"
    try:
        return _state_at(folder_fd, marker)
    finally:
        os.close(folder_fd)


def tree_digest(root):
    """sha256 over every file, link and folder under ROOT (not __pycache__, which Python writes)."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = os.path.relpath(folder, root)
        digest.update(("d %s\n" % rel).encode("utf-8"))
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            full = os.path.join(folder, name)
            if os.path.islink(full):
                entry = "l %s %s" % (name, os.readlink(full))
            else:
                entry = "f %s %s %o" % (name, sha256_file(full), os.stat(full).st_mode & 0o111)
            digest.update(("%s\n" % entry).encode("utf-8"))
    return digest.hexdigest()


def build_state(store, key):
    """The extracted build KEY: {sha256 (of its archive), intact}, or None when absent or unfinished."""
    try:
        with open(build_marker(store, key)) as handle:
            marker = json.load(handle)
    except (IOError, OSError, ValueError, RecursionError):
        return None
    if not isinstance(marker, dict):
        return None  # not a marker mlx_env wrote: the build is extracted again
    root = os.path.join(store_paths(store)["pythons"], key)
    intact = os.path.isdir(root) and not os.path.islink(root) and tree_digest(root) == marker.get("tree")
    return {"sha256": marker.get("sha256"), "intact": intact,
            "prefix": os.path.realpath(os.path.join(root, "python"))}


def fingerprint(lock_hash, installed, python_version, machine):
    """The environment's fingerprint: the lock hash plus the installed set."""
    body = {
        "lock_hash": lock_hash,
        "python": python_version,
        "machine": machine,
        "installed": dict(sorted(installed.items())),
    }
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    body["digest"] = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return body


def pyvenv_home(path):
    """The base interpreter folder a venv was made from (its pyvenv.cfg `home`), or \"\"."""
    try:
        with open(os.path.join(path, "pyvenv.cfg")) as handle:
            for line in handle:
                key, dummy, value = line.partition("=")
                if key.strip() == "home":
                    return value.strip()
    except (IOError, OSError):
        pass
    return ""

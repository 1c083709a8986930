# -*- coding: utf-8 -*-
"""Files the modules write on a Mac: replaced atomically, never seen half-written.

Stdlib and AnsibleModule only, Python 3.9 compatible: it runs on the Mac.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes

__metaclass__ = type

# mlx.launch's hostfiles, by these names in one folder on every Mac (the mlx_fabric role's).
HOSTFILE = "hostfile.json"
RING_HOSTFILE = "hostfile-ring.json"
# Beside them while an unfinished macOS update holds the cluster (one line: why, and how to finish). mlx.launch
# reads only hostfile.json, which stays a valid list of hosts, so the hold is a sibling a person sees.
HELD = "hostfile.held"
# What a Mac reports of that folder (its digests), so the controller writes only the Macs that differ.
HOSTFILE_FOLDER = (HOSTFILE, RING_HOSTFILE, HELD)


def digests(module, folder, names):
    """{name: sha256 of the file in folder, None when there is none, "unreadable" when this user cannot read
    it (a read without become): the caller then writes it as it would a file that differs}."""
    paths = dict((name, os.path.join(folder, name)) for name in names)
    return dict((name, "unreadable" if os.path.exists(path) and not os.access(path, os.R_OK) else module.sha256(path))
                for name, path in paths.items())


def read_text(path):
    """The file's text, None when there is none."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "surrogateescape")
    except (IOError, OSError):
        return None


def json_text(data, final_newline=True):
    """JSON as mlx-fleet writes every file, on the Macs and the controller: indent 4 and keys in the order given
    (as MLX writes hostfiles, which alone leave out the final newline, to be MLX's bytes)."""
    return json.dumps(data, indent=4) + ("\n" if final_newline else "")


def write_atomically(module, path, content, mode=0o644):
    """Replace path with content: a temporary file beside it (O_EXCL, given its mode through its descriptor),
    synced to disk, renamed over it, then the folder synced, so a reader or a power cut sees the old file or
    the complete new one. Nothing is done by path after the rename: root (become) never follows a link
    planted there meanwhile. The folder must exist. (module: the caller's, as other writers take it.)"""
    folder = os.path.dirname(path)
    fd, temp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(to_bytes(content, errors="surrogate_or_strict"))
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(temp, path)
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)
    folder_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(folder_fd)
    finally:
        os.close(folder_fd)


def write_json(module, path, data, mode=0o644):
    """Replace path with data as JSON (json_text), atomically (write_atomically); its folder is created.
    A folder that cannot be created or written fails the module naming the path and the fix."""
    folder = os.path.dirname(path)
    try:
        if not os.path.isdir(folder):
            os.makedirs(folder, 0o755)
    except OSError as exc:
        module.fail_json(msg="{0}: cannot create its folder ({1}); writing needs root (become: true)".format(
            path, exc.strerror or exc))
    if not os.access(folder, os.W_OK):
        module.fail_json(msg="{0}: its folder is not writable by this user; writing needs root (become: true)"
                         .format(path))
    write_atomically(module, path, json_text(data), mode)

"""A simulated Mac's Python keeps the compiled code of Ansible's module payloads, per user.

Ansible runs every module from a fresh zip (AnsiballZ), and Python compiles each of the zip's modules again on each
run (a zip of sources has no __pycache__): about 0.1 CPU-s per module run, mostly ansible.module_utils.basic. A Mac
pays that on its own cores; the simulated Macs all pay it on the one machine's, beside the controller. Imported at
the start of the nodes' /usr/bin/python3 (a .pth file in their own /usr/local; the doubles run with -S and skip it),
this keeps each compiled module under the node's /tmp, keyed by its source's sha256, for the next run to load.

A module's code is the same either way: only where its tracebacks say it came from is set to this run's zip. The
folder belongs to the user and is theirs alone (0700, not a link); any other folder there is not used, so no user
can hand code to another (root's modules run from root's own).
"""

import os
import stat
import sys
import zipimport

_FOLDER = os.path.join(os.environ.get("TMPDIR") or "/tmp", "macsim-payload-code-%d" % os.getuid())
_PAYLOAD = "_payload.zip"  # the zip's name AnsiballZ gives it: ansible_MODULE_payload.zip
_compile_source = getattr(zipimport, "_compile_source", None)  # CPython's, 3.8 and later


def _owned_folder():
    """The user's cache folder, made if missing; None when it is not the user's own 0700 folder."""
    try:
        os.mkdir(_FOLDER, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    info = os.lstat(_FOLDER)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) != 0o700:
        return None
    return _FOLDER


def _placed(code, filename):
    """CODE and the code objects inside it, saying FILENAME is where they came from."""
    constants = tuple(_placed(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=constants)


def _cached_compile(pathname, source):
    if _PAYLOAD not in pathname:
        return _compile_source(pathname, source)
    import hashlib
    import marshal

    folder = _owned_folder()
    if folder is None:
        return _compile_source(pathname, source)
    path = os.path.join(folder, "%s.%s" % (hashlib.sha256(source).hexdigest(), sys.implementation.cache_tag))
    try:
        with open(path, "rb") as handle:
            return _placed(marshal.loads(handle.read()), pathname)
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = _compile_source(pathname, source)
    partial = "%s.%d" % (path, os.getpid())
    try:
        with open(partial, "wb") as handle:
            handle.write(marshal.dumps(code))
        os.rename(partial, path)
    except OSError:
        pass
    return code


if _compile_source is not None:
    zipimport._compile_source = _cached_compile

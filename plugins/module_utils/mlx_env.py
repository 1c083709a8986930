# -*- coding: utf-8 -*-
"""Node-side helpers of the mlx_env modules: the probe a node's Python runs, and paths.

Stdlib only, Python 3.9 compatible: it runs on the Mac's /usr/bin/python3. PROBE is run by
*another* interpreter (the environment's target Python or the venv's), so it is a
self-contained script passed with ``-c``; it prints one JSON object.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

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
    "prefix": sys.prefix,
    "base_prefix": getattr(sys, "base_prefix", sys.prefix),
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
if "verify" in sys.argv[1:]:
    # Every installed file against its distribution's RECORD line (PEP 376/627 hashes). files_sha256
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
        for row in rows:
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
    rc, out, err = module.run_command([python, "-I", "-c", PROBE] + list(what))
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


def store_paths(store):
    """The layout of the node's store (pushed artifacts)."""
    return {
        "wheels": os.path.join(store, "wheels"),
        "uv": os.path.join(store, "bin", "uv"),
        "pythons": os.path.join(store, "python"),
        "downloads": os.path.join(store, "downloads"),
    }


def managed_python(store, key):
    """The interpreter of an uv-managed build KEY extracted under the store (install_only layout)."""
    return os.path.join(store_paths(store)["pythons"], key, "python", "bin", "python3")


def fingerprint_path(venv):
    """The fingerprint file, next to the venv."""
    return venv.rstrip("/") + ".fingerprint.json"


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
                key, _, value = line.partition("=")
                if key.strip() == "home":
                    return value.strip()
    except (IOError, OSError):
        pass
    return ""

"""`mlx-fleet lock`: resolve a declaration into an environment's lock.

`uv pip compile --universal --generate-hashes --only-binary :all:` pins the packages; the index
(package_index.py) gives their wheels; uv's own download metadata gives the CPython builds.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from io import BytesIO
from pathlib import Path

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:
    pass  # env_declaration.PACKAGING_MISSING: every use starts from normalize_declaration, which says so

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import (
    PLATFORMS, EnvLockError, requirements_in)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_file import (
    LOCK_FORMAT, PYTHON_BUILD_BASE, lock_text, plain_name, write_lock)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.package_index import (
    INDEX_SCHEMES, PYPI_SIMPLE, download, fetch_json, index_files, project_files, wheel_platforms)


def parse_compiled(text: str) -> list[dict]:
    """Parse `uv pip compile --generate-hashes` output into [{name, version, marker, hashes}]."""
    joined = re.sub(r"\\\s*\n", " ", text)
    packages = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or line.startswith("-"):
            continue
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", line)
        spec = re.sub(r"--hash=\S+", "", line).strip()
        req = Requirement(spec)
        pins = [s for s in req.specifier if s.operator == "=="]
        if len(pins) != 1 or not hashes:
            raise EnvLockError(f"uv pip compile gave an unpinned or unhashed line: {line[:120]}")
        packages.append({
            "name": canonicalize_name(req.name),
            "version": pins[0].version,
            "marker": str(req.marker) if req.marker else "",
            "hashes": sorted(hashes),
        })
    return packages


def _marker_environments(platform: str, python_version: str) -> list[dict]:
    """Marker values a node of PLATFORM running CPython PYTHON_VERSION may have (any patch)."""
    p = PLATFORMS[platform]
    return [{"sys_platform": p["sys_platform"], "platform_system": p["platform_system"], "os_name": "posix",
             "platform_machine": p["machine"], "python_version": python_version, "python_full_version": full,
             "implementation_name": "cpython", "implementation_version": full,
             "platform_python_implementation": "CPython", "platform_release": "", "platform_version": "",
             "extra": ""}
            for full in (f"{python_version}.0", f"{python_version}.99")]


def platforms_needing(marker: str, platforms, python_version: str) -> list[str]:
    """The PLATFORMS on which a package with MARKER may be installed."""
    if not marker:
        return sorted(platforms)
    return [p for p in sorted(platforms)
            if any(Marker(marker).evaluate(env) for env in _marker_environments(p, python_version))]


def python_builds(decl: dict, index: str = PYPI_SIMPLE, fetch=fetch_json, download=download) -> dict:
    """The newest uv-managed CPython build of the declared Python for each declared platform.

    Their sha256 come from the download metadata in the locked uv's source release on the
    index (crates/*/download-metadata.json, the list uv itself checks its downloads
    against), whose own sha256 the index gives.
    """
    sdist_name = f"uv-{decl['uv_version']}.tar.gz"
    entry = next((f for f in project_files(f"{index}/uv/", fetch) if f["filename"] == sdist_name), None)
    if entry is None or not entry.get("hashes", {}).get("sha256"):
        raise EnvLockError(f"{index} has no {sdist_name} with a sha256 (uv's Python download metadata)")
    body = download(entry["url"])
    got = hashlib.sha256(body).hexdigest()
    if got != entry["hashes"]["sha256"]:
        raise EnvLockError(f"{sdist_name} from {entry['url']} has sha256 {got}, the index says {entry['hashes']['sha256']}")
    with tarfile.open(fileobj=BytesIO(body), mode="r:gz") as tar:
        member = next((m for m in tar.getmembers()
                       if m.isfile() and re.fullmatch(r"[^/]+/crates/[^/]+/download-metadata\.json", m.name)), None)
        if member is None:
            raise EnvLockError(f"{sdist_name} holds no crates/*/download-metadata.json")
        metadata = json.load(tar.extractfile(member))

    major, minor = (int(x) for x in decl["python_version"].split("."))
    builds = []
    for platform in decl["platforms"]:
        os_name, arch, libc = PLATFORMS[platform]["build"]
        candidates = [b for b in metadata.values()
                      if b["name"] == "cpython" and (b["os"], b["arch"]["family"], b["libc"]) == (os_name, arch, libc)
                      and not b["arch"].get("variant") and not b.get("variant") and not b.get("prerelease")
                      and (b["major"], b["minor"]) == (major, minor)
                      and re.search(r"-install_only(_stripped)?\.tar\.gz$", b["url"])]
        if not candidates:
            raise EnvLockError(f"uv {decl['uv_version']} knows no CPython {decl['python_version']} build for {platform}")
        best = max(candidates, key=lambda b: (b["patch"], b.get("build") or "", b["url"].endswith("_stripped.tar.gz")))
        if not best.get("sha256") or not best["url"].startswith(PYTHON_BUILD_BASE + "/"):
            raise EnvLockError(f"uv {decl['uv_version']}'s download metadata gives no sha256 or an unknown place for "
                               f"{best['url']}")
        version = f"{best['major']}.{best['minor']}.{best['patch']}"
        key_os = "macos" if os_name == "darwin" else os_name
        what = f"uv {decl['uv_version']}'s download metadata: the CPython build"
        builds.append({"platform": platform, "key": plain_name(f"cpython-{version}-{key_os}-{arch}-{libc}", f"{what} key"),
                       "version": version, "os": key_os, "arch": arch, "libc": libc, "url": best["url"],
                       "filename": plain_name(urllib.request.unquote(best["url"].rsplit("/", 1)[1]), f"{what} file name"),
                       "sha256": best["sha256"]})
    return {"source": {"filename": sdist_name, "url": entry["url"], "sha256": got}, "builds": builds}


def find_uv(explicit: str | None = None) -> str:
    """The uv to resolve with: EXPLICIT, else the one beside this Python (a venv's), else uv on PATH."""
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "uv"
    if beside.exists():
        return str(beside)
    found = shutil.which("uv")
    if not found:
        raise EnvLockError("uv not found on the controller: install it (pip install uv) or give its path")
    return found


def make_lock(decl: dict, uv: str, index: str = PYPI_SIMPLE, fetch=fetch_json, download=download) -> dict:
    """Resolve DECL into a lock (a dict ready for json.dump) from INDEX (https:// or file://)."""
    if not index.startswith(INDEX_SCHEMES):
        raise EnvLockError(f"--index {index}: give an https:// (or file://) index; over plain http anyone on the "
                           "way could answer with other wheels and hashes")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "requirements.in"
        src.write_text("\n".join(requirements_in(decl)) + "\n")
        cmd = [uv, "pip", "compile", "--universal", "--generate-hashes", "--only-binary", ":all:",
               "--python-version", decl["python_version"], "--no-header", "--no-annotate", "--quiet",
               "--index-url", index, str(src)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise EnvLockError(f"uv pip compile failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}")
    platforms = decl["platforms"]
    packages = []
    for pkg in parse_compiled(result.stdout):
        pkg["platforms"] = platforms_needing(pkg["marker"], platforms, decl["python_version"])
        if pkg["platforms"]:  # others only install elsewhere (Windows, emscripten...)
            packages.append(pkg)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda p: index_files(p["name"], p["version"], p["hashes"], p["platforms"],
                                                    decl["python_version"], index, fetch), packages))
    for pkg, files in zip(packages, found):
        _require_wheels(f"{pkg['name']}=={pkg['version']}", files, pkg.pop("platforms"), index)
        del pkg["hashes"]
        pkg["files"] = files
    uv_files = index_files("uv", decl["uv_version"], None, platforms, decl["python_version"], index, fetch)
    _require_wheels(f"uv=={decl['uv_version']}", uv_files, platforms, index)
    builds = python_builds(decl, index, fetch, download)
    uv_version = subprocess.run([uv, "--version"], capture_output=True, text=True, check=False).stdout.split()[1]
    return {
        "format": LOCK_FORMAT,
        "generated_by": f"mlx-fleet lock: uv {uv_version} pip compile --universal --generate-hashes --only-binary :all:",
        "declaration": decl,
        "requirements_in": requirements_in(decl),
        "packages": packages,
        "uv": {"version": decl["uv_version"], "files": uv_files},
        "python_builds_source": builds["source"],
        "python_builds": builds["builds"],
    }


def _require_wheels(what: str, files: list[dict], platforms, index: str) -> None:
    covered = set().union(*(wheel_platforms(f["filename"]) for f in files))
    missing = [p for p in platforms if p not in covered]
    if missing:
        raise EnvLockError(f"{what} has no wheel for {', '.join(missing)} on {index} with a hash uv resolved")


def update_lock(decl: dict, lock_file: str, uv: str, *, index: str = PYPI_SIMPLE, write: bool = True,
                resolve=make_lock) -> dict:
    """Resolve DECL (normalized) and write LOCK_FILE when its text differs (and WRITE). What it found: changed,
    sha256 of the new text, counts for the summary line."""
    lock = resolve(decl, uv, index=index)
    text = lock_text(lock)
    try:
        changed = Path(lock_file).read_text() != text
    except (OSError, UnicodeDecodeError):
        changed = True
    if changed and write:
        write_lock(lock, lock_file)
    return {"changed": changed, "lock_file": str(lock_file), "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "packages": len(lock["packages"]), "wheels": sum(len(p["files"]) for p in lock["packages"]),
            "builds": [b["version"] for b in lock["python_builds"]]}


def summary_line(decl: dict, found: dict) -> str:
    """One line of what the lock holds and where it is."""
    return (f"{found['packages']} packages, {found['wheels']} wheels, uv {decl['uv_version']}, Python "
            f"{decl['python_version']} ({', '.join(found['builds'])} managed), {', '.join(decl['platforms'])} -> "
            f"{found['lock_file']} (sha256 {found['sha256'][:16]})")

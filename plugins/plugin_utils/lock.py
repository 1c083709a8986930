"""The pinned MLX environment: its declaration, its lock file, and `mlx-fleet lock`.

The inventory declares one environment for the whole cluster (role variables
`mlx_env_python_version`, `mlx_env_uv_version`, `mlx_env_mlx_version`,
`mlx_env_mlx_lm_version`, `mlx_env_extra_packages`, and `mlx_env_platforms`, the node
platforms it must cover: `macos-arm64` by default). `mlx-fleet lock` resolves it with
`uv pip compile --universal --generate-hashes --only-binary :all:` into a JSON lock that
records, for every pinned package, the wheels for those platforms with their URL and
sha256, the uv wheels, and the uv-managed CPython build of each platform with the sha256
uv itself checks (the download metadata in the locked uv's source release). The lock also
records the declaration it was made from, so a playbook run stops when the inventory says
something else. The lock lives beside the inventory (`mlx_env_lock_file`).

How the controller turns the lock into per-node downloads lives in `mlx_fleet.envplan`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import tarfile
import tempfile
import urllib.request
from io import BytesIO
from pathlib import Path

from ansible.module_utils.urls import open_url

try:
    from packaging import tags as ptags
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version
except ImportError as exc:
    # ansible-core requires packaging, so a controller has it; a plugin still imports without it (as
    # ansible-core's own do) and says so when used: every use starts from normalize_declaration.
    PACKAGING_MISSING = f"the Python package packaging cannot be imported ({exc}); it comes with ansible-core: reinstall it"
else:
    PACKAGING_MISSING = None

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import atomic_write_text, load_json

LOCK_FORMAT = 1
PYPI_SIMPLE = "https://pypi.org/simple"
# Where uv's download metadata says the CPython builds are; mlx_env_python_mirror replaces
# this prefix (as UV_PYTHON_INSTALL_MIRROR does for uv).
PYTHON_BUILD_BASE = "https://github.com/astral-sh/python-build-standalone/releases/download"
# A file name the lock gives that becomes a path component (the controller's cache, a bundle member, a
# folder of the Macs' store): a plain name, never "..", a "/" or a leading dot.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
# Where a lock may be resolved from: TLS, or this machine's files (never plain http, which anyone on the
# path could answer: the hashes the lock records come from that answer).
INDEX_SCHEMES = ("https://", "file://")


def _glibc_wheel(arch: str) -> re.Pattern:
    return re.compile(rf"^(manylinux_\d+_\d+|manylinux1|manylinux2010|manylinux2014|linux)_{arch}$")


# The node platforms a lock can cover (mlx_env_platforms): the wheel platform tags each
# runs, the marker values it has, and its uv-managed CPython build (uv's os, arch, libc).
PLATFORMS = {
    "macos-arm64": {"wheel": re.compile(r"^macosx_\d+_\d+_(arm64|universal2)$"), "sys_platform": "darwin",
                    "platform_system": "Darwin", "machine": "arm64", "build": ("darwin", "aarch64", "none")},
    "linux-x86_64": {"wheel": _glibc_wheel("x86_64"), "sys_platform": "linux", "platform_system": "Linux",
                     "machine": "x86_64", "build": ("linux", "x86_64", "gnu")},
    "linux-aarch64": {"wheel": _glibc_wheel("aarch64"), "sys_platform": "linux", "platform_system": "Linux",
                      "machine": "aarch64", "build": ("linux", "aarch64", "gnu")},
}

DECLARATION_KEYS = ("python_version", "uv_version", "mlx_version", "mlx_lm_version", "extra_packages", "platforms")
VERSION_RE = re.compile(r"^\d+(\.\d+)*$")


class LockError(Exception):
    """A one-line, user-facing problem with the declaration or the lock."""


def normalize_declaration(raw: dict) -> dict:
    """The declaration in a canonical form (strings, extra packages sorted), or LockError."""
    if PACKAGING_MISSING:
        raise LockError(PACKAGING_MISSING)
    decl = {}
    for key in DECLARATION_KEYS:
        value = raw.get(key, raw.get(f"mlx_env_{key}"))
        if value is None:
            raise LockError(f"mlx_env_{key} is not set")
        if key == "extra_packages":
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                raise LockError(f"mlx_env_extra_packages must be a list of requirements, not {value!r}")
            extras = []
            for item in value:
                try:
                    Requirement(str(item))
                except Exception as exc:  # packaging raises InvalidRequirement
                    raise LockError(f"mlx_env_extra_packages: {item!r} is not a requirement ({exc})") from None
                extras.append(str(item).strip())
            decl[key] = sorted(extras)
        elif key == "platforms":
            names = [value] if isinstance(value, str) else list(value or [])
            unknown = [str(n) for n in names if n not in PLATFORMS]
            if unknown or not names:
                raise LockError(f"mlx_env_platforms must list some of {', '.join(PLATFORMS)}, not {value!r}")
            decl[key] = sorted(set(map(str, names)))
        else:
            value = str(value).strip()
            if not VERSION_RE.match(value):
                raise LockError(f"mlx_env_{key} must be a version like 1.2.3, not {value!r}")
            decl[key] = value
    if decl["python_version"].count(".") != 1:
        raise LockError(f"mlx_env_python_version must be MAJOR.MINOR (e.g. 3.12), not {decl['python_version']!r}")
    return decl


def requirements_in(decl: dict) -> list[str]:
    """What the declaration asks for, with the platform split MLX needs.

    On Linux MLX needs its `cpu` extra (mlx-cpu); on macOS `mlx` pulls mlx-metal itself.
    """
    systems = {PLATFORMS[p]["sys_platform"] for p in decl["platforms"]}
    mlx = {"darwin": f"mlx=={decl['mlx_version']} ; sys_platform == 'darwin'",
           "linux": f"mlx[cpu]=={decl['mlx_version']} ; sys_platform == 'linux'"}
    return [mlx[s] for s in sorted(systems)] + [f"mlx-lm=={decl['mlx_lm_version']}", *decl["extra_packages"]]


def check_declaration(lock: dict, raw: dict, lock_path: str = "the lock file") -> dict:
    """The normalized declaration if the lock was made from it; LockError otherwise."""
    decl = normalize_declaration(raw)
    locked = lock.get("declaration", {})
    diffs = [f"mlx_env_{k}={decl[k]!r} (lock: {locked.get(k)!r})" for k in DECLARATION_KEYS if locked.get(k) != decl[k]]
    if diffs:
        raise LockError(f"the inventory's environment does not match {lock_path}: {', '.join(diffs)}; run mlx-fleet lock")
    return decl


def load_lock(path: str | os.PathLike) -> tuple[dict, str]:
    """The lock and its sha256 (of the file's bytes: the lock hash in fingerprints)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise LockError(f"cannot read the lock file {path}: {exc.strerror}; run mlx-fleet lock") from None
    try:
        lock = load_json(data.decode("utf-8"))
    except ValueError as exc:
        raise LockError(f"{path} is not a mlx-fleet lock file ({exc}); run mlx-fleet lock") from None
    if not isinstance(lock, dict) or lock.get("format") != LOCK_FORMAT:
        raise LockError(f"{path} is not a mlx-fleet lock file of format {LOCK_FORMAT}; run mlx-fleet lock")
    check_names(lock, str(path))
    return lock, hashlib.sha256(data).hexdigest()


def plain_name(text, what: str) -> str:
    """text if it is a plain file name (_PLAIN_NAME), else LockError naming what it is."""
    if not isinstance(text, str) or not _PLAIN_NAME.fullmatch(text):
        raise LockError(f"{what} {text!r} is not a plain file name (it becomes a path on the controller and the "
                        "Macs); run mlx-fleet lock")
    return text


def check_names(lock: dict, where: str) -> None:
    """Every wheel and Python build file name, and every build key, in the lock is a plain_name."""
    def items(value) -> list:
        return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

    uv = lock.get("uv") if isinstance(lock.get("uv"), dict) else {}
    wheels = [f for pkg in items(lock.get("packages")) for f in items(pkg.get("files"))] + items(uv.get("files"))
    for wheel in wheels:
        plain_name(wheel.get("filename"), f"{where}: the wheel file name")
    for build in items(lock.get("python_builds")):
        plain_name(build.get("filename"), f"{where}: the Python build file name")
        plain_name(build.get("key"), f"{where}: the Python build key")


# ---------------------------------------------------------------- making a lock

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
            raise LockError(f"uv pip compile gave an unpinned or unhashed line: {line[:120]}")
        packages.append({
            "name": canonicalize_name(req.name),
            "version": pins[0].version,
            "marker": str(req.marker) if req.marker else "",
            "hashes": sorted(hashes),
        })
    return packages


def wheel_platforms(filename: str) -> set[str]:
    """The lock platforms a wheel runs on (all of them for a pure `any` wheel)."""
    if not filename.endswith(".whl"):
        return set()
    dummy, dummy, dummy, tags = parse_wheel_filename(filename)
    if any(t.platform == "any" for t in tags):
        return set(PLATFORMS)
    return {name for name, p in PLATFORMS.items() if any(p["wheel"].match(t.platform) for t in tags)}


@functools.lru_cache(maxsize=None)
def _python_tags(python_version: str, platform_tag: str) -> frozenset:
    version = tuple(int(x) for x in python_version.split("."))
    abi = f"cp{version[0]}{version[1]}"
    return frozenset([*ptags.cpython_tags(version, [abi], [platform_tag]),
                      *ptags.compatible_tags(version, abi, [platform_tag])])


def fits_python(filename: str, python_version: str) -> bool:
    """Whether a wheel installs into CPython PYTHON_VERSION (MAJOR.MINOR) on its platforms."""
    dummy, dummy, dummy, tags = parse_wheel_filename(filename)
    return any(t in _python_tags(python_version, t.platform) for t in tags)


def open_http(url: str, headers: dict, timeout: float):
    """A GET of URL (https://, http:// or file://) as plain urllib makes it: these headers only, the
    environment's proxies, certificates checked, redirects followed; no ~/.netrc credentials, and
    the bytes exactly as sent (no gzip decoding: the sha256 checked is of what the server gave)."""
    return open_url(url, headers=headers, timeout=timeout, use_netrc=False, decompress=False)


def _fetch_json(url: str, accept: str = "application/vnd.pypi.simple.v1+json") -> dict:
    with open_http(url, {"Accept": accept, "User-Agent": "mlx-fleet-lock"}, timeout=60) as resp:
        return json.load(resp)


def _download(url: str) -> bytes:
    with open_http(url, {"User-Agent": "mlx-fleet-lock"}, timeout=120) as resp:
        return resp.read()


def _same_version(filename_version, pinned: str) -> bool:
    try:
        return Version(str(filename_version)) == Version(pinned)
    except InvalidVersion:
        return False


def index_files(name: str, version: str, hashes: list[str] | None, platforms, python_version: str,
                index: str = PYPI_SIMPLE, fetch=_fetch_json) -> list[dict]:
    """The wheels of NAME==VERSION on the index (PEP 691 JSON) for CPython PYTHON_VERSION on
    one of PLATFORMS.

    When HASHES is given (from uv pip compile), a file whose sha256 is not one of them is
    left out: the lock holds only the bytes uv resolved.
    """
    data = fetch(f"{index}/{canonicalize_name(name)}/")
    files = []
    for f in data.get("files", []):
        fname = f["filename"]
        if not fname.endswith(".whl") or f.get("yanked"):
            continue
        try:
            dummy, fversion, dummy, dummy = parse_wheel_filename(fname)
        except ValueError:  # old, non-standard names: never a pinned wheel
            continue
        if (not _same_version(fversion, version) or not wheel_platforms(fname) & set(platforms)
                or not fits_python(fname, python_version)):
            continue
        sha = f.get("hashes", {}).get("sha256")
        if not sha or (hashes is not None and sha not in hashes):
            continue
        files.append({"filename": fname, "url": f["url"], "sha256": sha, "size": f.get("size")})
    return sorted(files, key=lambda x: x["filename"])


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


def python_builds(decl: dict, index: str = PYPI_SIMPLE, fetch=_fetch_json, download=_download) -> dict:
    """The newest uv-managed CPython build of the declared Python for each declared platform.

    Their sha256 come from the download metadata in the locked uv's source release on the
    index (crates/*/download-metadata.json, the list uv itself checks its downloads
    against), whose own sha256 the index gives.
    """
    sdist_name = f"uv-{decl['uv_version']}.tar.gz"
    listing = fetch(f"{index}/uv/")
    entry = next((f for f in listing.get("files", []) if f["filename"] == sdist_name), None)
    if entry is None or not entry.get("hashes", {}).get("sha256"):
        raise LockError(f"{index} has no {sdist_name} with a sha256 (uv's Python download metadata)")
    body = download(entry["url"])
    got = hashlib.sha256(body).hexdigest()
    if got != entry["hashes"]["sha256"]:
        raise LockError(f"{sdist_name} from {entry['url']} has sha256 {got}, the index says {entry['hashes']['sha256']}")
    with tarfile.open(fileobj=BytesIO(body), mode="r:gz") as tar:
        member = next((m for m in tar.getmembers()
                       if m.isfile() and re.fullmatch(r"[^/]+/crates/[^/]+/download-metadata\.json", m.name)), None)
        if member is None:
            raise LockError(f"{sdist_name} holds no crates/*/download-metadata.json")
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
            raise LockError(f"uv {decl['uv_version']} knows no CPython {decl['python_version']} build for {platform}")
        best = max(candidates, key=lambda b: (b["patch"], b.get("build") or "", b["url"].endswith("_stripped.tar.gz")))
        if not best.get("sha256") or not best["url"].startswith(PYTHON_BUILD_BASE + "/"):
            raise LockError(f"uv {decl['uv_version']}'s download metadata gives no sha256 or an unknown place for "
                            f"{best['url']}")
        version = f"{best['major']}.{best['minor']}.{best['patch']}"
        key_os = "macos" if os_name == "darwin" else os_name
        what = f"uv {decl['uv_version']}'s download metadata: the CPython build"
        builds.append({"platform": platform, "key": plain_name(f"cpython-{version}-{key_os}-{arch}-{libc}", f"{what} key"),
                       "version": version, "os": key_os, "arch": arch, "libc": libc, "url": best["url"],
                       "filename": plain_name(urllib.request.unquote(best["url"].rsplit("/", 1)[1]), f"{what} file name"),
                       "sha256": best["sha256"]})
    return {"source": {"filename": sdist_name, "url": entry["url"], "sha256": got}, "builds": builds}


def make_lock(decl: dict, uv: str, index: str = PYPI_SIMPLE, fetch=_fetch_json, download=_download) -> dict:
    """Resolve DECL into a lock (a dict ready for json.dump) from INDEX (https:// or file://)."""
    if not index.startswith(INDEX_SCHEMES):
        raise LockError(f"--index {index}: give an https:// (or file://) index; over plain http anyone on the "
                        "way could answer with other wheels and hashes")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "requirements.in"
        src.write_text("\n".join(requirements_in(decl)) + "\n")
        cmd = [uv, "pip", "compile", "--universal", "--generate-hashes", "--only-binary", ":all:",
               "--python-version", decl["python_version"], "--no-header", "--no-annotate", "--quiet",
               "--index-url", index, str(src)]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise LockError(f"uv pip compile failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}")
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
        raise LockError(f"{what} has no wheel for {', '.join(missing)} on {index} with a hash uv resolved")


def write_lock(lock: dict, path: str | os.PathLike) -> str:
    """Write the lock atomically (a reader, or a run reading it meanwhile, sees the old lock or the new
    one, never part of it); its sha256."""
    check_names(lock, "the new lock")
    text = json.dumps(lock, indent=1, sort_keys=False) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)
    return hashlib.sha256(text.encode()).hexdigest()


def inventory_environment(inventory: str, group: str = CLUSTER_GROUP) -> tuple[dict, str]:
    """The mlx_env_* variables the inventory gives GROUP (one environment per cluster), over
    the role defaults, and the lock file they name (mlx_env_lock_file, templated)."""
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.inventory_view import (
        InventoryView, InventoryViewError)

    try:
        view = InventoryView([inventory])
        hosts = view.hosts(group)
        if not hosts:
            raise LockError(f"the inventory {inventory} has no hosts in group {group}")
        per_host = {h: view.values(h, group=group) for h in hosts}
        first = hosts[0]
        raw = {}
        for key in (*(f"mlx_env_{k}" for k in DECLARATION_KEYS), "mlx_env_lock_file"):
            values = {h: get(key) for h, get in per_host.items()}
            odd = [h for h, v in values.items() if v != values[first]]
            if odd:
                raise LockError(f"{key} differs between {first} and {odd[0]}: the environment is one for the whole "
                                "cluster")
            raw[key] = values[first]
    except InventoryViewError as exc:
        raise LockError(str(exc)) from None
    return raw, str(raw.pop("mlx_env_lock_file"))


def declaration_from(raw: dict, overrides: dict) -> dict:
    """The declaration from mlx_env_* variables, with the command line's overrides."""
    raw = dict(raw, **{f"mlx_env_{k}": v for k, v in overrides.items() if v is not None})
    return normalize_declaration({k: raw.get(f"mlx_env_{k}") for k in DECLARATION_KEYS})

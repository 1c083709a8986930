"""The pinned MLX environment: its declaration, its lock file, and `mlx-fleet lock`.

The inventory declares one environment for the whole cluster (role variables
`mlx_env_python_version`, `mlx_env_uv_version`, `mlx_env_mlx_version`,
`mlx_env_mlx_lm_version`, `mlx_env_extra_packages`). `mlx-fleet lock` resolves it with
`uv pip compile --universal --generate-hashes --only-binary :all:` into a JSON lock that
records, for every pinned package, the wheels for the platforms in play (macOS arm64 and
Linux x86_64 / aarch64) with their URL and sha256, the uv wheels, and the uv-managed
Python builds for macOS arm64 and Linux. The lock also records the declaration it was made
from, so a playbook run stops when the inventory says something else.

How the controller turns the lock into per-node downloads lives in `plugin_utils.envplan`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.content import ROLES

LOCK_FORMAT = 1
ROLE_DEFAULTS = ROLES / "mlx_env" / "defaults" / "main.yml"
DEFAULT_LOCK = ROLES / "mlx_env" / "files" / "mlx-env.lock.json"
PYPI_SIMPLE = "https://pypi.org/simple"
# The Python versions a lock covers besides the declared one: the sim's nodes run
# Debian's /usr/bin/python3 (3.11) through mlx_env_python_interpreter.
DEFAULT_EXTRA_PYTHONS = ("3.11",)
# Wheel platforms kept in the lock: real Macs (arm64) and Linux (the sim is x86_64).
LOCK_PLATFORM_RE = re.compile(r"^(any|macosx_\d+_\d+_(arm64|universal2)|(many|musl)?linux(_\d+_\d+|1|2010|2014)?_(x86_64|aarch64))$")
# uv-managed Python builds kept in the lock: (uv os, uv arch, uv libc).
PYTHON_BUILD_PLATFORMS = (("macos", "aarch64", "none"), ("linux", "x86_64", "gnu"), ("linux", "aarch64", "gnu"))

DECLARATION_KEYS = ("python_version", "uv_version", "mlx_version", "mlx_lm_version", "extra_packages")
VERSION_RE = re.compile(r"^\d+(\.\d+)*$")


class LockError(Exception):
    """A one-line, user-facing problem with the declaration or the lock."""


def normalize_declaration(raw: dict) -> dict:
    """The declaration in a canonical form (strings, extra packages sorted), or LockError."""
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
    return [
        f"mlx=={decl['mlx_version']} ; sys_platform == 'darwin'",
        f"mlx[cpu]=={decl['mlx_version']} ; sys_platform == 'linux'",
        f"mlx-lm=={decl['mlx_lm_version']}",
        *decl["extra_packages"],
    ]


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
        lock = json.loads(data)
    except ValueError as exc:
        raise LockError(f"{path} is not a mlx-fleet lock file ({exc}); run mlx-fleet lock") from None
    if not isinstance(lock, dict) or lock.get("format") != LOCK_FORMAT:
        raise LockError(f"{path} is not a mlx-fleet lock file of format {LOCK_FORMAT}; run mlx-fleet lock")
    return lock, hashlib.sha256(data).hexdigest()


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


def keep_wheel(filename: str) -> bool:
    """Whether a wheel runs on a platform the lock covers."""
    if not filename.endswith(".whl"):
        return False
    _, _, _, tags = parse_wheel_filename(filename)
    return any(LOCK_PLATFORM_RE.match(t.platform) for t in tags)


def _fetch_json(url: str, accept: str = "application/vnd.pypi.simple.v1+json") -> dict:
    req = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "mlx-fleet-lock"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def index_files(name: str, version: str, hashes: list[str] | None, index: str = PYPI_SIMPLE,
                fetch=_fetch_json) -> list[dict]:
    """The wheels of NAME==VERSION on the index (PEP 691 JSON) for the platforms the lock covers.

    When HASHES is given (from uv pip compile), every kept file must be one of them.
    """
    data = fetch(f"{index}/{canonicalize_name(name)}/")
    files = []
    for f in data.get("files", []):
        fname = f["filename"]
        if not fname.endswith(".whl") or f.get("yanked"):
            continue
        try:
            _, fversion, _, _ = parse_wheel_filename(fname)
        except ValueError:  # old, non-standard names: never a pinned wheel
            continue
        if str(fversion) != version or not keep_wheel(fname):
            continue
        sha = f.get("hashes", {}).get("sha256")
        if not sha or (hashes is not None and sha not in hashes):
            continue
        files.append({"filename": fname, "url": f["url"], "sha256": sha, "size": f.get("size")})
    if not files:
        raise LockError(f"{name}=={version} has no wheel for macOS arm64 or Linux on {index}")
    return sorted(files, key=lambda x: x["filename"])


def python_builds(uv: str, python_version: str) -> list[dict]:
    """The newest uv-managed CPython builds of PYTHON_VERSION for the platforms in play.

    uv's download list carries no checksums in its JSON output; the lock takes them from the
    build release's SHA256SUMS. Where that cannot be fetched the build is recorded with
    sha256 null and the controller refuses to push it (never an unverified build).
    """
    out = subprocess.run([uv, "python", "list", "--all-platforms", "--all-arches", "--only-downloads", "--output-format", "json"],
                         check=True, capture_output=True, text=True).stdout
    builds = []
    for os_name, arch, libc in PYTHON_BUILD_PLATFORMS:
        cands = [b for b in json.loads(out)
                 if b["implementation"] == "cpython" and b.get("variant", "default") == "default"
                 and b["os"] == os_name and b["arch"] == arch and b["libc"] == libc
                 and f"{b['version_parts']['major']}.{b['version_parts']['minor']}" == python_version
                 and re.fullmatch(r"\d+\.\d+\.\d+", b["version"])]
        if not cands:
            raise LockError(f"uv knows no CPython {python_version} build for {os_name}-{arch}-{libc}")
        best = max(cands, key=lambda b: tuple(b["version_parts"][k] for k in ("major", "minor", "patch")))
        filename = urllib.request.unquote(best["url"].rsplit("/", 1)[1])
        builds.append({"key": best["key"], "version": best["version"], "os": os_name, "arch": arch, "libc": libc,
                       "url": best["url"], "filename": filename, "sha256": _build_sha256(best["url"], filename)})
    return builds


def _build_sha256(url: str, filename: str) -> str | None:
    sums_url = url.rsplit("/", 1)[0] + "/SHA256SUMS"
    try:
        req = urllib.request.Request(sums_url, headers={"User-Agent": "mlx-fleet-lock"})
        with urllib.request.urlopen(req, timeout=20) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, OSError, ValueError):
        print(f"mlx-fleet lock: warning: cannot fetch {sums_url}; {filename} is locked without a hash "
              "and will not be pushed until the lock is made again with access to it", file=sys.stderr)
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == filename:
            return parts[0]
    return None


def make_lock(decl: dict, uv: str, extra_pythons=DEFAULT_EXTRA_PYTHONS, index: str = PYPI_SIMPLE,
              fetch=_fetch_json, with_python_builds: bool = True) -> dict:
    """Resolve DECL into a lock (a dict ready for json.dump)."""
    pythons = sorted({decl["python_version"], *extra_pythons}, key=lambda v: tuple(map(int, v.split("."))))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "requirements.in"
        src.write_text("\n".join(requirements_in(decl)) + "\n")
        cmd = [uv, "pip", "compile", "--universal", "--generate-hashes", "--only-binary", ":all:",
               "--python-version", pythons[0], "--no-header", "--no-annotate", "--quiet",
               "--index-url", index, str(src)]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise LockError(f"uv pip compile failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}")
    packages = parse_compiled(result.stdout)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda p: index_files(p["name"], p["version"], p["hashes"], index, fetch), packages))
    for pkg, files in zip(packages, found):
        del pkg["hashes"]
        pkg["files"] = files
    uv_files = index_files("uv", decl["uv_version"], None, index, fetch)
    uv_version = subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.split()[1]
    return {
        "format": LOCK_FORMAT,
        "generated_by": f"mlx-fleet lock: uv {uv_version} pip compile --universal --generate-hashes --only-binary :all:",
        "declaration": decl,
        "python_versions": pythons,
        "requirements_in": requirements_in(decl),
        "packages": packages,
        "uv": {"version": decl["uv_version"], "files": uv_files},
        "python_builds": python_builds(uv, decl["python_version"]) if with_python_builds else [],
    }


def write_lock(lock: dict, path: str | os.PathLike) -> str:
    text = json.dumps(lock, indent=1, sort_keys=False) + "\n"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
    return hashlib.sha256(text.encode()).hexdigest()


def declaration_from(inventory: str | None, overrides: dict) -> dict:
    """Role defaults, then the inventory's group vars (mlx_cluster.yml / all.yml), then flags."""
    raw = yaml.safe_load(ROLE_DEFAULTS.read_text()) or {}
    if inventory:
        inv = Path(inventory)
        folder = inv if inv.is_dir() else inv.parent
        for name in ("all", "mlx_cluster"):
            for candidate in (folder / "group_vars" / f"{name}.yml", folder / "group_vars" / name / "main.yml"):
                if candidate.exists():
                    raw.update({k: v for k, v in (yaml.safe_load(candidate.read_text()) or {}).items()
                                if k.startswith("mlx_env_")})
    raw.update({f"mlx_env_{k}": v for k, v in overrides.items() if v is not None})
    return normalize_declaration({k: raw.get(f"mlx_env_{k}") for k in DECLARATION_KEYS})

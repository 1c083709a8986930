"""Controller side of the mlx_env role: which artifacts each node needs, the download cache.

The node's target Python reports its platform (`mlx_env_facts`); here that report becomes a
list of wheel tags and PEP 508 marker values, the lock's packages are filtered by marker
and each gets the best wheel for those tags. Artifacts are downloaded once per run into
the controller's cache, whatever the node count, verified against the lock's sha256, and
only the ones a node lacks are pushed to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging import tags as ptags
from packaging.markers import Marker
from packaging.utils import parse_wheel_filename

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.lock import LockError, check_declaration, load_lock

# manylinux legacy aliases (PEP 599/571/513)
_LEGACY_MANYLINUX = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
_UV_OS = {"darwin": "macos", "linux": "linux"}
_UV_ARCH = {"arm64": "aarch64", "aarch64": "aarch64", "x86_64": "x86_64", "amd64": "x86_64"}


class PlanError(LockError):
    """A one-line problem planning a node's environment."""


# ---------------------------------------------------------------- tags and markers

def platform_tags(info: dict) -> list[str]:
    """Platform tags, most specific first, from what a node's Python reported (PROBE)."""
    machine = info["machine"]
    if info["sys_platform"] == "darwin":
        major, minor = (int(x) for x in (info["mac_ver"].split(".") + ["0"])[:2])
        arch = "x86_64" if machine == "x86_64" else "arm64"
        return list(ptags.mac_platforms((major, minor), arch))
    if info["sys_platform"].startswith("linux"):
        arch = machine
        if info.get("pointer_bits") == 32 and arch in ("x86_64", "aarch64"):
            arch = {"x86_64": "i686", "aarch64": "armv8l"}[arch]
        out = []
        if info.get("glibc"):
            gmajor, gminor = (int(x) for x in info["glibc"].split(".")[:2])
            floor = 5 if arch in ("x86_64", "i686") else 17
            for m in range(gminor, floor - 1, -1):
                out.append(f"manylinux_{gmajor}_{m}_{arch}")
                if (gmajor, m) in _LEGACY_MANYLINUX:
                    out.append(f"{_LEGACY_MANYLINUX[(gmajor, m)]}_{arch}")
        out.append(f"linux_{arch}")
        return out
    raise PlanError(f"unsupported node platform {info['sys_platform']}")


def node_tags(info: dict, python_version: tuple[int, int] | None = None) -> list[str]:
    """Every wheel tag the node's target CPython accepts, best first.

    PYTHON_VERSION replaces the reporting interpreter's version (a uv-managed CPython of
    that version on the same platform).
    """
    if info["implementation"] != "cpython":
        raise PlanError(f"the target Python is {info['implementation']}, not CPython")
    version = python_version or tuple(info["version"][:2])
    plats = platform_tags(info)
    abi = f"cp{version[0]}{version[1]}" + ("t" if info.get("gil_disabled") and python_version is None else "")
    found = list(ptags.cpython_tags(version, [abi], plats))
    found += list(ptags.compatible_tags(version, f"cp{version[0]}{version[1]}", plats))
    return [str(t) for t in found]


def node_markers(info: dict, full_version: str | None = None) -> dict:
    markers = dict(info["markers"])
    if full_version:
        markers.update(python_full_version=full_version, python_version=".".join(full_version.split(".")[:2]),
                       implementation_name="cpython", implementation_version=full_version,
                       platform_python_implementation="CPython")
    return markers


def best_wheel(files: list[dict], tags: list[str]) -> dict | None:
    rank = {t: i for i, t in enumerate(tags)}
    scored = []
    for f in files:
        _, _, _, wtags = parse_wheel_filename(f["filename"])
        best = min((rank[str(t)] for t in wtags if str(t) in rank), default=None)
        if best is not None:
            scored.append((best, f["filename"], f))
    return min(scored, key=lambda s: (s[0], s[1]))[2] if scored else None


# ---------------------------------------------------------------- per-node plan

def locked_packages(lock: dict, markers: dict) -> list[dict]:
    """The lock's packages whose environment marker holds for a node with these marker values."""
    return [pkg for pkg in lock["packages"] if not pkg["marker"] or Marker(pkg["marker"]).evaluate(markers)]


def python_build(lock: dict, info: dict) -> dict:
    """The lock's uv-managed Python build for the platform a node's Python reported."""
    os_name = _UV_OS.get(info["sys_platform"], info["sys_platform"])
    arch = _UV_ARCH.get(info["machine"], info["machine"])
    libc = "none" if os_name == "macos" else "gnu"
    for build in lock.get("python_builds", []):
        if (build["os"], build["arch"], build["libc"]) == (os_name, arch, libc):
            return build
    raise PlanError(f"the lock has no uv-managed Python build for {os_name}-{arch}-{libc}; run mlx-fleet lock")


def plan_node(lock: dict, facts: dict, python_interpreter: str, store: str) -> dict:
    """What one node needs: its interpreter, requirements, and the artifacts it lacks."""
    target = facts["target"]
    info = target.get("info")
    if not info:
        raise PlanError(f"cannot ask {target.get('path')} for its platform: {target.get('error') or 'no answer'}")
    uname = facts["uname_machine"]
    if _UV_ARCH.get(info["machine"], info["machine"]) != _UV_ARCH.get(uname, uname):
        raise PlanError(f"{target['path']} runs as {info['machine']} but the node is {uname} "
                        f"(a Rosetta or foreign Python); use a native {uname} interpreter")
    build = None
    if python_interpreter:
        interpreter = python_interpreter
        xy = ".".join(map(str, info["version"][:2]))
        if xy not in lock["python_versions"]:
            raise PlanError(f"{interpreter} is Python {xy} but the lock covers Python {', '.join(lock['python_versions'])}; "
                            f"run mlx-fleet lock --also-python {xy}")
        tags, markers = node_tags(info), node_markers(info)
        want_version = list(info["version"])
    else:
        build = python_build(lock, info)
        interpreter = str(Path(store, "python", build["key"], "python", "bin", "python3"))
        major, minor, _ = (int(x) for x in build["version"].split("."))
        tags, markers = node_tags(info, (major, minor)), node_markers(info, build["version"])
        want_version = [int(x) for x in build["version"].split(".")]

    requirements = []
    for pkg in locked_packages(lock, markers):
        wheel = best_wheel(pkg["files"], tags)
        if wheel is None:
            raise PlanError(f"no wheel of {pkg['name']}=={pkg['version']} in the lock fits this node "
                            f"({tags[0]}); run mlx-fleet lock")
        requirements.append({"name": pkg["name"], "version": pkg["version"], "filename": wheel["filename"],
                             "sha256": wheel["sha256"], "url": wheel["url"]})
    uv_wheel = best_wheel(lock["uv"]["files"], tags)
    if uv_wheel is None:
        raise PlanError(f"no uv {lock['uv']['version']} wheel in the lock fits this node ({tags[0]})")

    venv = facts.get("venv") or {}
    vinfo = venv.get("info") or {}
    desired = {r["name"]: r["version"] for r in requirements}
    base_ok = bool(vinfo) and list(vinfo.get("version", [])) == want_version and (
        build is not None or vinfo.get("base_prefix") == info.get("prefix"))
    matches = base_ok and vinfo.get("installed") == desired and (build is None or build["key"] in facts.get("managed_builds", []))

    wheels_on_node = facts.get("wheels") or {}
    push_wheels = [] if matches else [r for r in requirements if wheels_on_node.get(r["filename"]) != r["sha256"]]
    need_build = build is not None and build["key"] not in facts.get("managed_builds", [])
    if need_build and not build.get("sha256"):
        raise PlanError(f"the lock has no sha256 for {build['filename']}; run mlx-fleet lock where its release's "
                        "SHA256SUMS can be fetched")
    return {
        "interpreter": interpreter,
        "python_build": ({"key": build["key"], "filename": build["filename"], "sha256": build["sha256"]}
                         if build else None),
        "requirements": [{k: r[k] for k in ("name", "version", "filename", "sha256")} for r in requirements],
        "matches": matches,
        "push_wheels": push_wheels,
        "uv_wheel": None if matches else uv_wheel,
        "push_build": build if need_build else None,
    }


# ---------------------------------------------------------------- the cache

class Cache:
    """Artifacts by file name under DIR/artifacts, verified; real downloads logged and counted."""

    def __init__(self, root: str | os.PathLike, opener=None):
        self.root = Path(os.path.expanduser(str(root)))
        self.artifacts = self.root / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.log = self.root / "downloads.log"
        self.opener = opener or (lambda url: urllib.request.urlopen(
            urllib.request.Request(url, headers={"User-Agent": "mlx-fleet"}), timeout=300))
        self.downloaded: list[str] = []
        self.hits: list[str] = []

    def path(self, filename: str) -> Path:
        return self.artifacts / filename

    def fetch(self, artifact: dict) -> Path:
        dest = self.path(artifact["filename"])
        if dest.exists() and _sha256(dest) == artifact["sha256"]:
            self.hits.append(artifact["filename"])
            return dest
        fd, tmp = tempfile.mkstemp(dir=self.artifacts, prefix=".part-")
        try:
            with os.fdopen(fd, "wb") as out, self.opener(artifact["url"]) as resp:
                shutil.copyfileobj(resp, out, 1 << 20)
            got = _sha256(Path(tmp))
            if got != artifact["sha256"]:
                raise PlanError(f"{artifact['filename']} from {artifact['url']} has sha256 {got}, "
                                f"the lock says {artifact['sha256']}")
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        self.downloaded.append(artifact["filename"])
        with open(self.log, "a") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {artifact['filename']} {artifact['url']}\n")
        return dest

    def fetch_all(self, artifacts: list[dict], workers: int = 8) -> dict[str, Path]:
        unique = {a["filename"]: a for a in artifacts}
        with ThreadPoolExecutor(max_workers=workers) as pool:
            paths = list(pool.map(self.fetch, unique.values()))
        return dict(zip(unique, paths))

    def uv_binary(self, wheel: Path) -> Path:
        """The uv executable inside a verified uv wheel, extracted once."""
        dest = self.root / "uv" / wheel.name[:-len(".whl")] / "uv"
        if not dest.exists():
            with zipfile.ZipFile(wheel) as zf:
                member = next((n for n in zf.namelist() if n.endswith(".data/scripts/uv")), None)
                if member is None:
                    raise PlanError(f"{wheel.name} holds no uv binary")
                dest.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=dest.parent)
                with os.fdopen(fd, "wb") as out, zf.open(member) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
                os.chmod(tmp, 0o755)
                os.replace(tmp, dest)
        return dest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- one run

def plan_run(lock_file: str, declaration: dict, python_interpreter: str, store: str, cache_dir: str,
             facts_by_host: dict, opener=None) -> dict:
    """Check the declaration, plan every node, download each needed artifact once, list pushes."""
    lock, lock_hash = load_lock(lock_file)
    check_declaration(lock, declaration, lock_file)
    plans, errors = {}, []
    for host in sorted(facts_by_host):
        try:
            plans[host] = plan_node(lock, facts_by_host[host], python_interpreter, store)
        except PlanError as exc:
            errors.append(f"{host}: {exc}")
    if errors:
        raise PlanError("; ".join(errors))

    needed = []
    for plan in plans.values():
        needed += plan["push_wheels"]
        if plan["uv_wheel"]:
            needed.append(plan["uv_wheel"])
        if plan["push_build"]:
            needed.append(plan["push_build"])
    cache = Cache(cache_dir, opener)
    paths = cache.fetch_all(needed)

    hosts = {}
    store_p = Path(store)
    for host, plan in plans.items():
        push = [{"src": str(paths[w["filename"]]), "dest": str(store_p / "wheels" / w["filename"]), "mode": "0644"}
                for w in plan["push_wheels"]]
        if plan["uv_wheel"]:
            uv_bin = cache.uv_binary(paths[plan["uv_wheel"]["filename"]])
            if facts_by_host[host].get("uv_sha256") != _sha256(uv_bin):
                push.append({"src": str(uv_bin), "dest": str(store_p / "bin" / "uv"), "mode": "0755"})
        if plan["push_build"]:
            push.append({"src": str(paths[plan["push_build"]["filename"]]),
                         "dest": str(store_p / "downloads" / plan["push_build"]["filename"]), "mode": "0644"})
        hosts[host] = {"interpreter": plan["interpreter"], "python_build": plan["python_build"],
                       "requirements": plan["requirements"], "matches": plan["matches"], "push": push}
    return {
        "lock_hash": lock_hash,
        "hosts": hosts,
        "artifacts": len({a["filename"] for a in needed}),
        "downloads": len(cache.downloaded),
        "downloaded": sorted(cache.downloaded),
        "cache_hits": len(cache.hits),
        "cache_dir": str(cache.root),
    }


"""Controller side of the mlx_env role: which artifacts each node needs, the download cache.

The node's target Python reports its platform (`mlx_env_facts`); here that report becomes a
list of wheel tags and PEP 508 marker values, the lock's packages are filtered by marker
and each gets the best wheel for those tags. Artifacts are downloaded once per run into
the controller's cache, whatever the node count, verified against the lock's sha256 (also
when already cached), and the ones a node lacks travel to it as one bundle. A node that
already is the locked environment (judged here, versions compared as PEP 440 versions)
gets nothing and runs nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

try:
    from packaging import tags as ptags
    from packaging.markers import Marker
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version
except ImportError:
    pass  # env_declaration.PACKAGING_MISSING: a plan starts by checking the declaration, which then fails with it

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError, check_declaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_file import PYTHON_BUILD_BASE, load_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import replacing
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.package_index import open_http

# manylinux legacy aliases (PEP 599/571/513)
_LEGACY_MANYLINUX = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
_UV_OS = {"darwin": "macos", "linux": "linux"}
_UV_ARCH = {"arm64": "aarch64", "aarch64": "aarch64", "x86_64": "x86_64", "amd64": "x86_64"}


class PlanError(EnvLockError):
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
        dummy, dummy, dummy, wtags = parse_wheel_filename(f["filename"])
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
    raise PlanError(f"the lock has no uv-managed Python build for {os_name}-{arch}-{libc}; "
                    "add the platform to mlx_env_platforms", relock=True)


def _changes(installed: dict, requirements: list[dict], rebuilt: bool = False) -> list[str]:
    """What syncing INSTALLED (name -> version, as the venv reports them) to REQUIREMENTS
    changes, versions compared as PEP 440 versions; everything when the venv is REBUILT."""
    have = {} if rebuilt else {canonicalize_name(n): v for n, v in installed.items()}
    want = {r["name"]: r["version"] for r in requirements}
    out = []
    for name in sorted(set(have) | set(want)):
        old, new = have.get(name), want.get(name)
        try:
            same = old is not None and new is not None and Version(old) == Version(new)
        except InvalidVersion:
            same = old == new
        if not same:
            out.append(f"{name} {old or '(none)'} -> {new or '(removed)'}")
    return out


def plan_node(lock: dict, lock_hash: str, facts: dict, python_interpreter: str, store: str) -> dict:
    """What one node needs: its interpreter, requirements, the artifacts it lacks, and
    whether it already is the locked environment (then nothing runs on it)."""
    target = facts["target"]
    info = target.get("info")
    if not info:
        raise PlanError(f"cannot ask {target.get('path')} for its platform: {target.get('error') or 'no answer'}")
    uname = facts["uname_machine"]
    if _UV_ARCH.get(info["machine"], info["machine"]) != _UV_ARCH.get(uname, uname):
        raise PlanError(f"{target['path']} runs as {info['machine']} but the node is {uname} "
                        f"(a Rosetta or foreign Python); use a native {uname} interpreter")
    for name, state in facts.get("folders", {}).items():
        if state == "foreign":
            raise PlanError(f"mlx_env_{name} exists and was not made by mlx-fleet (it is not empty and has no marker); "
                            f"move it away or choose another mlx_env_{name}")
    declared = lock["declaration"]["python_version"]
    build = None
    if python_interpreter:
        interpreter = python_interpreter
        xy = ".".join(map(str, info["version"][:2]))
        if xy != declared:
            raise PlanError(f"{interpreter} is Python {xy} but mlx_env_python_version is {declared}; "
                            f"set mlx_env_python_version: \"{xy}\"", relock=True)
        tags, markers = node_tags(info), node_markers(info)
        want_version, want_prefix, build_ready = list(info["version"]), info.get("prefix"), True
    else:
        build = python_build(lock, info)
        if not build.get("sha256"):
            raise PlanError(f"the lock has no sha256 for {build['filename']}, so it is never pushed (a lock made "
                            "by an older mlx-fleet)", relock=True)
        interpreter = _node_utils().managed_python(store, build["key"])
        major, minor, dummy = (int(x) for x in build["version"].split("."))
        tags, markers = node_tags(info, (major, minor)), node_markers(info, build["version"])
        want_version = [int(x) for x in build["version"].split(".")]
        extracted = facts.get("managed_builds", {}).get(build["key"]) or {}
        build_ready = extracted.get("sha256") == build["sha256"] and extracted.get("intact")
        want_prefix = extracted.get("prefix")

    requirements = []
    for pkg in locked_packages(lock, markers):
        wheel = best_wheel(pkg["files"], tags)
        if wheel is None:
            raise PlanError(f"no wheel of {pkg['name']}=={pkg['version']} in the lock fits this node "
                            f"({tags[0]})", relock=True)
        requirements.append({"name": pkg["name"], "version": pkg["version"], "filename": wheel["filename"],
                             "sha256": wheel["sha256"], "url": wheel["url"]})
    uv_wheel = best_wheel(lock["uv"]["files"], tags)
    if uv_wheel is None:
        raise PlanError(f"no uv {lock['uv']['version']} wheel in the lock fits this node ({tags[0]})")

    venv = facts.get("venv") or {}
    vinfo = venv.get("info") or {}
    proof = vinfo.get("proof") or {}
    base_ok = bool(vinfo) and list(vinfo.get("version", [])) == want_version and vinfo.get("base_prefix") == want_prefix
    installed = vinfo.get("installed") or {}
    expected = None
    if base_ok:
        version = ".".join(map(str, vinfo["version"]))
        expected = _node_utils().fingerprint(lock_hash, installed, version, uname)
    matches = (base_ok and facts.get("folders", {}).get("path") == "ours" and not _changes(installed, requirements)
               and (build is None or build_ready) and proof.get("ok") and vinfo.get("machine") == uname
               and facts.get("fingerprint") == expected)

    wheels_on_node = facts.get("wheels") or {}
    return {
        "interpreter": interpreter,
        "python_build": ({"key": build["key"], "filename": build["filename"], "sha256": build["sha256"]}
                         if build else None),
        "requirements": [{k: r[k] for k in ("name", "version", "filename", "sha256")} for r in requirements],
        "matches": bool(matches),
        "fingerprint": expected if matches else None,
        "changes": [] if matches else _changes(installed, requirements, rebuilt=not base_ok),
        "push_wheels": [] if matches else [r for r in requirements if wheels_on_node.get(r["filename"]) != r["sha256"]],
        "uv_wheel": None if matches else uv_wheel,
        "push_build": build if build is not None and not matches and not build_ready else None,
    }


def _node_utils():
    """The collection's module_utils/mlx_env.py: the node's layout and fingerprint, shared."""
    from ansible_collections.mlx_fleet.cluster.plugins.module_utils import mlx_env

    return mlx_env


# ---------------------------------------------------------------- the cache

class Cache:
    """Artifacts by file name under DIR/artifacts, verified; real downloads logged and counted.

    Each node's share travels as one tar under DIR/bundles, named by what it holds, so Macs
    that lack the same artifacts get the same bundle.
    """

    BUNDLE_AGE = 86400  # bundles unused for a day are removed

    def __init__(self, root: str | os.PathLike, opener=None):
        self.root = Path(os.path.expanduser(str(root)))
        self.artifacts = self.root / "artifacts"
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.bundles = self.root / "bundles"
        self.log = self.root / "downloads.log"
        self.opener = opener or (lambda url: open_http(url, {"User-Agent": "mlx-fleet"}, timeout=300))
        self.downloaded: list[str] = []
        self.hits: list[str] = []

    def path(self, filename: str) -> Path:
        return self.artifacts / filename

    def fetch(self, artifact: dict) -> Path:
        """The artifact in the cache with the lock's sha256: re-checked there, else downloaded."""
        dest = self.path(artifact["filename"])
        if dest.exists() and sha256_file(dest) == artifact["sha256"]:
            self.hits.append(artifact["filename"])
            return dest

        def check(tmp: Path) -> None:
            got = sha256_file(tmp)
            if got != artifact["sha256"]:
                raise PlanError(f"{artifact['filename']} from {artifact['url']} has sha256 {got}, "
                                f"the lock says {artifact['sha256']}")

        with replacing(dest, 0o644, check) as out:
            try:
                with self.opener(artifact["url"]) as resp:
                    shutil.copyfileobj(resp, out, 1 << 20)
            except (OSError, ValueError) as exc:  # urllib's URLError is an OSError
                raise PlanError(f"cannot download {artifact['filename']} from {artifact['url']}: "
                                f"{getattr(exc, 'reason', None) or exc}") from None
        self.downloaded.append(artifact["filename"])
        with open(self.log, "a") as log:
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {artifact['filename']} {artifact['url']}\n")
        return dest

    def fetch_all(self, artifacts: list[dict], workers: int = 8) -> dict[str, Path]:
        unique = {a["filename"]: a for a in artifacts}
        with ThreadPoolExecutor(max_workers=workers) as pool:
            paths = list(pool.map(self.fetch, unique.values()))
        return dict(zip(unique, paths))

    def bundle(self, members: list[tuple[str, str, Path]]) -> dict:
        """One tar of MEMBERS (name in the tar, sha256, cached file), made once: {src, sha256, members}."""
        listing = "".join(f"{name} {sha}\n" for name, sha, dummy in sorted(members))
        dest = self.bundles / f"{hashlib.sha256(listing.encode()).hexdigest()[:32]}.tar"
        self.bundles.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            with replacing(dest, 0o644) as out, tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, dummy, src in sorted(members):
                    info = tarfile.TarInfo(name)
                    info.size, info.mode, info.mtime = src.stat().st_size, 0o644, 0
                    with open(src, "rb") as handle:
                        tar.addfile(info, handle)
        os.utime(dest)
        return {"src": str(dest), "sha256": sha256_file(dest), "members": len(members)}

    def prune_bundles(self) -> None:
        if self.bundles.is_dir():
            for old in self.bundles.iterdir():
                if time.time() - old.stat().st_mtime > self.BUNDLE_AGE:
                    old.unlink(missing_ok=True)


def uv_binary_sha256(wheel: Path) -> str:
    """sha256 of the uv executable inside a verified uv wheel (what the node's bin/uv must be)."""
    with zipfile.ZipFile(wheel) as zf:
        member = next((n for n in zf.namelist() if n.endswith(".data/scripts/uv")), None)
        if member is None:
            raise PlanError(f"{wheel.name} holds no uv binary")
        digest = hashlib.sha256()
        with zf.open(member) as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def sha256_file(path) -> str:
    return _node_utils().sha256_file(str(path))


def mirrored(url: str, mirror: str) -> str:
    """URL of a CPython build from MIRROR, a folder laid out like the releases (file:// or https://)."""
    if not mirror:
        return url
    if not url.startswith(PYTHON_BUILD_BASE + "/"):
        raise PlanError(f"{url} is not under {PYTHON_BUILD_BASE}, so mlx_env_python_mirror cannot replace it")
    return mirror.rstrip("/") + url[len(PYTHON_BUILD_BASE):]


# ---------------------------------------------------------------- one run

def plan_run(lock_file: str, declaration: dict, python_interpreter: str, store: str, cache_dir: str,
             facts_by_host: dict, opener=None, python_mirror: str = "", bundles: bool = True) -> dict:
    """Check the declaration, plan every node, download each needed artifact once, and put
    each node's missing artifacts in one bundle (BUNDLES false: plan only, as check mode does)."""
    lock, lock_hash = load_lock(lock_file)
    check_declaration(lock, declaration, lock_file)
    plans, errors = {}, []
    for host in sorted(facts_by_host):
        try:
            plans[host] = plan_node(lock, lock_hash, facts_by_host[host], python_interpreter, store)
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
            needed.append(dict(plan["push_build"], url=mirrored(plan["push_build"]["url"], python_mirror)))
    cache = Cache(cache_dir, opener)
    paths = cache.fetch_all(needed)
    uv_wheels = {p["uv_wheel"]["filename"] for p in plans.values() if p["uv_wheel"]}
    uv_sha = {name: uv_binary_sha256(paths[name]) for name in uv_wheels}
    if bundles:
        cache.prune_bundles()

    hosts = {}
    for host, plan in plans.items():
        members = [(f"wheels/{w['filename']}", w["sha256"], paths[w["filename"]]) for w in plan["push_wheels"]]
        uv = None
        if plan["uv_wheel"]:
            uv = {"sha256": uv_sha[plan["uv_wheel"]["filename"]], "wheel": None}
            if facts_by_host[host].get("uv_sha256") != uv["sha256"]:
                uv["wheel"] = {k: plan["uv_wheel"][k] for k in ("filename", "sha256")}
                members.append((f"uv/{plan['uv_wheel']['filename']}", plan["uv_wheel"]["sha256"],
                                paths[plan["uv_wheel"]["filename"]]))
        if plan["push_build"]:
            members.append((f"python/{plan['push_build']['filename']}", plan["push_build"]["sha256"],
                            paths[plan["push_build"]["filename"]]))
        hosts[host] = {
            "interpreter": plan["interpreter"], "python_build": plan["python_build"],
            "requirements": plan["requirements"], "matches": plan["matches"], "fingerprint": plan["fingerprint"],
            "changes": plan["changes"], "uv": uv,
            "bundle": cache.bundle(members) if members and bundles else None,
            "push": [name for name, dummy, dummy in members],
        }
    return {
        "lock_hash": lock_hash,
        "hosts": hosts,
        "artifacts": len({a["filename"] for a in needed}),
        "downloads": len(cache.downloaded),
        "downloaded": sorted(cache.downloaded),
        "cache_hits": len(cache.hits),
        "cache_dir": str(cache.root),
    }

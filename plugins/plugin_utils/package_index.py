"""The package index an environment's lock is resolved from (PEP 691 JSON): fetching from it, and
which of its wheels fit a node's platform and Python."""

from __future__ import annotations

import functools
import json

from ansible.module_utils.urls import open_url

try:
    from packaging import tags as ptags
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version
except ImportError:
    pass  # env_declaration.PACKAGING_MISSING: every use starts from normalize_declaration, which says so

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env_declaration import PLATFORMS

PYPI_SIMPLE = "https://pypi.org/simple"


# Where a lock may be resolved from: TLS, or this machine's files (never plain http, which anyone on the
# path could answer: the hashes the lock records come from that answer).
INDEX_SCHEMES = ("https://", "file://")


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


def fetch_json(url: str, accept: str = "application/vnd.pypi.simple.v1+json") -> dict:
    with open_http(url, {"Accept": accept, "User-Agent": "mlx-fleet-lock"}, timeout=60) as resp:
        return json.load(resp)


def download(url: str) -> bytes:
    with open_http(url, {"User-Agent": "mlx-fleet-lock"}, timeout=120) as resp:
        return resp.read()


def _same_version(filename_version, pinned: str) -> bool:
    try:
        return Version(str(filename_version)) == Version(pinned)
    except InvalidVersion:
        return False


def index_files(name: str, version: str, hashes: list[str] | None, platforms, python_version: str,
                index: str = PYPI_SIMPLE, fetch=fetch_json) -> list[dict]:
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

"""The package index an environment's lock is resolved from (PEP 691 JSON): fetching from it, and
which of its wheels fit a node's platform and Python."""

from __future__ import annotations

import functools
import http.client
import json

from ansible.module_utils.urls import ConnectionError as UrlsConnectionError
from ansible.module_utils.urls import open_url

try:
    from packaging import tags as ptags
    from packaging.utils import canonicalize_name, parse_wheel_filename
    from packaging.version import InvalidVersion, Version
except ImportError:
    pass  # env_declaration.PACKAGING_MISSING: every use starts from normalize_declaration, which says so

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import (
    PLATFORMS, PYPI_SIMPLE, EnvLockError)


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


# What a GET may raise: urllib's URLError and HTTPError, a cut connection or a timeout (OSError), a
# malformed answer (http.client), a certificate that does not verify (ansible's urls.ConnectionError).
_UNREADABLE = (OSError, http.client.HTTPException, UrlsConnectionError)


def fetch_json(url: str, accept: str = "application/vnd.pypi.simple.v1+json"):
    """The JSON at URL; what cannot be read, or is not JSON (an HTML-only index), is an EnvLockError naming it."""
    body = _get(url, {"Accept": accept, "User-Agent": "mlx-fleet-lock"}, 60)
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, nested past the recursion limit
        raise EnvLockError(f"{url}: not JSON ({str(exc)[:100]}): --index needs an index that answers {accept} "
                           "(PEP 691, as pypi.org/simple does); an HTML-only index cannot be used") from None


def download(url: str) -> bytes:
    return _get(url, {"User-Agent": "mlx-fleet-lock"}, 120)


def _get(url: str, headers: dict, timeout: float) -> bytes:
    try:
        with open_http(url, headers, timeout=timeout) as resp:
            return resp.read()
    except _UNREADABLE as exc:
        raise EnvLockError(f"{url}: cannot be read ({getattr(exc, 'reason', None) or exc}): check --index and "
                           "that the index is reachable") from None


def project_files(url: str, fetch=fetch_json) -> list[dict]:
    """The files of one project page of the index (PEP 691: a "files" list of objects with a filename, a url and
    hashes); a page of another shape is an EnvLockError naming URL."""
    data = fetch(url)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(
            isinstance(f, dict) and isinstance(f.get("filename"), str) and isinstance(f.get("url"), str)
            and isinstance(f.get("hashes", {}), dict) for f in files):
        raise EnvLockError(f"{url}: not a PEP 691 project page (a \"files\" list of objects with filename, url and "
                           "hashes): check --index")
    return files


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
    files = []
    for f in project_files(f"{index}/{canonicalize_name(name)}/", fetch):
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
        if not isinstance(sha, str) or not sha or (hashes is not None and sha not in hashes):
            continue
        files.append({"filename": fname, "url": f["url"], "sha256": sha, "size": f.get("size")})
    return sorted(files, key=lambda x: x["filename"])

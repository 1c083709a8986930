"""The pinned MLX environment's declaration: what the inventory asks for, in canonical form.

The inventory declares one environment for the whole cluster (role variables
`mlx_env_python_version`, `mlx_env_uv_version`, `mlx_env_mlx_version`,
`mlx_env_mlx_lm_version`, `mlx_env_extra_packages`, and `mlx_env_platforms`, the node
platforms it must cover: `macos-arm64` by default). The environment's lock (env_lock.py) records
the declaration it was made from, so a playbook run stops when the inventory says something else.
"""

from __future__ import annotations

import re

try:
    from packaging.requirements import Requirement
except ImportError as exc:
    # ansible-core requires packaging, so a controller has it; a plugin still imports without it (as
    # ansible-core's own do) and says so when used: every use starts from normalize_declaration.
    PACKAGING_MISSING = f"the Python package packaging cannot be imported ({exc}); it comes with ansible-core: reinstall it"
else:
    PACKAGING_MISSING = None


def _glibc_wheel(arch: str) -> re.Pattern:
    return re.compile(rf"^(manylinux_\d+_\d+|manylinux1|manylinux2010|manylinux2014|linux)_{arch}$")


# The node platforms a lock can cover (mlx_env_platforms): the wheel platform tags each
# runs, the marker values it has, and its uv-managed CPython build (uv's os, arch, libc).
PYPI_SIMPLE = "https://pypi.org/simple"  # the package index an environment resolves from unless told
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


class EnvLockError(Exception):
    """A one-line, user-facing problem with the declaration or the lock. relock: resolving the lock again fixes it
    (the caller names the command for the install in use: fixes.lock_problem)."""

    def __init__(self, message: str, *, relock: bool = False):
        super().__init__(message)
        self.relock = relock


def normalize_declaration(raw: dict) -> dict:
    """The declaration in a canonical form (strings, extra packages sorted), or EnvLockError."""
    if PACKAGING_MISSING:
        raise EnvLockError(PACKAGING_MISSING)
    decl = {}
    for key in DECLARATION_KEYS:
        value = raw.get(key, raw.get(f"mlx_env_{key}"))
        if value is None:
            raise EnvLockError(f"mlx_env_{key} is not set")
        if key == "extra_packages":
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                raise EnvLockError(f"mlx_env_extra_packages must be a list of requirements, not {value!r}")
            extras = []
            for item in value:
                try:
                    Requirement(str(item))
                except Exception as exc:  # packaging raises InvalidRequirement
                    raise EnvLockError(f"mlx_env_extra_packages: {item!r} is not a requirement ({exc})") from None
                extras.append(str(item).strip())
            decl[key] = sorted(extras)
        elif key == "platforms":
            names = [value] if isinstance(value, str) else list(value or [])
            unknown = [str(n) for n in names if n not in PLATFORMS]
            if unknown or not names:
                raise EnvLockError(f"mlx_env_platforms must list some of {', '.join(PLATFORMS)}, not {value!r}")
            decl[key] = sorted(set(map(str, names)))
        else:
            value = str(value).strip()
            if not VERSION_RE.match(value):
                raise EnvLockError(f"mlx_env_{key} must be a version like 1.2.3, not {value!r}")
            decl[key] = value
    if decl["python_version"].count(".") != 1:
        raise EnvLockError(f"mlx_env_python_version must be MAJOR.MINOR (e.g. 3.12), not {decl['python_version']!r}")
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
    """The normalized declaration if the lock was made from it; EnvLockError otherwise."""
    decl = normalize_declaration(raw)
    locked = lock.get("declaration", {})
    diffs = [f"mlx_env_{k}={decl[k]!r} (lock: {locked.get(k)!r})" for k in DECLARATION_KEYS if locked.get(k) != decl[k]]
    if diffs:
        raise EnvLockError(f"the inventory's environment does not match {lock_path}: {', '.join(diffs)}", relock=True)
    return decl

"""`mlx-fleet lock`: resolve the declared environment into the lock (logic: plugin_utils.lock)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.lock import (
    DEFAULT_EXTRA_PYTHONS, DEFAULT_LOCK, PYPI_SIMPLE, LockError, declaration_from, make_lock, write_lock)
from mlx_fleet.errors import UserError


def add_lock_parser(sub, command) -> None:
    p = command(sub, "lock", "resolve the declared MLX environment into the lock file (with hashes)",
                "Resolve the environment the inventory declares (mlx_env_* variables) with uv into a JSON lock "
                "with the sha256 of every wheel, uv and Python build, for the playbooks to install offline.",
                "  mlx-fleet lock -i inventory/mine\n  mlx-fleet lock -i inventory/mine --mlx 0.32.4")
    p.add_argument("-i", "--inventory", help="inventory folder whose group_vars declare mlx_env_* (default: role defaults)")
    p.add_argument("-o", "--output", default=str(DEFAULT_LOCK), help="lock file to write (default: %(default)s)")
    p.add_argument("--python", dest="python_version", help="override mlx_env_python_version")
    p.add_argument("--uv", dest="uv_version", help="override mlx_env_uv_version")
    p.add_argument("--mlx", dest="mlx_version", help="override mlx_env_mlx_version")
    p.add_argument("--mlx-lm", dest="mlx_lm_version", help="override mlx_env_mlx_lm_version")
    p.add_argument("--also-python", action="append", default=None,
                   help="another Python MAJOR.MINOR the nodes may use (default: 3.11, the sim's)")
    p.add_argument("--index", default=PYPI_SIMPLE, help="package index, PEP 691 simple API (default: %(default)s)")
    p.add_argument("--uv-bin", default=None, help="uv to resolve with (default: the one beside this Python, or on PATH)")


def _find_uv(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "uv"
    if beside.exists():
        return str(beside)
    from shutil import which

    found = which("uv")
    if not found:
        raise LockError("uv not found: install it (pip install uv) or pass --uv-bin")
    return found


def run_lock(args: argparse.Namespace) -> int:
    try:
        overrides = {k: getattr(args, k) for k in ("python_version", "uv_version", "mlx_version", "mlx_lm_version")}
        decl = declaration_from(args.inventory, overrides)
        extra = tuple(args.also_python) if args.also_python is not None else DEFAULT_EXTRA_PYTHONS
        lock = make_lock(decl, _find_uv(args.uv_bin), extra_pythons=extra, index=args.index)
        digest = write_lock(lock, args.output)
    except LockError as exc:
        raise UserError(str(exc)) from None
    n_files = sum(len(p["files"]) for p in lock["packages"])
    print(f"mlx-fleet lock: {len(lock['packages'])} packages, {n_files} wheels, uv {decl['uv_version']}, "
          f"Python {', '.join(lock['python_versions'])} -> {args.output} (sha256 {digest[:16]})")
    return 0

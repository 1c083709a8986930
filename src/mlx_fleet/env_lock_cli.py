"""`mlx-fleet lock`: resolve the declared environment into its lock (logic: plugin_utils.env.lock_resolve)."""

from __future__ import annotations

import argparse

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError
from mlx_fleet.env_inventory import declaration_from, inventory_environment
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_resolve import find_uv, summary_line, update_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.package_index import PYPI_SIMPLE
from mlx_fleet.errors import UserError


def add_env_lock_parser(sub, command) -> None:
    p = command(sub, "lock", "resolve the declared MLX environment into the lock file (with hashes)",
                "Resolve the environment the inventory declares (mlx_env_* variables) with uv into a JSON lock "
                "beside the inventory, with the sha256 of every wheel, uv and managed Python build, for the "
                "playbooks to install offline.",
                "  mlx-fleet lock -i inventory/mine\n  mlx-fleet lock -i inventory/mine --mlx 0.32.4")
    p.add_argument("-i", "--inventory", required=True,
                   help="the inventory (file or folder) whose mlx_cluster group declares mlx_env_*")
    p.add_argument("-o", "--output", help="lock file to write (default: the inventory's mlx_env_lock_file, "
                                          "{{ inventory_dir }}/.mlx-env.lock.json unless set)")
    p.add_argument("--python", dest="python_version", help="override mlx_env_python_version")
    p.add_argument("--uv", dest="uv_version", help="override mlx_env_uv_version")
    p.add_argument("--mlx", dest="mlx_version", help="override mlx_env_mlx_version")
    p.add_argument("--mlx-lm", dest="mlx_lm_version", help="override mlx_env_mlx_lm_version")
    p.add_argument("--index", default=PYPI_SIMPLE, help="package index, PEP 691 simple API, https:// or file:// "
                   "(default: %(default)s)")
    p.add_argument("--uv-bin", default=None, help="uv to resolve with (default: the one beside this Python, or on PATH)")


def run_env_lock(args: argparse.Namespace) -> int:
    try:
        overrides = {k: getattr(args, k) for k in ("python_version", "uv_version", "mlx_version", "mlx_lm_version")}
        raw, lock_file = inventory_environment(args.inventory)
        decl = declaration_from(raw, overrides)
        found = update_lock(decl, args.output or lock_file, find_uv(args.uv_bin), index=args.index)
    except EnvLockError as exc:
        raise UserError(str(exc)) from None
    print(f"mlx-fleet lock: {summary_line(decl, found)}{'' if found['changed'] else ' (unchanged)'}")
    return 0

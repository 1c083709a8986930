"""`mlx-fleet lock`: resolve the declared environment into its lock (logic: plugin_utils.env.lock_resolve) and pin the
declared Hub models into theirs (plugin_utils.models.hub_pin)."""

from __future__ import annotations

import argparse

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import PYPI_SIMPLE, EnvLockError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    ModelsLockError, models_lock_problem)
from mlx_fleet.errors import UserError


def add_env_lock_parser(sub, command) -> None:
    p = command(sub, "lock", "resolve the declared MLX environment into the lock file (with hashes); pin the Hub models",
                "Resolve the environment the inventory declares (mlx_env_* variables) with uv into a JSON lock "
                "beside the inventory, with the sha256 of every wheel, uv and managed Python build, for the "
                "playbooks to install offline. Pin each Hub model of mlx_fleet_models to a commit, with every "
                "file's size and hash as the Hub gives them, in .mlx-models.lock.json beside it (HF_ENDPOINT and "
                "your Hub login as huggingface_hub reads them); a model pinned before stays pinned unless "
                "--update-models names it.",
                "  mlx-fleet lock -i inventory/mine\n  mlx-fleet lock -i inventory/mine --mlx 0.32.4\n"
                "  mlx-fleet lock -i inventory/mine --models-only --update-models qwen3")
    p.add_argument("-i", "--inventory", required=True,
                   help="the inventory (file or folder) whose mlx_cluster group declares mlx_env_*")
    p.add_argument("-o", "--output", help="lock file to write (default: the inventory's mlx_env_lock_file, "
                                          "{{ inventory_dir }}/.mlx-env.lock.json unless set); the models' lock "
                                          "goes beside it")
    p.add_argument("--python", dest="python_version", help="override mlx_env_python_version")
    p.add_argument("--uv", dest="uv_version", help="override mlx_env_uv_version")
    p.add_argument("--mlx", dest="mlx_version", help="override mlx_env_mlx_version")
    p.add_argument("--mlx-lm", dest="mlx_lm_version", help="override mlx_env_mlx_lm_version")
    p.add_argument("--index", default=PYPI_SIMPLE, help="package index, PEP 691 simple API, https:// or file:// "
                   "(default: %(default)s)")
    p.add_argument("--uv-bin", default=None, help="uv to resolve with (default: the one beside this Python, or on PATH)")
    p.add_argument("--models-only", action="store_true",
                   help="pin the models only; the environment's lock stays as it is")
    p.add_argument("--update-models", metavar="NAME[,NAME...]|all", type=lambda text: text.split(","), default=[],
                   help="pin these models again at their declared revision (all: every Hub model)")


def run_env_lock(args: argparse.Namespace) -> int:
    # Here, not at the top: every command's parser is built at each start, and the resolver's imports (the index
    # client's HTTP stack) cost a fifth of a second.
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_resolve import (
        find_uv, summary_line, update_lock)
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import hub_pin
    from mlx_fleet.env_inventory import declaration_from, inventory_environment

    try:
        overrides = {k: getattr(args, k) for k in ("python_version", "uv_version", "mlx_version", "mlx_lm_version")}
        raw, lock_file = inventory_environment(args.inventory)
        lock_file = args.output or lock_file
        models = hub_pin.update_models_lock(raw["mlx_fleet_models"], lock_file, args.update_models)
        if not args.models_only:
            decl = declaration_from(raw, overrides)
            found = update_lock(decl, lock_file, find_uv(args.uv_bin), index=args.index)
    except EnvLockError as exc:
        raise UserError(str(exc)) from None
    except ModelsLockError as exc:
        raise UserError(models_lock_problem(exc, args.inventory, cli=True)) from None
    if not args.models_only:
        print(f"mlx-fleet lock: {summary_line(decl, found)}{'' if found['changed'] else ' (unchanged)'}")
    if models["pinned"] or models["kept"] or models["changed"]:
        print(f"mlx-fleet lock: {hub_pin.summary_line(models)}{'' if models['changed'] else ' (unchanged)'}")
    return 0

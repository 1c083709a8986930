"""The environment the inventory declares: the mlx_env_* variables of the cluster's group, over the
role defaults, the models it declares, and the lock file they name."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import SettingDiffers, one_value
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import (
    DECLARATION_KEYS, EnvLockError, normalize_declaration)


def inventory_environment(inventory: str, group: str = CLUSTER_GROUP) -> tuple[dict, str]:
    """The mlx_env_* variables the inventory gives GROUP (one environment per cluster), over
    the role defaults, with the declared models (mlx_fleet_models), and the lock file they name (mlx_env_lock_file,
    templated)."""
    from mlx_fleet.inventory_view import (
        InventoryView,
        InventoryViewError,
    )

    try:
        view = InventoryView([inventory])
        hosts = view.hosts(group)
        if not hosts:
            raise EnvLockError(f"the inventory {inventory} has no hosts in group {group}")
        per_host = {h: view.values(h, group=group) for h in hosts}
        raw = {key: one_value(key, {h: get(key) for h, get in per_host.items()},
                              why="the environment is one for the whole cluster")
               for key in (*(f"mlx_env_{k}" for k in DECLARATION_KEYS), "mlx_env_lock_file", "mlx_fleet_models")}
    except (InventoryViewError, SettingDiffers) as exc:
        raise EnvLockError(str(exc)) from None
    return raw, str(raw.pop("mlx_env_lock_file"))


def declaration_from(raw: dict, overrides: dict) -> dict:
    """The declaration from mlx_env_* variables, with the command line's overrides."""
    raw = dict(raw, **{f"mlx_env_{k}": v for k, v in overrides.items() if v is not None})
    return normalize_declaration({k: raw.get(f"mlx_env_{k}") for k in DECLARATION_KEYS})

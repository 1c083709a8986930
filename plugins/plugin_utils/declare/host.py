"""What the inventory declares for one Mac: its variables over the roles' defaults, as the roles see them.

The audit and the run record compare each Mac with what converging it would make of it. That is
the inventory's value of each role variable where it sets one, else the role's default, and the
wired limit the macos_node module derives from them (module_utils/macos_settings.wired_limit_mb), templated
with the host's variables
exactly as Ansible templates them in the role. The roles' files are read from the collection
(roles/*/defaults/main.yml, roles/*/vars/main.yml); the templating is Ansible's, passed in.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Mapping

import yaml

from ansible.template import trust_as_template

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_settings import wired_limit_mb
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import CablePlanError, parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import ROLES
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import DECLARATION_KEYS

AUDITED_ROLES = ("macos_node", "mlx_env", "mlx_fabric")


@lru_cache(maxsize=None)
def role_files(role: str) -> tuple[dict, dict]:
    """(defaults, vars) of one of the collection's roles."""
    def load(kind: str) -> dict:
        path = ROLES / role / kind / "main.yml"
        return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    return load("defaults"), load("vars")


Template = Callable[[object, Mapping, str], object]  # (value, variables, role or "") -> templated value


def trusted(value):
    """The roles' own values (read from their YAML files) as Ansible trusts its roles' values."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


def resolver(host_vars: Mapping, template: Template, trust: Callable[[object], object] = trusted) -> Callable:
    """get(name, default=None): the value of NAME a play running the roles sees for the host whose variables
    are HOST_VARS (the inventory's over the roles' defaults, role vars over both), templated. The one
    "inventory over role defaults" (mlx_fleet.inventory_view gives it to readers outside a play)."""
    layers = {}
    for role in AUDITED_ROLES:
        defaults, role_vars = role_files(role)
        for key, value in defaults.items():
            if key not in host_vars:
                layers[key] = (trust(value), role)
        for key, value in role_vars.items():
            layers[key] = (trust(value), role)  # role vars win over the inventory, as in a play
    variables = dict(host_vars)
    variables.update((key, value) for key, (value, dummy) in layers.items())

    def get(name: str, default=None):
        if name not in variables:
            return default
        value, role = layers.get(name, (variables[name], ""))
        return template(value, variables, role)

    return get


def node_paths(host_vars: Mapping, template: Template, trust: Callable[[object], object] = trusted) -> dict:
    """Where node_state looks on the Mac: the environment, the hostfiles, the wired-limit LaunchDaemon."""
    return _paths(resolver(host_vars, template, trust))


def _paths(get: Callable) -> dict:
    return {"env_path": get("mlx_env_path"), "hostfile_dir": get("mlx_fabric_hostfile_dir"),
            "wired_limit_label": get("macos_node_wired_limit_label")}


def _wired_limit(get, host_vars: Mapping) -> int:
    """The limit macos_node sets: the same rule, from the memory the Mac reported; 0 when it cannot tell."""
    memory = (host_vars.get("mlx_fleet_macos") or {}).get("memory_bytes") or 0
    try:
        return wired_limit_mb(int(get("macos_node_wired_limit_mb") or 0),
                              float(get("macos_node_wired_limit_fraction") or 0), memory)
    except ValueError:
        return 0


def _cables(entries) -> dict:
    """mlx_fleet_cables read once, here: ``cables``, each cable as its ends (ports.Cable.ports; None when
    the inventory has no plan), and ``cable_problems``, a line for each entry that is not a cable."""
    if entries is None:
        return {"cables": None, "cable_problems": []}
    cables, problems = [], []
    for entry in entries if isinstance(entries, list) else []:
        try:
            cables.append(parse_cable(entry).ports)
        except CablePlanError as exc:
            problems.append(f"mlx_fleet_cables: {exc}")
    if not isinstance(entries, list):
        problems.append("mlx_fleet_cables: must be a list of 'host:port -- host:port'")
    return {"cables": cables, "cable_problems": problems}


def declared_state(host_vars: Mapping, template: Template, trust: Callable[[object], object] = trusted) -> dict:
    """The declared state of the Mac whose variables are HOST_VARS (inventory, facts, magic variables).

    template is Ansible's templating; trust marks the roles' own values as templates (Ansible
    templates only trusted strings). A fractional wired limit needs the fact mlx_fleet_macos.
    """
    get = resolver(host_vars, template, trust)
    return dict(
        _paths(get),
        model=get("mlx_fleet_model"),
        min_macos=str(get("mlx_fleet_min_macos", defaults.MIN_MACOS)),
        backend=get("mlx_fleet_backend", defaults.BACKEND),
        **_cables(get("mlx_fleet_cables")),
        ip_pool=get("mlx_fleet_ip_pool", defaults.IP_POOL),
        envs=list(get("mlx_fleet_envs", []) or []),
        output_dir=get("mlx_fabric_output_dir"),
        power_settings=dict(get("macos_node_power_settings") or {}, **(get("macos_node_power_extra_settings") or {})),
        computer_name=get("macos_node_computer_name"),
        local_host_name=get("macos_node_local_host_name"),
        wired_limit_mb=_wired_limit(get, host_vars),
        env_store=get("mlx_env_store"),
        python_interpreter=get("mlx_env_python_interpreter") or "",
        lock_file=get("mlx_env_lock_file"),
        declaration={key: get(f"mlx_env_{key}") for key in DECLARATION_KEYS},
        bridge=get("mlx_fabric_bridge"),
        automatic_macos_updates=get("macos_node_automatic_macos_updates"),
    )

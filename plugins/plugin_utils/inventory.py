"""Inventory checks made on the controller before any Mac is touched.

Each problem is one line naming the host or variable, what is wrong and the fix, so a
user can correct the inventory without reading a traceback.
"""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cableplan import CablePlanError, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_backend import BACKENDS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import MODELS

DEFAULT_IP_POOL = "192.168.0.0/16"
# Inventory variables that hold a version: 26.2, 3.12, 0.32.4 (two or three numeric parts).
VERSION_VARS = (
    "mlx_fleet_min_macos", "mlx_env_python_version", "mlx_env_uv_version",
    "mlx_env_mlx_version", "mlx_env_mlx_lm_version",
)
_VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")


def version_tuple(text: str) -> tuple[int, ...]:
    """(26, 2) from "26.2"; tolerant of suffixes a Mac may print ("26.2 beta")."""
    return tuple(int(part) for part in re.findall(r"\d+", str(text or "")))


def check_inventory(hosts: dict[str, dict], group_vars: dict) -> list[str]:
    """Problems with the cluster as declared.

    ``hosts`` maps each host in the cluster group to its variables (the merged host and
    group variables Ansible gives it); ``group_vars`` are the cluster-wide values, read from
    the first host when the caller has no better source.
    """
    problems: list[str] = []
    if not hosts:
        return ["the group has no hosts; list your Macs under mlx_cluster"]
    problems += _duplicate_addresses(hosts)
    for name, hv in hosts.items():
        model = hv.get("mlx_fleet_model")
        if model is not None and model not in MODELS:
            problems.append(f"{name}: unknown model {model!r} in mlx_fleet_model; use one of {', '.join(MODELS)}")
    backend = group_vars.get("mlx_fleet_backend", "auto")
    if backend not in BACKENDS:
        problems.append(f"mlx_fleet_backend: unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    for var in VERSION_VARS:
        value = group_vars.get(var)
        if value is not None and not _VERSION_RE.match(str(value)):
            problems.append(f"{var}: malformed version {value!r}; write it like 26.2 or 0.32.4 (quoted in YAML)")
    problems += _cable_problems(hosts, group_vars.get("mlx_fleet_cables") or [])
    problems += _pool_problems(hosts, group_vars)
    return problems


def _address(name: str, hv: dict) -> str:
    return str(hv.get("ansible_host") or name).lower().rstrip(".")


def _duplicate_addresses(hosts: dict[str, dict]) -> list[str]:
    by_address: dict[str, list[str]] = defaultdict(list)
    for name, hv in hosts.items():
        by_address[_address(name, hv)].append(name)
    return [
        f"{' and '.join(names)}: the same address {address} twice; each Mac needs its own ansible_host"
        for address, names in by_address.items() if len(names) > 1
    ]


def _cable_problems(hosts: dict[str, dict], cables) -> list[str]:
    if not isinstance(cables, list):
        return ["mlx_fleet_cables: must be a list of 'host:port -- host:port'"]
    # A host without a declared model still gets the unknown-host and same-port checks.
    most_ports = max(m.port_count for m in MODELS.values())
    counts = {
        name: MODELS[hv["mlx_fleet_model"]].port_count if hv.get("mlx_fleet_model") in MODELS else most_ports
        for name, hv in hosts.items()
    }
    problems = []
    checked: list[str] = []
    for cable in cables:
        try:
            parse_cables(checked + [cable], counts)
            checked.append(cable)
        except CablePlanError as exc:
            problems.append(f"mlx_fleet_cables: {exc}")
    return problems


def _pool_problems(hosts: dict[str, dict], group_vars: dict) -> list[str]:
    pool_text = group_vars.get("mlx_fleet_ip_pool", DEFAULT_IP_POOL)
    try:
        pool = ipaddress.ip_network(str(pool_text))
    except ValueError:
        return [f"mlx_fleet_ip_pool: {pool_text!r} is not an IPv4 network like 192.168.0.0/16"]
    if pool.version != 4 or pool.prefixlen > 30:
        return [f"mlx_fleet_ip_pool: {pool} must be an IPv4 network of at least 4 addresses (/30)"]
    problems = []
    management = group_vars.get("mlx_fleet_management_network")
    if management:
        try:
            net = ipaddress.ip_network(str(management), strict=False)
        except ValueError:
            return [f"mlx_fleet_management_network: {management!r} is not a network like 10.0.1.0/24"]
        if net.overlaps(pool):
            problems.append(f"mlx_fleet_ip_pool: {pool} overlaps the management network {net}; "
                            "pick a pool the Macs do not already use")
    for name, hv in hosts.items():
        try:
            address = ipaddress.ip_address(str(hv.get("ansible_host", "")))
        except ValueError:
            continue  # a name: checked against the real address in preflight
        if address in pool:
            problems.append(overlap_message(name, str(address), str(pool)))
    return problems


def overlap_message(host: str, address: str, pool: str) -> str:
    return (f"{host}: management address {address} is inside mlx_fleet_ip_pool {pool}; "
            "pick a pool the Macs do not already use")

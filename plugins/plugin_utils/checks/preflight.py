"""Whether a Mac, as macos_facts read it, can join the cluster: judged on the controller."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.controller_networks import controller_networks
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge.fabric import planned_network
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import read_model, read_pool
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.addresses import port_arguments
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.inventory_checks import choose_pool, overlap_problem
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.versions import version_tuple
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.management import lockout_problems

# What a wired GPU limit must leave to macOS itself.
MACOS_RESERVE_MB = 8192


def node_problems(host: str, facts: dict, host_vars: dict, *, become_password: bool,
                  pool: str | None = None) -> list[Finding]:
    """What keeps this Mac out of the cluster, as data: what was found, what was expected, the exact fix.
    pool: the cables' address pool (cluster_pool); an explicit mlx_fleet_ip_pool in host_vars when not given."""
    problems = []
    mac = f"{facts.get('model_name')} ({facts.get('model_identifier')})"

    def problem(kind: str, found: str, expected: str, fix: str) -> None:
        problems.append(Finding(kind, (host,), found, expected, fix))

    if not facts.get("apple_silicon"):
        problem("apple-silicon", f"{mac} is not Apple Silicon", "an M-series Mac",
                "MLX distributed needs an M-series Mac: remove it from mlx_cluster")
    minimum = str(host_vars.get("mlx_fleet_min_macos", defaults.MIN_MACOS))
    if version_tuple(facts["product_version"]) < version_tuple(minimum):
        problem("macos", f"macOS {facts['product_version']} ({facts['build_version']}) is older than "
                f"mlx_fleet_min_macos {minimum}", f"macOS {minimum} or later",
                "update it in System Settings > General > Software Update")
    user = facts.get("user")
    if facts.get("sudo") == "none":
        problem("sudo", f"{user} is not an administrator, so it cannot sudo", "an administrator",
                "connect as an admin account (ansible_user) or tick 'Allow this user to administer this computer' "
                "in Users & Groups")
    elif facts.get("sudo") == "password" and not become_password:
        problem("sudo", f"sudo asks {user} for a password", "the sudo password given",
                "run with --ask-become-pass (-K) or set ansible_become_password in a vault")
    limit = int(host_vars.get("macos_node_wired_limit_mb") or 0)
    memory = facts.get("memory_mb")
    if limit > 0 and memory and memory - limit < MACOS_RESERVE_MB:
        problem("wired-limit", f"macos_node_wired_limit_mb {limit} leaves macOS {memory - limit} MB of this Mac's "
                f"{memory} MB", f"at least {MACOS_RESERVE_MB} MB for macOS",
                f"keep at least {MACOS_RESERVE_MB} MB for macOS: use at most {max(memory - MACOS_RESERVE_MB, 0)}")
    pool = pool or host_vars.get("mlx_fleet_ip_pool")
    address = facts.get("management_address")
    if pool and address and ipaddress.ip_address(address) in ipaddress.ip_network(str(pool)):
        problems.append(overlap_problem(host, address, str(pool)))
    return problems


def cluster_pool(host_vars: dict, output_dir: Path | None, macos: dict[str, dict]) -> tuple[str, str | None]:
    """Where each cable's /30 comes from, and a line for the summary when the range was chosen now:
    mlx_fleet_ip_pool when the inventory sets it, else choose_pool's pick from what the controller and
    the Macs (macos: host -> mlx_fleet_macos) use and what the cluster model in output_dir recorded.
    host_vars: the cluster's variables (mlx_fleet_ip_pool, mlx_fleet_management_network)."""
    if host_vars.get("mlx_fleet_ip_pool") is not None:
        return str(host_vars["mlx_fleet_ip_pool"]), None
    return choose_pool(read_pool(output_dir) if output_dir else None, controller_networks(),
                       [facts.get("management_address") for facts in macos.values()],
                       host_vars.get("mlx_fleet_management_network"))


def same_macs(read: dict[str, dict]) -> dict[tuple[str, ...], str]:
    """Hosts that are one Mac reached under several names (one serial number), in inventory order,
    each group with its line. read: host -> its mlx_fleet_macos."""
    by_serial: dict[str, list[str]] = defaultdict(list)
    for host, facts in read.items():
        if facts.get("serial_number"):
            by_serial[facts["serial_number"]].append(host)
    return {tuple(hosts): f"{' and '.join(hosts)}: the same Mac (serial number {serial}) is listed "
                          f"{'twice' if len(hosts) == 2 else f'{len(hosts)} times'}; keep one of them in mlx_cluster"
            for serial, hosts in by_serial.items() if len(hosts) > 1}


def network_problems(host: str, facts: dict, thunderbolt: dict[str, dict], bridge: str, pool: str,
                     output_dir: Path | None) -> list[str]:
    """Before any Mac changes, the fabric's plan as the preflight can judge it: the pool against the cables
    found (said on the first Mac read only: it is the cluster's) and the lockout check
    (plugin_utils.fabric.management) for this Mac.

    thunderbolt: every Mac's mlx_fleet_thunderbolt, read in the same call as facts (this Mac's
    mlx_fleet_macos); bridge: what the fabric will do to the Thunderbolt Bridge; pool: cluster_pool's;
    output_dir: where the cluster model keeps each cable's /30, so the line names the address the
    fabric will give.
    """
    problems = []
    try:
        previous = read_model(output_dir) if output_dir else None
        network = planned_network(thunderbolt, ip_pool=pool, previous=previous)
    except ValueError as exc:  # a pool too small for the cables, or a damaged ledger; the bridge is still judged
        problems += [str(exc)] if host == next(iter(thunderbolt)) else []
        network = {}
    return problems + lockout_problems({host: facts}, thunderbolt, port_arguments(network), bridge)

"""The run record's facts from the check's own ssh round (mlx_fleet.run.checks), not from the audit playbook:
the Macs' facts the record takes (plugin_utils.checks.run_record) parsed on the controller from the same reads
the node_state module parses on the Mac (module_utils.node_facts, the environment's probe)."""

from __future__ import annotations

import json

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as parsers
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import node_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import output_of
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.run_record import record_facts
from mlx_fleet.run.checks import ENVIRONMENT_READ, Check


def _macos(results: dict) -> dict:
    """The part of mlx_fleet_macos the record and the cables' judgement read (node_facts.macos's fields)."""
    module = node_facts.OutsideModule()
    sw = parsers.parse_sw_vers(output_of(module, results, "sw_vers"))
    rc, out, err = results["sysctl"]  # an unknown name: exit 1, the others still printed
    sysctl = parsers.parse_sysctl(out + err)
    hardware = parsers.parse_hardware_json(output_of(module, results, "hardware"))
    return {"product_version": sw["product_version"], "build_version": sw["build_version"],
            **{key: hardware[key] for key in ("model_identifier", "model_name", "chip", "memory_bytes", "serial_number")},
            "apple_silicon": sysctl.get("hw.optional.arm64") == "1",
            "wired_limit_mb": int(sysctl.get("iogpu.wired_limit_mb") or 0)}


def _environment(reads: dict, env_path: str) -> dict:
    """The environment as node_state's mlx_fleet_node.environment gives it, for the record's fields."""
    env = {"path": env_path, "exists": False, "python": None, "installed": {}, "records": {}}
    rc, text = reads.get(ENVIRONMENT_READ, (1, ""))
    try:
        info = json.loads(text.strip().splitlines()[-1]) if rc == 0 else None
    except (ValueError, IndexError):
        info = None
    if isinstance(info, dict):
        env.update(exists=True, installed=info["installed"], records=info.get("records", {}),
                   python={"version": ".".join(str(v) for v in info["version"]), "executable": info["executable"]})
    return env


def observed(reads: dict, env_path: str) -> dict:
    """One Mac's facts as the audit's read gives them, as far as the record needs them; ValueError when a read
    the record needs is missing or in no known wording."""
    results = {name: (rc, text, "") for name, (rc, text) in reads.items()}
    module = node_facts.OutsideModule()
    try:
        macos = _macos(results)
        thunderbolt = node_facts.thunderbolt(module, results)
    except KeyError as exc:
        raise ValueError(f"{exc} was not read") from None
    return {"mlx_fleet_macos": macos, "mlx_fleet_thunderbolt": thunderbolt,
            "mlx_fleet_node": {"wired_limit": {"now_mb": macos["wired_limit_mb"]},
                               "environment": _environment(reads, env_path)}}


def record_from(check: Check, hostfile_text: str | None) -> tuple[dict, list[str]]:
    """(the record's facts, the Macs not recorded: their reads unusable) from the check's reads."""
    found, not_recorded = {}, []
    for host in check.hosts:
        try:
            found[host] = observed(check.reads.get(host) or {}, check.env_path)
        except ValueError:
            not_recorded.append(host)
    macs = [host for host in check.hosts if host in found]
    return record_facts(macs, found, {h: m for h, m in check.models.items() if m}, hostfile_text), not_recorded

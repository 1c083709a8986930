# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Compare every Mac with the declared state and with the others; write audit.json and audit.html
(logic: plugin_utils.checks.audit, plugin_utils.render.audit_report, plugin_utils.checks.run_record)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import audit_report
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import read_model
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction, refusal
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import SettingDiffers, one_value
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.audit import HOSTFILES, run_audit
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_file import load_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.run_record import record_facts
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import sha256_file

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "output_dir": {"type": "path"},
    "inventory": {"type": "str"},
    "models": {"type": "dict"},  # the declared models' pinned files (the models_manifest task's result)
}
FACTS = ("mlx_fleet_macos", "mlx_fleet_thunderbolt", "mlx_fleet_node")
MODEL_FACTS = ("mlx_fleet_model_files",)  # read only when models are declared


def controller_state(output_dir: Path, lock_file: str) -> dict:
    """What the controller keeps: hostfiles, the cluster model, RDMA ledger, the lock."""
    try:
        lock = (load_lock(lock_file)[0], None)
    except EnvLockError as exc:
        lock = (None, str(exc))
    try:
        state = {"model": read_model(output_dir),
                 "rdma_ledger": rdma.read_ledger(output_dir / rdma.LEDGER_FILE)}
    except ValueError as exc:
        raise AnsibleActionFail(str(exc)) from None
    state["hostfiles"] = {name: sha256_file(str(output_dir / name)) if (output_dir / name).is_file() else None
                          for name in HOSTFILES}
    try:
        state["hostfile_envs"] = json.loads((output_dir / HOSTFILE).read_text()).get("envs", [])
    except (OSError, ValueError, AttributeError):
        state["hostfile_envs"] = None  # none yet, or unreadable: the hostfiles check says so
    state["lock"] = lock
    return state


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        view = self.view(task_vars, args["group"])
        names, read = view.names, view.having(("mlx_fleet_node", "mlx_fleet_declared"))
        if not read.hosts:
            raise AnsibleActionFail(f"no Mac of {args['group']} could be read: see the errors above")
        observed = {h.name: {fact: h.variables[fact] for fact in FACTS + MODEL_FACTS if fact in h.variables}
                    for h in read.hosts}
        declared = read.facts("mlx_fleet_declared")
        try:  # where the controller keeps its files: one place for the whole cluster
            kept = {key: one_value(key, {n: d[key] for n, d in declared.items()}) for key in ("output_dir", "lock_file")}
        except SettingDiffers as exc:
            raise refusal([str(exc)]) from None
        output_dir = Path(args["output_dir"] or kept["output_dir"])
        inventory = args["inventory"] or read.inventory_file
        controller = dict(controller_state(output_dir, kept["lock_file"]), models=args["models"])
        audit = run_audit(names, observed, declared, controller, inventory=inventory,
                          cli=fixes.uses_cli(task_vars))
        generated = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            report, json_path, html_path = audit_report.write(output_dir, audit, generated=generated,
                                                              inventory=inventory)
        except UnsafeFolder as exc:
            raise AnsibleActionFail(f"audit.json not written: {exc}") from None
        hostfile = output_dir / HOSTFILE
        result.update(
            changed=False,  # a report on the controller; no Mac changed
            report=report,
            json=str(json_path),
            html=str(html_path),
            record=record_facts(audit.macs, observed, {n: d["model"] for n, d in declared.items() if d.get("model")},
                                hostfile.read_text() if hostfile.is_file() else None, args["models"]),
            msg="\n".join(audit_report.summary_lines(report)),
        )
        return result

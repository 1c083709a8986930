# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Plan a macOS update of the cluster from every Mac's os_update_facts: the target, the order, the record
to resume from (logic: plugin_utils.checks.os_update). Refuses, changing nothing, while an MLX job runs."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import CLUSTER_STEP, ClusterAction, refusal

FACT = "mlx_fleet_os_update"


class ActionModule(ClusterAction):
    ARGS = {
        "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
        "output_dir": {"type": "path", "required": True},
        "to": {"type": "str"},
        "canary": {"type": "str"},
        "check": {"type": "bool", "default": False},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        view = self.require(self.view(task_vars, args["group"]), (FACT,))
        names, macs = view.names, view.facts(FACT)
        path = Path(args["output_dir"]) / os_update.RECORD_FILE
        try:
            previous = os_update.read_record(path)
            plan = os_update.plan(names, macs, wanted=args["to"] or None, canary=args["canary"] or None,
                                  record=previous)
        except os_update.Refused as exc:
            raise refusal(exc.lines, bad_input=exc.lines if exc.bad_input else [],
                          result={CLUSTER_STEP: True}) from None
        if not args["check"] and plan["order"]:
            Path(args["output_dir"]).mkdir(parents=True, exist_ok=True)
            os_update.write_record(path, os_update.new_record(plan, previous))
        result.update(changed=False, plan=plan, msg="\n".join(os_update.plan_lines(plan)),
                      ansible_facts={"mlx_fleet_os_update_plan": plan})
        return result

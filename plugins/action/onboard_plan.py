# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""A new Mac joining the cluster: checked, the cables to add, the visit sheet (logic: plugin_utils.steps.onboard)."""

from __future__ import annotations

import dataclasses

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import onboard as onboard_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "host": {"type": "str", "required": True},
    "output_dir": {"type": "path", "required": True},
    "inventory": {"type": "str", "required": True},
    "afterwards": {"type": "list", "elements": "str", "default": []},
}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        view = self.require(self.view(task_vars, args["group"], onboard_step.SETTINGS), onboard_step.FACTS)
        run = dataclasses.replace(self.step_run(task_vars, args["output_dir"]), inventory=args["inventory"])
        with self.translated(run, result):
            result.update(onboard_step.plan(view, args["host"], run, list(args["afterwards"])))
        return result

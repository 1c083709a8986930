# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""RDMA readiness of every Mac, the Recovery checklist and the ledger (logic: plugin_utils.steps.rdma)."""

from __future__ import annotations

import dataclasses

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import rdma as rdma_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "output_dir": {"type": "path", "required": True},
    "inventory": {"type": "str"},
}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        view = self.view(task_vars, args["group"], rdma_step.SETTINGS)
        if not view.dropped(rdma_step.FACTS):
            self.require(view, rdma_step.FACTS)
        run = dataclasses.replace(self.step_run(task_vars, args["output_dir"]),
                                  inventory=args["inventory"] or view.inventory_file)
        with self.translated(run, result):
            result.update(rdma_step.readiness(view, run))
        self._display.display(result["msg"])  # where each Mac stands: for a person, at every verbosity
        return result

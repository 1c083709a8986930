# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Join every Mac's Thunderbolt facts into the fabric: judged once per converge; the result carries what
mlx_fleet.cluster.fabric_publish writes once the network step came through (logic: plugin_utils.steps.fabric)."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import fabric as fabric_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "output_dir": {"type": "path", "required": True},
    "write": {"type": "bool", "default": True},
    "bridge": {"type": "str", "choices": ["disabled", "enabled", "unchanged"]},
}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        view = self.view(task_vars, args["group"], fabric_step.SETTINGS)
        if not view.dropped(("mlx_fleet_thunderbolt",)):
            self.require(view, ("mlx_fleet_thunderbolt",))
        run = self.step_run(task_vars, args["output_dir"])
        with self.translated(run, result):
            result.update(fabric_step.judge(
                view, run, bridge=args["bridge"], hostfiles=args["write"],
                # Where the mlx_fabric role puts the hostfiles on every Mac (its variable, when run from the role).
                hostfile_dir=self._templar.template(task_vars.get("mlx_fabric_hostfile_dir"))))
        return result

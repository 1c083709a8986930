# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Publish the fabric judged before the network step: the write guard on the ports each Mac read back, then
the hostfiles, the cluster model and the picture as one generation (logic: plugin_utils.steps.fabric)."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import fabric as fabric_step
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "output_dir": {"type": "path", "required": True},
    "fabric": {"type": "dict", "required": True},
    "network": {"type": "dict", "default": {}},
    "held": {"type": "str", "default": ""},
}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        view = self.view(task_vars, args["group"])
        if "publication" in args["fabric"] and not view.dropped(("mlx_fleet_thunderbolt",)):
            self.require(view, ("mlx_fleet_thunderbolt",))
        run = self.step_run(task_vars, args["output_dir"])
        with self.translated(run, result):
            result.update(fabric_step.publish(view, run, args["fabric"], args["network"], args["held"]))
        return result

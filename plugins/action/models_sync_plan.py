# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Which Mac pulls which model file from where, checked for space (logic: plugin_utils.steps.models)."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step


class ActionModule(ClusterAction):
    ARGS = {
        "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
        "output_dir": {"type": "path", "required": True},
        "expected": {"type": "dict", "required": True},
        "names": {"type": "list", "elements": "str", "default": []},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        return self.stepped(result, task_vars, models_step.sync_plan, args["expected"], args["names"],
                            settings=models_step.SYNC_SETTINGS, show=True)

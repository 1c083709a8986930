# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""What every Mac's part of the models sync did (logic: plugin_utils.steps.models)."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step


class ActionModule(ClusterAction):
    ARGS = {
        "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
        "output_dir": {"type": "path", "required": True},
        "plan": {"type": "dict", "required": True},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        return self.stepped(result, task_vars, models_step.sync_report, self.arguments()["plan"], show=True)

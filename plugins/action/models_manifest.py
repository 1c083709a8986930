# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""The declared models' pinned manifests, for every Mac (logic: plugin_utils.steps.models)."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps import models as models_step


class ActionModule(ClusterAction):
    ARGS = {
        "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
        "output_dir": {"type": "path", "required": True},
        "lock_file": {"type": "path"},
        "pinned_only": {"type": "bool", "default": False},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        return self.stepped(result, task_vars, models_step.manifests, args["lock_file"], args["pinned_only"],
                            settings=models_step.SETTINGS)

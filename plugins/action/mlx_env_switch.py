# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Node side of the environment switch: nothing when mlx_env built no new venv, else the module."""

from __future__ import annotations

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        if not self._task.args.get("built"):
            # A converged Mac: no module call, no connection.
            result.update(changed=False, msg="no new environment to switch to; nothing ran on the node")
            return result
        result.update(self._execute_module(module_name="mlx_fleet.cluster.mlx_env_switch",
                                           module_args=dict(self._task.args), task_vars=task_vars))
        return result

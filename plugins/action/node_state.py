# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Read a whole Mac with the node_state module, where the inventory and the roles' defaults say to look,
and set beside its facts what the inventory declares for that Mac (plugin_utils.declare.host)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import ROLES
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.host import declared_state, node_paths


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("env_path", "hostfile_dir", "hostfiles", "wired_limit_label", "verify_files", "models",
                             "models_deep", "hf_cache", "models_dir"))

    def _template(self, value, variables, role):
        if role:
            variables = dict(variables, role_path=str(ROLES / role))
        return self._templar.copy_with_new_env(available_variables=variables).template(value)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        module_args = dict(node_paths(task_vars, self._template), **self._task.args)
        result.update(self._execute_module(module_name="mlx_fleet.cluster.node_state", module_args=module_args,
                                           task_vars=task_vars))
        if result.get("failed") or result.get("skipped"):
            return result
        facts = result["ansible_facts"]
        # A fractional wired limit is a fraction of the memory this very read found.
        facts["mlx_fleet_declared"] = declared_state(dict(task_vars, **facts), self._template)
        return result

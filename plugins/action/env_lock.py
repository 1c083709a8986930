# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Resolve the declared MLX environment into its lock on the controller (logic: plugin_utils.env.lock_resolve) and pin
the declared Hub models into theirs (plugin_utils.models.hub_pin); the collection's way to what `mlx-fleet lock`
does."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError, normalize_declaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_resolve import find_uv, summary_line, update_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.package_index import PYPI_SIMPLE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import hub_pin
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    ModelsLockError, models_lock_problem)


class ActionModule(ClusterAction):
    ARGS = {
        "lock_file": {"type": "path", "required": True},
        "declaration": {"type": "dict", "required": True},
        "index": {"type": "str", "default": PYPI_SIMPLE},
        "uv": {"type": "path"},
        "models_only": {"type": "bool", "default": False},
        "update_models": {"type": "list", "elements": "str", "default": []},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        declared = self.view(task_vars, CLUSTER_GROUP, {"mlx_fleet_models": None}).setting("mlx_fleet_models")
        write = not self._task.check_mode
        try:
            models = hub_pin.update_models_lock(declared, args["lock_file"], args["update_models"], write=write)
            lines = [hub_pin.summary_line(models)]
            if not args["models_only"]:
                decl = normalize_declaration(args["declaration"])
                found = update_lock(decl, args["lock_file"], find_uv(args["uv"]), index=args["index"], write=write)
                result.update(found)
                lines.insert(0, summary_line(decl, found))
        except EnvLockError as exc:
            raise AnsibleActionFail(str(exc)) from None
        except ModelsLockError as exc:
            problem = models_lock_problem(exc, fixes.inventory_named(task_vars), cli=fixes.uses_cli(task_vars))
            raise AnsibleActionFail(problem) from None
        result.update(models=models, msg="; ".join(lines))
        result["changed"] = bool(result.get("changed")) or models["changed"]
        return result

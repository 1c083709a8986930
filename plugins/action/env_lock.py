# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Resolve the declared MLX environment into its lock on the controller (logic: plugin_utils.env.lock_resolve);
the collection's way to what `mlx-fleet lock` does."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError, normalize_declaration
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.lock_resolve import find_uv, summary_line, update_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.package_index import PYPI_SIMPLE


class ActionModule(ClusterAction):
    ARGS = {
        "lock_file": {"type": "path", "required": True},
        "declaration": {"type": "dict", "required": True},
        "index": {"type": "str", "default": PYPI_SIMPLE},
        "uv": {"type": "path"},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        try:
            decl = normalize_declaration(args["declaration"])
            found = update_lock(decl, args["lock_file"], find_uv(args["uv"]), index=args["index"],
                                write=not self._task.check_mode)
        except EnvLockError as exc:
            raise AnsibleActionFail(str(exc)) from None
        result.update(found, msg=summary_line(decl, found))
        return result

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Controller side of mlx_env: check the lock, plan every node, download once; see plugin_utils.env.artifacts."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.env.artifacts import plan_run
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment import EnvLockError

ARGS = {
    "lock_file": {"type": "path", "required": True},
    "declaration": {"type": "dict", "required": True},
    "python_interpreter": {"type": "str", "default": ""},
    "store": {"type": "str", "required": True},
    "cache_dir": {"type": "path", "required": True},
    "python_mirror": {"type": "str", "default": ""},
    "states": {"type": "dict", "required": True},
}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        facts = {}
        for host, state in args["states"].items():
            if not state or state.get("failed") or state.get("skipped"):
                continue
            facts[host] = state
        try:
            plan = plan_run(args["lock_file"], args["declaration"], args["python_interpreter"], args["store"],
                            args["cache_dir"], facts, python_mirror=args["python_mirror"],
                            bundles=not self._task.check_mode)
        except EnvLockError as exc:
            problem = fixes.lock_problem(exc, fixes.inventory_named(task_vars), cli=fixes.uses_cli(task_vars))
            raise AnsibleActionFail(f"mlx_env: {problem}") from None
        result.update(plan)
        # Only the controller's cache changes here; nodes change in later tasks.
        result["changed"] = plan["downloads"] > 0
        result["msg"] = (f"{len(facts)} nodes planned; {plan['artifacts']} artifacts needed, "
                         f"{plan['downloads']} downloaded, {plan['cache_hits']} from the cache")
        return result

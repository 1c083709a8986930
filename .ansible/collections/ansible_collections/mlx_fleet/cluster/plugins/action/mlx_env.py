# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Node side of mlx_env: nothing when the plan says the node matches, else its bundle and the module."""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False  # the tmp folder is made only when a bundle goes

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        plan = args.get("plan") or {}
        if plan.get("matches"):
            # The facts already showed the locked set, a working MLX and the same fingerprint.
            result.update(changed=False, actions=[], changes=[], proof=None,
                          msg="already the locked environment; nothing ran on the node",
                          ansible_facts={"mlx_env_fingerprint": plan.get("fingerprint")})
            return result
        bundle = plan.get("bundle")
        try:
            if bundle and not self._task.check_mode:
                if not self._connection._shell.tmpdir:
                    self._make_tmp_path()
                remote = self._connection._shell.join_path(self._connection._shell.tmpdir, os.path.basename(bundle["src"]))
                self._transfer_file(bundle["src"], remote)
                self._fixup_perms2((self._connection._shell.tmpdir, remote))
                args["plan"] = dict(plan, bundle=dict(bundle, src=remote))
            result.update(self._execute_module(module_name="mlx_fleet.cluster.mlx_env", module_args=args,
                                               task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result

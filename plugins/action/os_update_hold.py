# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Whether an unfinished macOS update holds the cluster, from its record (logic: plugin_utils.checks.os_update);
keeps OUTPUT_DIR/hostfile.held as the record says. Controller only; the tasks after it mark the Macs."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction


class ActionModule(ClusterAction):
    ARGS = {
        "output_dir": {"type": "path", "required": True},
        "inventory": {"type": "str"},
        "starting": {"type": "bool", "default": False},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        inventory = args["inventory"] or "INVENTORY"
        line = os_update.hold_line(args["output_dir"], inventory, starting=args["starting"])
        if not self._play_context.check_mode:
            os_update.sync_held(args["output_dir"], inventory)
        result.update(changed=False, held=bool(line), line=line or "",
                      msg=line or "not held")
        if line and not args["starting"]:
            result["warnings"] = [line]
        return result

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Judge a Mac's mlx_fleet_macos facts on the controller; the rules live in plugin_utils.checks.preflight."""

from __future__ import annotations

from pathlib import Path

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction, refusal
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import MACOS, THUNDERBOLT, ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import mismatch
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.preflight import (
    cluster_pool, network_problems, node_problems, same_macs)

HOST_VARS = ("mlx_fleet_model", "mlx_fleet_min_macos", "mlx_fleet_ip_pool", "mlx_fleet_management_network",
             "macos_node_wired_limit_mb")


class ActionModule(ClusterAction):
    ARGS = {
        "bridge": {"type": "str", "choices": ["disabled", "enabled", "unchanged"]},
        "output_dir": {"type": "path"},
    }

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        facts = task_vars.get("mlx_fleet_macos")
        if facts is None:
            raise AnsibleActionFail("no mlx_fleet_macos facts: run mlx_fleet.cluster.macos_facts first")
        host = task_vars["inventory_hostname"]
        become_password = bool(self._play_context.become_pass or task_vars.get("ansible_become_password")
                               or task_vars.get("ansible_become_pass"))
        host_vars = {k: task_vars[k] for k in HOST_VARS if k in task_vars}
        # Every Mac of the play has been read by now (macos_facts ran on all of them first).
        read_view = ClusterView.play(task_vars).having((MACOS,))
        read = read_view.macos()
        output_dir = args["output_dir"] and Path(args["output_dir"])
        bad_input = [line for hosts, line in same_macs(read).items() if host in hosts]
        # A declared model that is not this Mac is an inventory mistake: bad input, like the same Mac twice.
        bad_input += [line for line in [mismatch(host, host_vars.get("mlx_fleet_model"), facts)] if line]
        try:
            pool, dummy = cluster_pool(host_vars, output_dir, read)
        except ValueError as exc:  # no private range is free here: the cluster's problem, said on its first Mac
            pool, bad_input = None, bad_input + ([str(exc)] if host == next(iter(read), host) else [])
        found = node_problems(host, facts, host_vars, become_password=become_password, pool=pool)
        problems = [p.line for p in found]
        if args["bridge"] is not None and pool is not None:
            thunderbolt = read_view.having((THUNDERBOLT,)).thunderbolt()
            if host in thunderbolt:
                bad_input += network_problems(host, facts, thunderbolt, args["bridge"], pool, output_dir)
        problems += bad_input
        if problems:
            raise refusal(problems, bad_input=bad_input,
                          result={"problems": problems, "findings": [p.to_dict() for p in found]})
        result.update(changed=False, msg=f"{host}: {facts['model_name']} ({facts['chip']}), macOS "
                                         f"{facts['product_version']} ({facts['build_version']}), sudo {facts['sudo']}")
        return result

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Controller-side inventory validation; the checks themselves live in plugin_utils.checks.inventory_checks."""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.utils.vars import load_extra_vars

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.glue.actions import ClusterAction, refusal
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import SettingDiffers
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.controller_networks import controller_networks
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.inventory_checks import VERSION_VARS, inventory_problems, labelled

CLUSTER_VARS = ("mlx_fleet_backend", "mlx_fleet_cables", "mlx_fleet_ip_pool", "mlx_fleet_management_network",
                "mlx_fleet_envs") + VERSION_VARS
HOST_VARS = ("ansible_host", "mlx_fleet_model", "mlx_fleet_location", "macos_node_local_host_name",
             "macos_node_wired_limit_label", "macos_node_wired_limit_fraction", "macos_node_wired_limit_mb")


class ActionModule(ClusterAction):
    ARGS = {"group": {"type": "str", "default": defaults.CLUSTER_GROUP}}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        group = self.arguments()["group"]
        view = self.view(task_vars, group)
        hosts = {h.name: h.known(HOST_VARS) for h in view.hosts}
        try:  # cluster-wide settings are group variables: every host sees the same value
            group_vars = view.known_settings(CLUSTER_VARS)
        except SettingDiffers as exc:
            raise refusal([str(exc)]) from None
        outside = tuple(h for h in task_vars["groups"].get("all", []) if h not in hosts)
        problems = inventory_problems(hosts, group_vars, controller_networks(), outside=outside, group=group)
        if problems:
            try:
                extra = load_extra_vars(self._loader)  # what -e gave, as ansible-playbook read it
            except AnsibleError:
                extra = {}
            raise refusal(labelled(problems, extra), result={"problems": [problem.line for problem in problems]})
        result.update(changed=False, hosts=len(hosts), msg=f"inventory of {len(hosts)} Macs in {group} is consistent")
        return result

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Controller-side inventory validation; the checks themselves live in plugin_utils.inventory."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import ClusterAction

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.inventory import check_inventory

CLUSTER_VARS = ("mlx_fleet_backend", "mlx_fleet_cables", "mlx_fleet_ip_pool", "mlx_fleet_management_network",
                "mlx_fleet_min_macos", "mlx_env_python_version", "mlx_env_uv_version", "mlx_env_mlx_version",
                "mlx_env_mlx_lm_version")
HOST_VARS = ("ansible_host", "mlx_fleet_model")


class ActionModule(ClusterAction):
    ARGS = {"group": {"type": "str", "default": "mlx_cluster"}}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        group = self.arguments()["group"]
        names, hostvars = self.cluster(task_vars, group)
        hosts = {name: {k: hostvars[name][k] for k in HOST_VARS if k in hostvars[name]} for name in names}
        # Cluster-wide settings are group variables: every host sees the same value.
        first = hostvars[names[0]] if names else {}
        group_vars = {k: first[k] for k in CLUSTER_VARS if k in first}
        problems = check_inventory(hosts, group_vars)
        if problems:
            raise AnsibleActionFail("inventory: " + "\ninventory: ".join(problems), result={"problems": problems})
        result.update(changed=False, hosts=len(hosts), msg=f"inventory of {len(hosts)} Macs in {group} is consistent")
        return result

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Publish the fabric judged before the network step: the write guard on the ports each Mac read back, then
the hostfiles, the cluster model and the picture as one generation (logic: plugin_utils.fabric, writeguard)."""

from __future__ import annotations

from pathlib import Path

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fabric as fab
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fixes, hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_addresses import port_arguments
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_discovery import discover
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import UnsafeFolder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.outputs import staged
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.runlock import LockBusy, run_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.writeguard import refusal

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "output_dir": {"type": "path", "required": True},
    "fabric": {"type": "dict", "required": True},
    "network": {"type": "dict", "default": {}},
    "held": {"type": "str", "default": ""},
}
# The fabric's result as the summary reads it: carried over, so this step's result is the fabric's last word.
CARRIED = ("backend", "reason", "errors", "cables", "findings", "changes", "addresses", "ip_pool", "ip_pool_note",
           "network", "configure_on", "hostfile", "hostfile_dir", "hostfiles")


class ActionModule(ClusterAction):
    ARGS = ARGS

    @staticmethod
    def on_macs(task_vars: dict, args: dict, names: list[str]) -> dict[str, dict | None]:
        """What each Mac holds in the hostfiles' folder, as its network step or its facts read it (None: unknown,
        so it is written)."""
        hostvars = task_vars["hostvars"]
        return {n: (args["network"].get(n) or {}).get("hostfiles") or hostvars[n].get("mlx_fleet_hostfiles")
                for n in names}

    def marks_to_write(self, task_vars: dict, args: dict) -> list[str]:
        """With no fabric to publish, the Macs still in the play whose hold mark differs: the hold beside the
        hostfiles is kept as the update's record says, the hostfiles staying as they are."""
        active = task_vars.get("ansible_play_hosts") or []
        names = [n for n in task_vars["groups"].get(args["group"], []) if n in active]
        return hostfile.macs_to_write({}, self.on_macs(task_vars, args, names), args["held"])

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        judged = args["fabric"]
        if "publication" not in judged:  # skipped (one Mac) or left alone (a Mac dropped out): nothing to publish
            result.update(changed=False, skipped=True, msg=judged.get("msg") or "no fabric to publish",
                          hostfiles={}, write_on=self.marks_to_write(task_vars, args))
            return result
        dropped = self.dropped(task_vars, args["group"], ("mlx_fleet_thunderbolt",))
        if dropped:
            msg = (f"the hostfiles stay as they were: {', '.join(dropped)} failed or did not answer earlier in this "
                   "run; fix that and run again")
            result.update(changed=False, dropped=dropped, msg=msg, warnings=[msg], hostfiles={},
                          write_on=self.marks_to_write(task_vars, args))
            return result
        names, hostvars = self.cluster(task_vars, args["group"], ("mlx_fleet_thunderbolt",))
        steps = {n: args["network"].get(n) or {} for n in names}
        # The ports each Mac's network step read back after configuring them (a Mac it skipped: as read before).
        facts = {n: (steps[n].get("ansible_facts") or {}).get("mlx_fleet_thunderbolt")
                 or hostvars[n]["mlx_fleet_thunderbolt"] for n in names}
        turned_off = fab.bridges_turned_off(steps)
        check = self._task.check_mode
        # A bridge the fabric held its warning for (the network step was to turn it off) that is still on; in
        # check mode nothing changed, and a bridge it would turn off is said as such (bridges_off).
        warnings = [c["message"] for c in judged.get("bridge_cautions", [])
                    if (facts[c["host"]].get("bridge") or {}).get("active") and not (check and c["host"] in turned_off)]
        for warning in warnings:
            self._display.warning(warning)
        result.update({key: judged.get(key) for key in CARRIED}, bridges_off=turned_off, warnings=warnings,
                      changed=False, write_on=hostfile.macs_to_write(
                          judged["hostfiles"], self.on_macs(task_vars, args, names), args["held"]))
        if check:
            result["msg"] = judged["reason"]
            return result
        publication = fab.Publication.from_dict(judged["publication"])
        # A bridge the network step turned off is no finding of the cluster it publishes.
        publication.model.findings = [f for f in publication.model.findings if not (
            f.kind == "bridge" and not (facts[f.hosts[0]].get("bridge") or {}).get("active"))]
        # The cabling as read back, with the addresses the fabric gave it: the guard compares it with the plan.
        cables = fab.cable_ends(discover(names, facts)[0])
        network = port_arguments(fab.planned_network(facts, ip_pool=judged["ip_pool"], previous=publication.model))
        inventory = fixes.inventory_named(task_vars)
        output_dir = Path(args["output_dir"])
        try:
            with run_lock(output_dir, f"ansible-playbook task '{self._task.get_name()}'"):
                stop = refusal(names, task_vars.get("ansible_play_hosts"), judged, cables, network, facts, inventory,
                               cli=fixes.uses_cli(task_vars))
                if stop:
                    raise AnsibleActionFail(stop, result=result)
                with staged(output_dir) as stage:
                    written = fab.write_outputs(stage, publication)
        except (LockBusy, UnsafeFolder) as exc:
            raise AnsibleActionFail(f"hostfiles not rewritten: {exc}") from None
        result["changed"] = written.changed
        result["msg"] = judged["reason"] + "".join(f"; {n}" for n in written.skipped)
        return result

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Join every Mac's Thunderbolt facts into the fabric: judged once per converge; the result carries what
mlx_fleet.cluster.fabric_publish writes once the network step came through (logic: plugin_utils.fabric)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fabric as fab
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import actions
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cluster_model import read_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_addresses import port_arguments, to_configure
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import mismatch
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.management import lockout_problems, management_interface
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.outputs import staged
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.preflight import cluster_pool, same_macs
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import UnsafeFolder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.runlock import LockBusy, run_lock
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.writeguard import refusal

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "output_dir": {"type": "path", "required": True},
    "write": {"type": "bool", "default": True},
    "bridge": {"type": "str", "choices": ["disabled", "enabled", "unchanged"]},
}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        dropped = self.dropped(task_vars, args["group"], ("mlx_fleet_thunderbolt",))
        if dropped:  # the others go on with their own steps; the fabric needs every Mac, so it leaves all alone
            msg = (f"the fabric changed nothing and the hostfiles stay as they were: {', '.join(dropped)} failed or "
                   "did not answer earlier in this run; fix that and run again")
            result.update(changed=False, dropped=dropped, msg=msg, warnings=[msg])
            return result
        names, hostvars = self.cluster(task_vars, args["group"], ("mlx_fleet_thunderbolt",))
        if len(names) < 2:
            result.update(changed=False, skipped=True, msg="one Mac: there is no Thunderbolt fabric to build")
            return result
        if self._task.check_mode:
            return self._fabric(result, args, names, hostvars, task_vars, write=False)
        # Read the previous outputs and write the new ones (the picture at least) with no other run in between.
        try:
            with run_lock(args["output_dir"], f"ansible-playbook task '{self._task.get_name()}'"):
                return self._fabric(result, args, names, hostvars, task_vars, write=True)
        except (LockBusy, UnsafeFolder) as exc:
            raise AnsibleActionFail(f"hostfiles not rewritten: {exc}") from None

    def _fabric(self, result, args, names, hostvars, task_vars, *, write: bool):
        first = hostvars[names[0]]
        output_dir = Path(args["output_dir"])
        thunderbolt = {n: hostvars[n]["mlx_fleet_thunderbolt"] for n in names}
        try:
            previous = read_model(output_dir)
        except ValueError as exc:  # a damaged cluster.json: said as the line to act on
            raise AnsibleActionFail(str(exc)) from None
        macos = {n: hostvars[n].get("mlx_fleet_macos", {}) for n in names}
        twins = same_macs(macos)
        if twins:
            raise actions.refusal(list(twins.values()))  # bad input: the inventory names one Mac twice
        declared = {n: hostvars[n]["mlx_fleet_model"] for n in names if "mlx_fleet_model" in hostvars[n]}
        # A fabric judged on another Mac's ports (a Studio's Ethernet-side port) would be wrong everywhere.
        contradictions = [line for n, key in declared.items() for line in [mismatch(n, key, macos[n])] if line]
        if contradictions:
            raise actions.refusal(contradictions)
        try:
            pool, pool_note = cluster_pool(first, output_dir, macos)
        except ValueError as exc:  # no private range is free here
            raise actions.refusal([str(exc)]) from None
        built = fab.build_fabric(
            thunderbolt, macos,
            models=declared,
            cables=first.get("mlx_fleet_cables"),
            backend=first.get("mlx_fleet_backend", defaults.BACKEND),
            ip_pool=pool,
            previous=previous,
            management_ips={n: macos[n].get("management_address") for n in names},
            envs=list(first.get("mlx_fleet_envs", [])),
        )
        # Before the network step, an active bridge it is about to turn off is no news: the publishing step reads
        # the bridges the network step read back and says so if one stayed on (bridge_cautions).
        held = [f for f in built.cautions if f.kind == "bridge" and args["bridge"] == "disabled"]
        warnings = [f.message for f in built.cautions if f not in held]
        for warning in warnings:
            self._display.warning(warning)
        network = port_arguments(built.network)
        result.update(
            backend=built.backend, reason=built.reason, warnings=warnings, errors=built.errors,
            bridges_off=[],  # the publishing step says which bridges the network step turned off
            bridge_cautions=[{"host": f.hosts[0], "message": f.message} for f in held],
            cables=fab.cable_speeds(built.links), cable_ends=fab.cable_ends(built.links),
            findings=[dataclasses.asdict(f) for f in built.findings],
            changes=built.changes,
            addresses=fab.addresses_result(built.addresses),
            ip_pool=built.ip_pool, ip_pool_note=pool_note,
            # Exactly what mlx_fleet.cluster.thunderbolt_network takes as its ports.
            network=network,
            configure_on=to_configure(network, thunderbolt, previous),
            hostfile=str(output_dir / HOSTFILE),
            # Where the mlx_fabric role puts them on every Mac (its variable, when run from the role).
            hostfile_dir=self._templar.template(task_vars.get("mlx_fabric_hostfile_dir")),
            # What mlx_fleet.cluster.hostfiles puts on every Mac: the texts as MLX writes them.
            hostfiles={HOSTFILE: built.hostfile and built.hostfile.text(),
                       RING_HOSTFILE: built.ring_hostfile and built.ring_hostfile.text()},
            # What mlx_fleet.cluster.fabric_publish writes: the files of this judgment, not of a second one.
            publication=fab.Publication.of(built).to_dict(),
            changed=False,
        )
        # Every Mac: what each has is known only after its network step (fabric_publish says it then).
        result["write_on"] = hostfile.macs_to_write(result["hostfiles"], {n: None for n in names})
        if args["bridge"] is not None:
            # The network step comes next: it must not cut the connection any Mac is managed over.
            for host in (n for n in names if management_interface(macos[n]) is None):
                self._display.warning(f"{host}: no management_interface in its mlx_fleet_macos facts, so the "
                                      "fabric cannot check it keeps the Mac reachable")
            lockouts = lockout_problems(macos, thunderbolt, network, args["bridge"])
            if lockouts:
                raise AnsibleActionFail("\n".join(lockouts), result=dict(result, lockouts=lockouts))
        notes = []
        if write:
            inventory = fixes.inventory_named(task_vars)
            stop = refusal(names, task_vars.get("ansible_play_hosts"), None, result["cable_ends"], network,
                           thunderbolt, inventory, cli=fixes.uses_cli(task_vars)) if args["write"] else None
            if stop:
                raise AnsibleActionFail(stop, result=result)
            with staged(output_dir) as stage:
                written = fab.write_outputs(stage, built, hostfiles=args["write"])
            notes, result["changed"] = written.skipped, written.changed
            if built.errors:  # only the picture was written: fabric.svg, or fabric.dot without Graphviz
                notes.append(f"the picture, faults in red: {output_dir / written.paths[-1].name}")
        if built.errors:
            raise AnsibleActionFail("\n".join(built.errors + notes), result=result)
        result["msg"] = built.reason + "".join(f"; {n}" for n in notes)
        return result

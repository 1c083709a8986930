# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""RDMA readiness of every Mac, the Recovery checklist and the ledger (logic: plugin_utils.rdma, plugin_utils.checklist)."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime, timezone
from pathlib import Path

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import checklist, fixes, rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import ClusterAction, refusal
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.preflight import same_macs
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.runlock import LockBusy, run_lock

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "output_dir": {"type": "path", "required": True},
    "inventory": {"type": "str"},
}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        facts = ("mlx_fleet_macos", "mlx_fleet_thunderbolt")
        dropped = self.dropped(task_vars, args["group"], facts)
        if dropped:  # the others go on converging; this step needs every Mac
            summary = (f"not judged: {', '.join(dropped)} failed or did not answer earlier in this run; the "
                       "checklist and the ledger stay as they were")
            result.update(changed=False, summary=summary, msg=f"RDMA readiness {summary}")
            self._display.display(result["msg"])
            return result
        names, hostvars = self.cluster(task_vars, args["group"], facts)
        first = hostvars[names[0]] if names else {}
        twins = same_macs({n: hostvars[n]["mlx_fleet_macos"] for n in names})
        if twins:
            raise refusal(list(twins.values()))
        backend = first.get("mlx_fleet_backend", defaults.BACKEND)
        assessment = rdma.assess(
            {n: hostvars[n]["mlx_fleet_macos"] for n in names},
            {n: hostvars[n]["mlx_fleet_thunderbolt"] for n in names},
            models={n: hostvars[n]["mlx_fleet_model"] for n in names if "mlx_fleet_model" in hostvars[n]},
            locations={n: str(hostvars[n]["mlx_fleet_location"]) for n in names if hostvars[n].get("mlx_fleet_location")},
            backend=backend,
        )
        output_dir = Path(args["output_dir"])
        inventory = args["inventory"] or first.get("inventory_file") or "INVENTORY"
        # The ledger is read and written back with no other run in between.
        guard = nullcontext() if self._task.check_mode else run_lock(
            output_dir, f"ansible-playbook task '{self._task.get_name()}'")
        try:
            with guard:
                written = checklist.write(
                    output_dir, assessment, inventory=inventory,
                    generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    addresses={n: hostvars[n]["mlx_fleet_macos"].get("management_address") for n in names},
                    write_files=not self._task.check_mode, cli=fixes.uses_cli(task_vars))
        except (ValueError, LockBusy) as exc:
            raise AnsibleActionFail(str(exc)) from exc
        needs = assessment.hosts(rdma.NEEDS_RECOVERY)
        result.update(
            changed=written.changed,
            nodes={h: {"status": r.status, "message": r.message, "regression": r.regression}
                   for h, r in assessment.nodes.items()},
            needs_recovery=needs,
            not_capable=assessment.hosts(rdma.NOT_CAPABLE),
            enabled_not_working=assessment.hosts(rdma.ENABLED_NOT_WORKING),
            ready=assessment.hosts(rdma.READY),
            summary=assessment.summary,
            regressions=written.regressions,
            checklist={"html": str(written.html), "text": str(written.text)},
            ledger=str(written.ledger),
        )
        for line in written.regressions:
            self._display.warning(line)
        # In the result's warnings, so the CLI's summary lists them too (after its RDMA line).
        result["warnings"] = rdma.unread_warnings(assessment.nodes) + [
            assessment.nodes[host].message for host in assessment.hosts(rdma.ENABLED_NOT_WORKING)]
        lines = [r.message for r in assessment.nodes.values()]
        if needs:
            lines.append(f"checklist for {', '.join(needs)}: {written.html} (text: {written.text})")
        lines.append(assessment.summary)
        blocking = assessment.blocking
        if blocking:
            where = f"; the checklist is {written.html}" if needs else ""
            raise AnsibleActionFail(f"{blocking}{where}", result=result)
        result["msg"] = "\n".join(lines)
        self._display.display(result["msg"])  # where each Mac stands: for a person, at every verbosity
        return result

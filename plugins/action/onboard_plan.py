# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""A new Mac joining the cluster: checked, the cables to add, the visit sheet
(logic: plugin_utils.onboarding; the sheet: plugin_utils.visit_sheet)."""

from __future__ import annotations

from datetime import datetime, timezone

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fixes, onboarding, visit_sheet
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cableplan import Port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cluster_view import MACOS, THUNDERBOLT
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import UnsafeFolder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import MODELS

ARGS = {
    "group": {"type": "str", "default": defaults.CLUSTER_GROUP},
    "host": {"type": "str", "required": True},
    "output_dir": {"type": "path", "required": True},
    "inventory": {"type": "str", "required": True},
    "afterwards": {"type": "list", "elements": "str", "default": []},
}
SETTINGS = {"mlx_fleet_cables": None, "mlx_fleet_backend": defaults.BACKEND}


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        view = self.require(self.view(task_vars, args["group"], SETTINGS), (MACOS, THUNDERBOLT))
        names, new = view.names, args["host"]
        if new not in names:
            raise AnsibleActionFail(f"{new} is not a host of {args['group']}")
        macos, thunderbolt, models = view.macos(), view.thunderbolt(), view.models()
        judged = onboarding.assess(new, macos, thunderbolt, models=models, cables=view.setting("mlx_fleet_cables"),
                                   backend=view.setting("mlx_fleet_backend"))
        if judged.errors:
            raise AnsibleActionFail("\n".join(judged.errors), result={"errors": judged.errors})

        inventory = args["inventory"]
        afterwards = list(args["afterwards"])
        if judged.needs_recovery:
            cli = fixes.uses_cli(task_vars)
            afterwards += [fixes.run_command("checklist", inventory, cli=cli), fixes.run_command("site", inventory, cli=cli)]
        sheet = visit_sheet.Sheet(
            host=new, macos=macos[new], model=MODELS.get(judged.model),
            location=view.host(new).location, advice=judged.advice,
            needs_recovery=judged.needs_recovery, notes=judged.notes,
            models={n: MODELS.get(onboarding.model_key(models.get(n), macos[n])) for n in names},
            locations=view.locations(),
            devices={Port(n, p["receptacle"]): p["device"] for n in names for p in thunderbolt[n]["ports"]
                     if p.get("device")},
            afterwards=afterwards)
        if self._task.check_mode:
            html, text = visit_sheet.paths(args["output_dir"], new)
        else:
            try:
                html, text = visit_sheet.write(args["output_dir"], sheet, inventory=inventory,
                                               generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
            except UnsafeFolder as exc:
                raise AnsibleActionFail(f"visit sheet not written: {exc}") from None
        for note in judged.notes:
            self._display.warning(note)
        result.update(
            changed=False, model=judged.model, serial_number=judged.serial_number, backend=judged.advice.backend,
            topology=judged.advice.topology, headline=judged.advice.headline(), summary=judged.advice.summary(),
            steps=judged.advice.steps(), add=judged.add, unplug=judged.unplug, seen=judged.seen, seen_steps=judged.seen_steps,
            needs_recovery=judged.needs_recovery, rdma=judged.rdma, notes=judged.notes,
            sheet={"html": str(html), "text": str(text)}, msg=judged.advice.summary())
        return result

"""A new Mac joining the cluster, on the controller from the cluster's typed view: checked, the cables to add,
the visit sheet (plugin_utils.checks.onboarding; the sheet: plugin_utils.render.visit_sheet). The action plugin
mlx_fleet.cluster.onboard_plan only translates Ansible's arguments and results."""

from __future__ import annotations

from datetime import datetime, timezone

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import onboarding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import visit_sheet
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import MACOS, THUNDERBOLT, ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed

FACTS = (MACOS, THUNDERBOLT)
SETTINGS = {"mlx_fleet_cables": None, "mlx_fleet_backend": defaults.BACKEND}


def plan(view: ClusterView, new: str, run: Run, afterwards: list[str]) -> dict:
    """The step's result for NEW (a host of the view); StepFailed when it is not one or cannot join.
    AFTERWARDS: the commands the sheet lists after the visit (the Recovery step's are added when it needs it)."""
    if new not in view.names:
        raise StepFailed([f"{new} is not a host of {view.group}"])
    macos, thunderbolt, models = view.macos(), view.thunderbolt(), view.models()
    judged = onboarding.assess(new, macos, thunderbolt, models=models, cables=view.setting("mlx_fleet_cables"),
                               backend=view.setting("mlx_fleet_backend"))
    if judged.errors:
        raise StepFailed(judged.errors, result={"errors": judged.errors})
    if judged.needs_recovery:
        afterwards = afterwards + [fixes.run_command(playbook, run.inventory, cli=run.cli)
                                   for playbook in ("checklist", "site")]
    sheet = visit_sheet.Sheet(
        host=new, macos=macos[new], model=MODELS.get(judged.model), location=view.host(new).location,
        advice=judged.advice, needs_recovery=judged.needs_recovery, notes=judged.notes,
        models={n: MODELS.get(onboarding.model_key(models.get(n), macos[n])) for n in view.names},
        locations=view.locations(),
        devices={Port(n, p["receptacle"]): p["device"] for n in view.names for p in thunderbolt[n]["ports"]
                 if p.get("device")},
        afterwards=afterwards)
    if run.write:
        try:
            html, text = visit_sheet.write(run.output_dir, sheet, inventory=run.inventory,
                                           generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
        except UnsafeFolder as exc:
            raise StepFailed([f"visit sheet not written: {exc}"]) from None
    else:
        html, text = visit_sheet.paths(run.output_dir, new)
    run.shown.extend(judged.notes)
    advice = judged.advice
    return dict(
        changed=False, model=judged.model, serial_number=judged.serial_number, backend=advice.backend,
        topology=advice.topology, headline=advice.headline(), summary=advice.summary(), steps=advice.steps(),
        add=judged.add, unplug=judged.unplug, seen=judged.seen, seen_steps=judged.seen_steps,
        needs_recovery=judged.needs_recovery, rdma=judged.rdma, notes=judged.notes,
        sheet={"html": str(html), "text": str(text)}, msg=advice.summary())

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""A new Mac joining the cluster: its model and serial checked, the cables to add, the visit sheet
(logic: plugin_utils.cable_advice and plugin_utils.visit_sheet; the cabling: plugin_utils.fabric)."""

from __future__ import annotations

from datetime import datetime, timezone

from ansible.errors import AnsibleActionFail

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import cable_advice, rdma, visit_sheet
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fabric as fab
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import ClusterAction
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cableplan import Cable, Port, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import MODELS

ARGS = {
    "group": {"type": "str", "default": "mlx_cluster"},
    "host": {"type": "str", "required": True},
    "output_dir": {"type": "path", "required": True},
    "inventory": {"type": "str", "required": True},
    "afterwards": {"type": "list", "elements": "str", "default": []},
}


def _model_key(declared: str | None, macos: dict) -> str | None:
    if declared:
        return declared
    return next((key for key, m in MODELS.items() if m.model_id == macos["model_identifier"]), None)


def _target(requested: str, hosts: list[str], others: list[str], cables: list[Cable], thunderbolt: dict) -> str:
    """The backend to cable for: jaccl, jaccl-ring or ring. auto keeps what the cluster is: a full
    mesh stays a mesh (jaccl), anything else becomes a ring (with RDMA when every Mac has it)."""
    if requested != "auto":
        return requested
    pairs = {frozenset((c.a.host, c.b.host)) for c in cables}
    meshed = all(frozenset((a, b)) in pairs for i, a in enumerate(others) for b in others[i + 1:])
    if meshed:
        return "jaccl"
    return "jaccl-ring" if all(thunderbolt[h].get("rdma_devices") for h in others) else "ring"


class ActionModule(ClusterAction):
    ARGS = ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self.arguments()
        names, hostvars = self.cluster(task_vars, args["group"], ("mlx_fleet_macos", "mlx_fleet_thunderbolt"))
        new = args["host"]
        if new not in names:
            raise AnsibleActionFail(f"{new} is not a host of {args['group']}")
        others = [n for n in names if n != new]
        macos = {n: hostvars[n]["mlx_fleet_macos"] for n in names}
        thunderbolt = {n: hostvars[n]["mlx_fleet_thunderbolt"] for n in names}
        first = hostvars[others[0]] if others else hostvars[new]

        serial = macos[new]["serial_number"]
        same = [n for n in others if macos[n]["serial_number"] == serial]
        if same:
            raise AnsibleActionFail(f"{new}: serial number {serial} is already in the inventory as {same[0]}: it is "
                                    f"the same Mac; onboard it under that name, or take {same[0]} out of the "
                                    "inventory first")
        model_key = _model_key(hostvars[new].get("mlx_fleet_model"), macos[new])
        models = {n: hostvars[n].get("mlx_fleet_model") or _model_key(None, macos[n]) for n in names}
        notes = []
        if model_key is None:
            notes.append(f"{new}: mlx-fleet knows no model with identifier {macos[new]['model_identifier']}: its "
                         "ports come from the Mac itself and none is known to lack RDMA; leave mlx_fleet_model unset")
        builds = {(macos[n]["product_version"], macos[n]["build_version"]) for n in others}
        mine = (macos[new]["product_version"], macos[new]["build_version"])
        if builds and mine not in builds:
            theirs = ", ".join(f"{v} ({b})" for v, b in sorted(builds))
            notes.append(f"{new} runs macOS {mine[0]} ({mine[1]}) and the cluster {theirs}: Macs on different "
                         "builds fail in odd ways; update them to one build")

        # The cables: found on the ports (the fabric's discovery) and planned.
        found = fab.build_fabric(thunderbolt, models={n: m for n, m in models.items() if m}).links
        planned = parse_cables(first.get("mlx_fleet_cables") or [])
        cables = {c.key: c for c in [link.cable for link in found] + planned}
        taken = {n: {p["receptacle"] for p in thunderbolt[n]["ports"] if p.get("connected")} for n in names}
        for cable in planned:
            for end in (cable.a, cable.b):
                taken.setdefault(end.host, set()).add(end.number)
        hosts = []
        for n in names:
            model = MODELS.get(models[n])
            hosts.append(cable_advice.HostPorts(
                n, tuple(sorted(p["receptacle"] for p in thunderbolt[n]["ports"])), frozenset(taken[n]),
                model.rdma_broken_ports if model else (),
                f"{model.model_name}, {model.key}" if model else macos[n]["model_identifier"]))
        requested = first.get("mlx_fleet_backend", "auto")
        target = _target(requested, names, others, list(cables.values()), thunderbolt)
        advice = cable_advice.advise(new, hosts, list(cables.values()), target)
        chosen = advice
        if not advice.possible:
            if requested == "auto" and advice.alternative and advice.alternative.possible:
                chosen = advice.alternative  # auto runs whatever the cables give: say why, and go on
                notes.insert(0, advice.summary())
            else:
                fix = (f"; to go ahead with it, set mlx_fleet_backend: {advice.alternative.backend} and run again"
                       if advice.alternative and advice.alternative.possible else "")
                raise AnsibleActionFail(f"{new}: {advice.summary()}{fix}",
                                        result={"advice": advice.summary(), "impossible": advice.impossible})

        # The new Mac's cables the advice counted as there: planned by an earlier run (to plug until seen),
        # or plugged already (to write into the plan). Both belong to the advice.
        live = {link.cable.key for link in found}
        planned_keys = {c.key for c in planned}
        mine = [c for c in planned if c.key not in live] + [link.cable for link in found if link.cable.key not in planned_keys]
        chosen.cables = [Cable(*(c.a, c.b) if c.a.host == new else (c.b, c.a))
                         for c in mine if new in (c.a.host, c.b.host)] + chosen.cables

        readiness = rdma.classify_node(new, macos[new], thunderbolt[new], model=model_key)
        uses_rdma = chosen.backend in fab.RDMA_BACKENDS
        needs_recovery = uses_rdma and readiness.status == rdma.NEEDS_RECOVERY
        if uses_rdma and readiness.status == rdma.NOT_CAPABLE:
            notes.append(f"{readiness.message}; {chosen.backend} cannot include it: use ring")

        sheet = visit_sheet.Sheet(
            host=new, macos=macos[new], model=MODELS.get(model_key), location=hostvars[new].get("mlx_fleet_location"),
            advice=chosen, needs_recovery=needs_recovery, notes=notes,
            models={n: MODELS.get(m) for n, m in models.items()},
            locations={n: str(hostvars[n]["mlx_fleet_location"]) for n in names if hostvars[n].get("mlx_fleet_location")},
            devices={Port(n, p["receptacle"]): p["device"] for n in names for p in thunderbolt[n]["ports"] if p.get("device")},
            afterwards=args["afterwards"] + ([f"mlx-fleet checklist -i {args['inventory']}",
                                              f"mlx-fleet converge -i {args['inventory']}"] if needs_recovery else []))
        if self._task.check_mode:
            html, text = visit_sheet.paths(args["output_dir"], new)
        else:
            html, text = visit_sheet.write(args["output_dir"], sheet, inventory=args["inventory"],
                                           generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))
        for note in notes:
            self._display.warning(note)
        result.update(
            changed=False,
            model=model_key,
            serial_number=serial,
            backend=chosen.backend,
            topology=chosen.topology,
            summary=chosen.summary(),
            headline=chosen.headline(),
            steps=chosen.steps(),
            add=chosen.plan_entries(),
            unplug=[str(Cable(*c.key)) for c in chosen.unplug],
            seen=[str(Cable(*c.key)) for c in chosen.cables if c.key in live],
            needs_recovery=needs_recovery,
            rdma=readiness.message,
            notes=notes,
            sheet={"html": str(html), "text": str(text)},
            msg=chosen.summary(),
        )
        return result

"""The converge's RDMA step on the controller, from the cluster's typed view: every Mac's readiness judged
(plugin_utils.rdma.readiness), the Recovery checklist and the ledger written (plugin_utils.render.checklist). The action plugin
mlx_fleet.cluster.rdma_readiness only translates Ansible's arguments and results."""

from __future__ import annotations

from datetime import datetime, timezone

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import checklist, rdma_summary
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import MACOS, THUNDERBOLT, ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.preflight import same_macs
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed, locked

FACTS = (MACOS, THUNDERBOLT)
SETTINGS = {"mlx_fleet_backend": defaults.BACKEND}


def readiness(view: ClusterView, run: Run) -> dict:
    """The step's result (msg: where each Mac stands, for a person); StepFailed when a Mac is named twice (bad
    input) or the cluster cannot use RDMA yet (the checklist written first). RUN.inventory: the one the
    checklist's commands name."""
    dropped = view.dropped(FACTS)
    if dropped:  # the others go on converging; this step needs every Mac
        summary = (f"not judged: {', '.join(dropped)} failed or did not answer earlier in this run; the "
                   "checklist and the ledger stay as they were")
        return {"changed": False, "summary": summary, "msg": f"RDMA readiness {summary}"}
    macos = view.macos()
    twins = same_macs(macos)
    if twins:
        raise StepFailed(list(twins.values()), bad_input=True)
    assessment = rdma.assess(macos, view.thunderbolt(), models=view.models(), locations=view.locations(),
                             backend=view.setting("mlx_fleet_backend"))

    def written():  # the ledger is read and written back with no other run in between
        try:
            return checklist.write(
                run.output_dir, assessment, inventory=run.inventory,
                generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                addresses={n: facts.get("management_address") for n, facts in macos.items()},
                write_files=run.write, cli=run.cli)
        except ValueError as exc:
            raise StepFailed([str(exc)]) from None

    done = locked(run, written)
    needs = assessment.hosts(rdma.NEEDS_RECOVERY)
    result = dict(
        changed=done.changed,
        nodes={h: {"status": r.status, "message": r.message, "regression": r.regression}
               for h, r in assessment.nodes.items()},
        needs_recovery=needs,
        not_capable=assessment.hosts(rdma.NOT_CAPABLE),
        enabled_not_working=assessment.hosts(rdma.ENABLED_NOT_WORKING),
        ready=assessment.hosts(rdma.READY),
        summary=rdma_summary.summary(assessment),
        regressions=done.regressions,
        checklist={"html": str(done.html), "text": str(done.text)},
        ledger=str(done.ledger),
        # In the result's warnings, so the CLI's summary lists them too (after its RDMA line).
        warnings=rdma.unread_warnings(assessment.nodes) + [
            assessment.nodes[host].message for host in assessment.hosts(rdma.ENABLED_NOT_WORKING)],
    )
    run.shown.extend(done.regressions)
    lines = [r.message for r in assessment.nodes.values()]
    if needs:
        lines.append(f"checklist for {', '.join(needs)}: {done.html} (text: {done.text})")
    lines.append(result["summary"])
    if assessment.blocked:
        where = f"; the checklist is {done.html}" if needs else ""
        raise StepFailed([f"{rdma_summary.blocking(assessment)}{where}"], result=result)
    result["msg"] = "\n".join(lines)
    return result

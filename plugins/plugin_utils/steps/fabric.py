"""The converge's two fabric steps on the controller, from the cluster's typed view: `judge` joins every Mac's
Thunderbolt facts into the fabric once, before the network step (twins, contradictions, the pool, the build,
the lockout check, the write guard, the picture); `publish` checks what the network step read back against that
judgement and writes its hostfiles, cluster model and picture as one generation. The action plugins
mlx_fleet.cluster.fabric and fabric_publish only translate Ansible's arguments and results."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import fabric as fab
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import ClusterModel, read_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import THUNDERBOLT, ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.addresses import port_arguments, to_configure
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import discover, read_again_wins
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.network_step import macs_that_differ
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.management import lockout_problems, management_interface
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import mismatch
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.outputs import staged
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.preflight import cluster_pool, same_macs
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed, locked
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.write_guard import refusal
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.write_guard import refusal_line

# The cluster-wide variables the fabric reads, with what leaving one out means.
SETTINGS = {"mlx_fleet_cables": None, "mlx_fleet_backend": defaults.BACKEND, "mlx_fleet_envs": [],
            "mlx_fleet_ip_pool": None, "mlx_fleet_management_network": None,
            "mlx_fleet_models": None, "mlx_fleet_models_hf_cache": defaults.MODELS_HF_CACHE}  # the ranks' envs
NOT_REWRITTEN = "hostfiles not rewritten"
NETWORK = "mlx_fleet_network"  # what thunderbolt_network compares, as the preflight read it (macos_facts)
# The fabric's result as the summary reads it: carried over, so the publishing step's result is the fabric's last word.
CARRIED = ("backend", "reason", "errors", "cables", "findings", "changes", "addresses", "ip_pool", "ip_pool_note",
           "network", "configure_on", "hostfile", "hostfile_dir", "hostfiles")


def dropped_note(dropped: list[str], what: str) -> dict:
    """The result of a fabric step that leaves everything alone because Macs dropped out of the run."""
    msg = f"{what}: {', '.join(dropped)} failed or did not answer earlier in this run; fix that and run again"
    return {"changed": False, "dropped": dropped, "msg": msg, "warnings": [msg]}


def judge(view: ClusterView, run: Run, *, bridge: str | None, hostfiles: bool, hostfile_dir: str | None) -> dict:
    """The fabric step's result (what the network step and fabric_publish take); StepFailed when it cannot
    go on. BRIDGE: what the network step does to the Thunderbolt Bridge (None: no network step follows);
    HOSTFILES: whether the hostfiles may be written now (else the picture only)."""
    dropped = view.dropped((THUNDERBOLT,))
    if dropped:  # the others go on with their own steps; the fabric needs every Mac, so it leaves all alone
        return dropped_note(dropped, "the fabric changed nothing and the hostfiles stay as they were")
    if len(view.hosts) < 2:
        return {"changed": False, "skipped": True, "msg": "one Mac: there is no Thunderbolt fabric to build"}
    return locked(run, lambda: _judged(view, run, bridge=bridge, hostfiles=hostfiles, hostfile_dir=hostfile_dir),
                  NOT_REWRITTEN)


def _refuse_bad_input(view: ClusterView) -> None:
    """The inventory's mistakes a fabric cannot be judged with: one Mac named twice, or a declared model that
    is not the Mac (a fabric judged on another Mac's ports, a Studio's Ethernet-side port, is wrong everywhere)."""
    twins = same_macs(view.macos())
    if twins:
        raise StepFailed(list(twins.values()), bad_input=True)
    contradictions = [line for h in view.hosts if h.model for line in [mismatch(h.name, h.model, h.macos)] if line]
    if contradictions:
        raise StepFailed(contradictions, bad_input=True)


def _built(view: ClusterView, run: Run) -> tuple[fab.Fabric, ClusterModel | None, str | None]:
    """The fabric built from the view, the cluster model it was built over, and the pool's note (chosen now)."""
    try:
        previous = read_model(run.output_dir)
    except ValueError as exc:  # a damaged cluster.json: said as the line to act on
        raise StepFailed([str(exc)]) from None
    _refuse_bad_input(view)
    macos = view.macos()
    try:
        pool, pool_note = cluster_pool(view.settings, run.output_dir, macos)
    except ValueError as exc:  # no private range is free here
        raise StepFailed([str(exc)], bad_input=True) from None
    built = fab.build_fabric(
        view.thunderbolt(), macos, models=view.models(), cables=view.setting("mlx_fleet_cables"),
        backend=view.setting("mlx_fleet_backend"), ip_pool=pool, previous=previous,
        management_ips={n: facts.get("management_address") for n, facts in macos.items()},
        envs=hostfile.rank_envs(list(view.setting("mlx_fleet_envs") or []), view.setting("mlx_fleet_models"),
                                view.setting("mlx_fleet_models_hf_cache")))
    return built, previous, pool_note


def _judged(view: ClusterView, run: Run, *, bridge: str | None, hostfiles: bool, hostfile_dir: str | None) -> dict:
    names, thunderbolt, macos = view.names, view.thunderbolt(), view.macos()
    built, previous, pool_note = _built(view, run)
    # Before the network step, an active bridge it is about to turn off is no news: the publishing step reads
    # the bridges the network step read back and says so if one stayed on (bridge_cautions).
    held = [f for f in built.cautions if f.kind == "bridge-loop" and bridge == "disabled"]
    warnings = [f.line for f in built.cautions if f not in held]
    run.shown.extend(warnings)
    network = port_arguments(built.network)
    texts = {HOSTFILE: built.hostfile and built.hostfile.text(),
             RING_HOSTFILE: built.ring_hostfile and built.ring_hostfile.text()}
    result = dict(
        backend=built.backend, reason=built.reason, warnings=warnings, errors=built.errors,
        bridges_off=[],  # the publishing step says which bridges the network step turned off
        bridge_cautions=[{"host": f.hosts[0], "message": f.line} for f in held],
        cables=fab.cable_speeds(built.links), cable_ends=fab.cable_ends(built.links),
        findings=[f.to_dict() for f in built.findings],
        changes=built.changes, addresses=fab.addresses_result(built.addresses), ip_pool=built.ip_pool, ip_pool_note=pool_note,
        network=network,  # exactly what mlx_fleet.cluster.thunderbolt_network takes as its ports
        configure_on=to_configure(network, thunderbolt, previous),
        # The Macs whose network step (with BRIDGE) has anything to do, as their preflight read them.
        differs_on=macs_that_differ(names, network, {h.name: h.variables.get(NETWORK) for h in view.hosts},
                                    bridge) if bridge is not None else names,
        hostfile=str(run.output_dir / HOSTFILE),
        hostfile_dir=hostfile_dir,  # where the mlx_fabric role puts them on every Mac
        hostfiles=texts,  # what mlx_fleet.cluster.hostfiles puts on every Mac: the texts as MLX writes them
        # What fabric_publish writes: the files of this judgement, not of a second one.
        publication=fab.Publication.of(built).to_dict(),
        # Every Mac: what each has is known only after its network step (fabric_publish says it then).
        write_on=hostfile.macs_to_write(texts, {n: None for n in names}),
        changed=False)
    if bridge is not None:
        # The network step comes next: it must not cut the connection any Mac is managed over.
        run.shown.extend(f"{host}: no management_interface in its mlx_fleet_macos facts, so the fabric cannot "
                         "check it keeps the Mac reachable" for host in names if management_interface(macos[host]) is None)
        lockouts = lockout_problems(macos, thunderbolt, network, bridge)
        if lockouts:
            raise StepFailed(lockouts, result=dict(result, lockouts=lockouts))
    notes = _written(view, run, built, result, hostfiles) if run.write else []
    if built.errors:
        raise StepFailed(built.errors + notes, result=result)
    result["msg"] = built.reason + "".join(f"; {n}" for n in notes)
    return result


def _written(view: ClusterView, run: Run, built: fab.Fabric, result: dict, hostfiles: bool) -> list[str]:
    """Writes the picture, and the hostfiles and the model when HOSTFILES and the write guard lets them
    (result's changed set); the notes on what was left alone."""
    stop = refusal(view.names, view.active, None, result["cable_ends"], result["network"], view.thunderbolt()
                   ) if hostfiles else None
    if stop:
        raise StepFailed([refusal_line(stop, run.inventory, cli=run.cli)], result=result)
    with staged(run.output_dir) as stage:
        written = fab.write_outputs(stage, built, hostfiles=hostfiles)
    result["changed"] = written.changed
    if built.errors:  # only the picture was written: fabric.svg, or fabric.dot without Graphviz
        return written.skipped + [f"the picture, faults in red: {run.output_dir / written.paths[-1].name}"]
    return written.skipped


def publish(view: ClusterView, run: Run, judged: dict, network_steps: dict, held: str) -> dict:
    """The publishing step's result: JUDGED (the fabric step's result) checked against the ports each Mac's
    network step read back (NETWORK_STEPS: host -> its result; a Mac it skipped: its ports as read before),
    then written; StepFailed when the read-back is not the fabric judged. HELD: the hold mark beside the
    hostfiles (an update's record)."""
    if "publication" not in judged:  # skipped (one Mac) or left alone (a Mac dropped out): nothing to publish
        return {"changed": False, "skipped": True, "msg": judged.get("msg") or "no fabric to publish",
                "hostfiles": {}, "write_on": hostfile.macs_to_write({}, on_macs(view.still_in_play(), network_steps),
                                                                    held)}
    dropped = view.dropped((THUNDERBOLT,))
    if dropped:
        return dict(dropped_note(dropped, "the hostfiles stay as they were"), hostfiles={},
                    write_on=hostfile.macs_to_write({}, on_macs(view.still_in_play(), network_steps), held))
    steps = {n: network_steps.get(n) or {} for n in view.names}
    # The ports each Mac's network step read back after configuring them (a Mac it skipped: as read before).
    facts = {h.name: (steps[h.name].get("ansible_facts") or {}).get(THUNDERBOLT) or h.thunderbolt for h in view.hosts}
    turned_off = fab.bridges_turned_off(steps)
    # A bridge the fabric held its warning for (the network step was to turn it off) that is still on; in
    # check mode nothing changed, and a bridge it would turn off is said as such (bridges_off).
    warnings = [c["message"] for c in judged.get("bridge_cautions", [])
                if (facts[c["host"]].get("bridge") or {}).get("active") and not (not run.write and c["host"] in turned_off)]
    run.shown.extend(warnings)
    result = dict({key: judged.get(key) for key in CARRIED}, bridges_off=turned_off, warnings=warnings,
                  changed=False, write_on=hostfile.macs_to_write(judged["hostfiles"], on_macs(view, network_steps), held))
    if not run.write:
        result["msg"] = judged["reason"]
        return result
    publication = fab.Publication.from_dict(judged["publication"])
    # A bridge the network step turned off is no finding of the cluster it publishes.
    publication.model.findings = [f for f in publication.model.findings if not (
        f.kind == "bridge-loop" and not (facts[f.hosts[0]].get("bridge") or {}).get("active"))]
    # The cables on the ports now, against the ones judged; the addresses judged, against the ports read back.
    read_again = {n for n in view.names if (steps[n].get("ansible_facts") or {}).get(THUNDERBOLT)}
    cables = fab.cable_ends(discover(view.names, read_again_wins(facts, read_again))[0])

    def written():
        stop = refusal(view.names, view.active, judged, cables, judged["network"], facts)
        if stop:
            raise StepFailed([refusal_line(stop, run.inventory, cli=run.cli)], result=result)
        with staged(run.output_dir) as stage:
            return fab.write_outputs(stage, publication)

    done = locked(run, written, NOT_REWRITTEN)
    result["changed"] = done.changed
    result["msg"] = judged["reason"] + "".join(f"; {n}" for n in done.skipped)
    return result


def on_macs(view: ClusterView, network_steps: dict) -> dict[str, dict | None]:
    """What each Mac holds in the hostfiles' folder, as its network step or its facts read it (None: unknown,
    so it is written)."""
    return {h.name: (network_steps.get(h.name) or {}).get("hostfiles") or h.variables.get("mlx_fleet_hostfiles")
            for h in view.hosts}

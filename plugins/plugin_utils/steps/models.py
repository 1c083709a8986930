"""`mlx-fleet models status` on the controller, in two steps around the Macs' read: the pinned manifests every
Mac should hold (models.status.expected: a path entry hashed, a Hub entry from the lock), then every Mac's files
judged against them. The action plugins models_manifest and models_status only translate."""

from __future__ import annotations


from ansible_collections.mlx_fleet.cluster.plugins.module_utils import defaults
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.model_files import ModelFileError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cluster_view import ClusterView
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.models import (
    ModelDeclaration, ModelDeclarationError, parse_models, parse_models_source)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import read_model
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import hub_pin, status
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models import sync_plan as sync
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.lock_file import (
    ModelsLockError, load_models_lock, models_lock_path)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.path_manifest import PathEntryError
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.sync_sources import controller_folders
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import models_status, models_sync
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.steps.common import Run, StepFailed

FACTS = ("mlx_fleet_model_files",)
SETTINGS = {"mlx_fleet_models": None, "mlx_fleet_models_hf_cache": defaults.MODELS_HF_CACHE,
            "mlx_fleet_models_dir": defaults.MODELS_DIR, "mlx_fleet_models_source": defaults.MODELS_SOURCE}


def manifests(view: ClusterView, run: Run, lock_file: str | None, pinned_only: bool = False) -> dict:
    """What every Mac should hold (status.Expected's JSON), where (hf_cache, models_dir) and which Mac fetches the
    Hub entries (source; None: the controller); StepFailed (bad input) for a declaration, a source not of the
    cluster, the models' lock or a path entry's folder that cannot be read, and with PINNED_ONLY for a Hub entry
    not pinned. LOCK_FILE: the environment's lock, beside which the models' lock is. Writes a path entry's
    record."""
    try:
        declared = parse_models(view.setting("mlx_fleet_models"))
        source = parse_models_source(view.setting("mlx_fleet_models_source"), view.names)
        pinned = load_models_lock(models_lock_path(lock_file)) if lock_file else {}
        found = status.expected(declared, pinned, run.output_dir, write=run.write)
    except (ModelDeclarationError, ModelFileError, ModelsLockError, PathEntryError) as exc:
        raise StepFailed([str(exc)], bad_input=True) from None
    if pinned_only and found.not_pinned:
        raise StepFailed([models_sync.not_pinned(found.not_pinned, run.inventory, cli=run.cli)], bad_input=True)
    return dict(found.to_json(), changed=False, hf_cache=view.setting("mlx_fleet_models_hf_cache"),
                models_dir=view.setting("mlx_fleet_models_dir"), source=source)


def judge(view: ClusterView, run: Run, expected: dict) -> dict:
    """Every Mac read against EXPECTED (manifests' result): the report, its lines (msg), and what there is to do
    (to_do: the converge's summary says it)."""
    facts = view.having(FACTS).facts(FACTS[0])
    unread = [name for name in view.names if name not in facts]
    found = status.report(expected, facts, unread, fixes.fill(status.FIX_SYNC, run.inventory, cli=run.cli))
    return {"changed": False, "report": found, "to_do": to_do(found, run),
            "msg": "\n".join(models_status.lines(found, run.inventory, cli=run.cli))}


def to_do(report: dict, run: Run) -> list[dict]:
    """Per model a Mac lacks, the Macs, the bytes to copy to them all and the sync's command; per Hub entry not
    pinned, the lock's command."""
    lacking: dict[str, dict] = {}
    for row in report["rows"]:
        if not row["present"]:
            entry = lacking.setdefault(row["model"], {"model": row["model"], "macs": [], "bytes": 0})
            entry["macs"].append(row["mac"])
            entry["bytes"] += row["bytes_missing"]
    found = [dict(entry, command=fixes.models_sync_command([name], run.inventory, cli=run.cli))
             for name, entry in sorted(lacking.items())]
    return found + [{"model": name, "not_pinned": True, "command": fixes.run_command("lock", run.inventory, cli=run.cli)}
                    for name in report["not_pinned"]]


# `mlx-fleet models sync`: the plan (with the controller's folders, a Hub entry fetched once), each Mac's part
# (model_copy: its arguments, the controller feeding the first copy), then the report.
SYNC_SETTINGS = dict(SETTINGS, mlx_fleet_models_port=defaults.MODELS_SYNC_PORT)
COPY_FACTS = ("mlx_fleet_model_copy",)


def sync_plan(view: ClusterView, run: Run, expected: dict, names: list[str]) -> dict:
    """Which Mac pulls which file from where (sync_plan.plan), the files each would receive (msg), and the
    controller's folders to send from (a Hub entry fetched here, not in check mode). StepFailed: a name not
    declared or a Hub entry not pinned (bad input), a Mac short of space (refused before any byte moves)."""
    declared = {m["name"] for m in expected["manifests"]} | set(expected["not_pinned"])
    unknown = sorted(set(names) - declared)
    if unknown:
        raise StepFailed([models_sync.not_declared(unknown, sorted(declared))], bad_input=True)
    chosen = [m for m in expected["manifests"] if not names or m["name"] in names]
    not_pinned = [n for n in expected["not_pinned"] if not names or n in names]
    if not_pinned:
        raise StepFailed([models_sync.not_pinned(not_pinned, run.inventory, cli=run.cli)], bad_input=True)
    try:
        model = read_model(run.output_dir)
    except ValueError as exc:
        raise StepFailed([str(exc)], bad_input=True) from None
    facts = view.having(FACTS).facts(FACTS[0])
    links = list(model.links) if model else []
    if not links and len(view.names) > 1:
        run.shown.append(models_sync.no_cables(run.inventory, cli=run.cli))
    source = expected.get("source")
    found = sync.plan(chosen, facts, view.names, links, view.setting("mlx_fleet_models_port"), source)
    if found.short_of_space:
        raise StepFailed([models_sync.short_of_space(entry) for entry in found.short_of_space],
                         result={"short_of_space": found.short_of_space})
    if found.cut_off:  # before any byte moves: the source Mac cannot feed them over the cables
        raise StepFailed([models_sync.cut_off(name, sorted(macs), source, answered=source in facts)
                          for name, macs in sorted(found.cut_off.items())])
    plan = dict(found.to_json(sync.cable_addresses(links)), manifests=chosen, folders={})
    wanted: dict[str, list[str]] = {}
    for entry in found.from_controller():
        wanted.setdefault(entry["model"], []).append(entry["path"])
    if run.write:
        try:
            plan["folders"] = controller_folders(parse_models(view.setting("mlx_fleet_models")), chosen, wanted)
        except ModelsLockError as exc:
            raise StepFailed([str(exc)]) from None
    return {"changed": False, "plan": plan, "msg": "\n".join(models_sync.plan_lines(plan))}


def copy_arguments(plan: dict, mac: str) -> dict:
    """MAC's model_copy arguments from PLAN: every model synced (it may serve any, and finishes each Hub entry's
    links and ref), its senders, whom it serves (the token is the task's own)."""
    mine = plan["macs"].get(mac, {"receive": [], "serve": None})
    return {"models": plan["manifests"], "receive": mine["receive"], "serve": mine["serve"]}


def nothing_to_do(plan: dict, mac: str) -> bool:
    """Whether MAC receives nothing, serves no neighbour and has no Hub entry to finish: no module need run."""
    mine = plan["macs"].get(mac)
    return not mine or not (mine["receive"] or mine["serve"] or mine["finish"])


def from_controller(arguments: dict) -> list[dict]:
    """The files a Mac's arguments pull from the controller."""
    return [f for sender in arguments["receive"] if sender["sender"] == sync.CONTROLLER for f in sender["files"]]


def fetches_from_hub(arguments: dict) -> bool:
    """Whether a Mac's arguments fetch files from the Hub (it is mlx_fleet_models_source)."""
    return any(sender["sender"] == sync.HUB_SENDER for sender in arguments["receive"])


def sync_report(view: ClusterView, run: Run, plan: dict) -> dict:
    """What every Mac's part did against PLAN: per Mac the files and bytes received, from where, at what rate, the
    files that failed; `complete` when every planned file arrived on every Mac."""
    facts = view.having(COPY_FACTS).facts(COPY_FACTS[0])
    rows = []
    for mac in view.names:
        planned = plan["macs"].get(mac, {"files": 0, "bytes": 0})
        done = facts.get(mac)
        if done is None:
            rows.append({"mac": mac, "planned": planned["files"], "received": 0, "bytes": 0, "seconds": 0,
                         "senders": [], "failed": [], "done": planned["files"] == 0})
            continue
        rows.append({"mac": mac, "planned": planned["files"], "received": len(done["received"]),
                     "bytes": done["bytes"], "seconds": done["seconds"],
                     "senders": sorted({f["from"] for f in done["received"]}),
                     "failed": [_refused_as_said(plan, failed) for failed in done["failed"]],
                     "done": not done["failed"] and len(done["received"]) == planned["files"]})
    refused = {f["model"] for row in rows for f in row["failed"] if f.get("from") == sync.HUB_SENDER}
    found = {"rows": rows, "complete": all(row["done"] for row in rows),
             "bytes": sum(row["bytes"] for row in rows),  # where each Hub entry was fetched, when it was
             "fetched": {name: where for name, where in plan.get("fetched", {}).items()
                         if run.write and name not in refused}}
    return {"changed": any(row["received"] for row in rows), "report": found,
            "msg": "\n".join(models_sync.report_lines(found, run.inventory, cli=run.cli))}


def _refused_as_said(plan: dict, failed: dict) -> dict:
    """A file a Mac could not fetch from the Hub for the Hub's refusal: why, in the words the controller's own
    fetch uses (hub_pin.refusal); any other failure as the Mac said it."""
    if not failed.get("refusal"):
        return failed
    manifest = next(m for m in plan["manifests"] if m["name"] == failed["model"])
    model = ModelDeclaration(manifest["name"], repo=manifest["repo"], revision=manifest["revision"],
                             repo_type=manifest.get("repo_type", "model"))
    refused = hub_pin.refusal(failed["refusal"], failed["why"], failed["endpoint"], model, manifest["commit"])
    return dict(failed, why=str(refused))

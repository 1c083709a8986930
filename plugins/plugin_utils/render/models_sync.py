"""`mlx-fleet models sync` in sentences: what each Mac would receive (the plan, all `--check` prints), one line per
Mac of what moved, from where and at what rate, the refusals, and a last line."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.sync_plan import HUB_SENDER
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.models_status import size
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.summary import natural_key


def _sender(receive: dict) -> str:
    if receive["address"] is None:
        return _source_name(receive["sender"])
    return f"{receive['sender']} ({receive['address']})"


def _source_name(sender: str) -> str:
    return "the Hub" if sender == HUB_SENDER else sender


def fetched_lines(found: dict) -> list[str]:
    """Per Hub entry fetched in this sync (FOUND: the plan or the report), where: on the controller or on the Mac
    mlx_fleet_models_source names."""
    return [f"model {name}: fetched from the Hub on {where}" for name, where in sorted(found.get("fetched", {}).items())]


def plan_lines(plan: dict) -> list[str]:
    """Where each Hub entry is fetched; per Mac the files and bytes it would receive, and from whom."""
    out = fetched_lines(plan)
    for mac in sorted(plan["macs"], key=natural_key):
        mine = plan["macs"][mac]
        if mine["files"]:
            senders = ", ".join(_sender(r) for r in mine["receive"])
            out.append(f"{mac}: to receive {mine['files']} files, {size(mine['bytes'])}, from {senders}")
    return out or ["every Mac holds every model: nothing to copy"]


def cut_off(model: str, macs: list[str], source: str, *, answered: bool) -> str:
    why = "no cable path leads to them from it" if answered else "it did not answer"
    return (f"model {model}: {', '.join(macs)} cannot get it from mlx_fleet_models_source {source}, which fetches it "
            f"from the Hub: {why}; nothing was copied")


def _rate(row: dict) -> str:
    return f"{size(int(row['bytes'] / row['seconds']))}/s" if row["seconds"] else "-"


def report_lines(report: dict, inventory: str, *, cli: bool) -> list[str]:
    """Where each Hub entry was fetched; one line per Mac that received or should have; the files that failed,
    each with why (a Hub entry a Mac could not fetch: one line, the Hub's refusal); a last line."""
    out = fetched_lines(report)
    for row in report["rows"]:
        if row["received"]:
            out.append(f"{row['mac']}: received {row['received']} files, {size(row['bytes'])} in "
                       f"{row['seconds']:.1f} s ({_rate(row)}) from {', '.join(map(_source_name, row['senders']))}")
        refused = {}
        for failed in row["failed"]:
            if failed.get("from") == HUB_SENDER:
                refused.setdefault((failed["model"], failed["why"]), []).append(failed["path"])
                continue
            sender = f" from {failed['from']}" if failed.get("from") else ""
            out.append(f"{row['mac']}: {failed['model']}/{failed['path']} not copied{sender}: {failed['why']}")
        out.extend(f"{row['mac']}: model {model} not fetched from the Hub ({len(paths)} files): {why}"
                   for (model, why), paths in sorted(refused.items()))
        if not row["done"] and not row["failed"] and row["planned"] > row["received"]:
            out.append(f"{row['mac']}: {row['planned'] - row['received']} files not copied (the Mac did not answer)")
    if report["complete"]:
        out.append(f"every Mac holds every model ({size(report['bytes'])} copied)")
    else:
        lacking = ", ".join(row["mac"] for row in report["rows"] if not row["done"])
        out.append(f"not complete on {lacking}: run {fixes.run_command('models', inventory, cli=cli)} again "
                   "to resume")
    return out


def short_of_space(entry: dict) -> str:
    return (f"{entry['mac']}: too little space for the models: {size(entry['needed'])} needed, "
            f"{size(entry['free'])} free; nothing was copied")


def not_declared(names: list[str], declared: list[str]) -> str:
    return f"mlx_fleet_models declares no model {', '.join(names)} (declared: {', '.join(declared) or 'none'})"


def not_pinned(names: list[str], inventory: str, *, cli: bool) -> str:
    return (f"Hub models not pinned as declared: {', '.join(names)}; pin them first: "
            f"{fixes.run_command('lock', inventory, cli=cli)}")


def no_cables(inventory: str, *, cli: bool) -> str:
    return ("no cable addresses are known yet: every Mac gets its copy over the management network; converge "
            f"first to copy over the cables: {fixes.run_command('site', inventory, cli=cli)}")

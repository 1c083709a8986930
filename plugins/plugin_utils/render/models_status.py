"""`mlx-fleet models status` in sentences: one line per Mac and model, what changed in a path entry's folder, and
a last line saying what to run next."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.models.status import STATE_FOUND
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.summary import natural_key, size


def _revision(row: dict) -> str:
    if row["source"] != "hub":
        return ""
    return f" at {row['revision']} ({row['commit'][:12]})"


def row_line(row: dict) -> str:
    where = f"{row['mac']}: {row['model']}{_revision(row)}"
    if row["present"]:
        return f"{where}: present, {'every byte verified' if row['verified'] else 'sizes and dates checked'}"
    parts = []
    if row["missing"]:
        parts.append(f"{len(row['missing'])} files missing ({', '.join(row['missing'][:3])}"
                     f"{', ...' if len(row['missing']) > 3 else ''})")
    parts += [f"{path}: {STATE_FOUND[state]}" for path, state in row["differing"].items()]
    if row.get("ref") == "other":
        parts.append(f"its ref names {row['ref_commit'][:12]}")
    elif row.get("ref") == "missing" and not row["missing"]:
        parts.append("no ref to the pinned commit")
    return (f"{where}: not present: {'; '.join(parts)}; {size(row['bytes_missing'])} to copy, "
            f"{size(row['free_bytes'])} free")


def lines(report: dict, inventory: str, *, cli: bool) -> list[str]:
    """The status for a person, the last line what to run next (the sync, the lock), or that all is there."""
    rows = sorted(report["rows"], key=lambda r: (natural_key(r["mac"]), r["model"]))
    out = [row_line(row) for row in rows]
    for name, change in sorted(report["changed_folders"].items()):
        counts = [f"{len(change[key])} {key}" for key in ("added", "removed", "changed") if change[key]]
        out.append(f"{name}: its folder changed since it was last read ({', '.join(counts)}): the Macs now "
                   "need the new files")
    out += [f"{name}: not pinned: run {fixes.run_command('lock', inventory, cli=cli)}" for name in report["not_pinned"]]
    out += [f"{mac}: not read" for mac in report["unread"]]
    if report["lacking"]:
        to_copy = sum(row["bytes_missing"] for row in rows)
        verb = "lacks a declared model" if len(report["lacking"]) == 1 else "lack declared models"
        out.append(f"{', '.join(report['lacking'])} {verb} ({size(to_copy)} to copy): copy them, every byte "
                   f"verified: {fixes.run_command('models', inventory, cli=cli)}")
    elif report["not_pinned"]:
        out.append(f"pin the Hub models first: {fixes.run_command('lock', inventory, cli=cli)}")
    else:
        out.append(f"every declared model is present on every Mac read ({len(rows)} checked)")
    return out

"""The audit's report: audit.json (mlx-fleet-audit/1, docs/audit.md), audit.html (a printable Macs x facts
table in the Recovery checklist's look, render/templates/audit.html.j2), and the terminal summary the CLI prints.

The summary is made from the report's JSON form, so ``mlx-fleet audit`` prints the same from a run or
from an audit.json read back.
"""

from __future__ import annotations

from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json, atomic_write_text, private_folder
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.audit import CLUSTER, Audit
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import template_environment

JSON_FILE = "audit.json"
HTML_FILE = "audit.html"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def headline(report: dict) -> str:
    """One line: no drift (with the number of facts compared), or how much differs."""
    macs = _plural(len(report["macs"]), "Mac")
    if not report["drift"]:
        return f"no drift: {report['facts_compared']} facts compared on {macs}"
    return f"drift: {report['drift']} of {report['facts_compared']} facts compared on {macs} differ"


def summary_lines(report: dict) -> list[str]:
    """The headline, then only what differs, grouped by fact: which Macs, expected vs. found, the fix."""
    lines = [headline(report)]
    groups: dict[str, list[dict]] = {}
    for finding in report["findings"]:
        groups.setdefault(finding["fact"], []).append(finding)
    for fact, findings in groups.items():
        merged: dict[tuple[str, str], list[str]] = {}
        for finding in findings:
            merged.setdefault((finding["expected"], finding["found"]), []).extend(finding["macs"])
        for (expected, found), macs in merged.items():
            where = "" if macs == [CLUSTER] else f" {', '.join(dict.fromkeys(macs))}:"
            lines.append(f"{fact}:{where} expected {expected}; found {found}")
        lines += [f"  fix: {fix}" for fix in dict.fromkeys(f["fix"] for f in findings if f["fix"])]
    return lines


def table(audit: Audit) -> list[dict]:
    """The Macs x facts table: one row per topic, one cell per Mac (its checks of that topic)."""
    single = [c for c in audit.checks if len(c.macs) == 1 and c.macs != [CLUSTER]]
    rows = []
    for topic in dict.fromkeys(c.topic for c in single):
        cells = []
        for mac in audit.macs:
            mine = [c for c in single if c.topic == topic and c.macs == [mac]]
            drift = [c for c in mine if not c.ok]
            if drift:
                cells.append({"state": "drift", "drifts": drift})
            elif mine:
                text = mine[0].found if len(mine) == 1 else f"{len(mine)} facts as expected"
                cells.append({"state": "ok", "text": text})
            else:
                cells.append({"state": "none", "text": "not compared"})
        rows.append({"topic": topic, "cells": cells})
    return rows


def render_html(audit: Audit, report: dict, output_dir: str) -> str:
    cluster = [c for c in audit.checks if len(c.macs) != 1 or c.macs == [CLUSTER]]
    return template_environment().get_template("audit.html.j2").render(
        report=report, headline=headline(report), rows=table(audit), cluster=cluster, output_dir=output_dir)


def write(directory: str | Path, audit: Audit, *, generated: str, inventory: str) -> tuple[dict, Path, Path]:
    """Write audit.json and audit.html atomically; (the report, their paths)."""
    directory = private_folder(directory)
    report = audit.to_dict(generated, inventory)
    json_path, html_path = directory / JSON_FILE, directory / HTML_FILE
    atomic_write_json(json_path, report)
    atomic_write_text(html_path, render_html(audit, report, str(directory)))
    return report, json_path, html_path

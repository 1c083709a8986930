"""The fabric's picture: Graphviz DOT (hosts as boxes, cables with ports, speed and /30) and an SVG
rendered from it; every finding drawn in red where it is, so a broken fabric shows its faults."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import (
    Link, gbps, model_of)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable

DOT_FILE = "fabric.dot"
SVG_FILE = "fabric.svg"
_RED = ", color=red, fontcolor=red"


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(hosts: list[str], models: dict, links: list[Link], addresses: dict[Cable, str], reason: str,
        findings: list[Finding]) -> str:
    """The picture in DOT; reason is its title."""
    notes: dict[Cable, list[str]] = {}  # cable found -> what is wrong with it
    gaps: dict[tuple[str, ...], str] = {}  # (host, host, note) -> line style: Macs not directly cabled
    red_hosts = set()
    for finding in findings:
        if finding.link:
            notes.setdefault(finding.link, []).append(finding.note)
        elif finding.gap:
            gaps.setdefault((*finding.gap, finding.note), "dotted" if finding.kind == "dock" else "dashed")
        red_hosts.update(finding.hosts)
    lines = ["graph fabric {", f'  graph [label={_q(reason)}, labelloc=t, fontname="Helvetica"];',
             '  node [shape=box, fontname="Helvetica"];', '  edge [fontname="Helvetica", fontsize=10];']
    for rank, host in enumerate(hosts):
        model = model_of(models, host)
        label = f"{host}\n{model.key if model else 'model unknown'}\nrank {rank}"
        lines.append(f"  {_q(host)} [label={_q(label)}{_RED if host in red_hosts else ''}];")
    for link in links:
        problem = notes.get(link.cable, [])
        label = "\n".join(filter(None, [gbps(link.speed_gbps), addresses.get(link.cable)] + problem))
        lines.append(f"  {_q(link.a.host)} -- {_q(link.b.host)} [label={_q(label)}, "
                     f"taillabel={_q(f'TB{link.a.receptacle} {link.a.device}')}, "
                     f"headlabel={_q(f'TB{link.b.receptacle} {link.b.device}')}{_RED if problem else ''}];")
    for (a, b, label), style in gaps.items():
        lines.append(f"  {_q(a)} -- {_q(b)} [label={_q(label)}, style={style}{_RED}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def svg(dot_text: str) -> tuple[str | None, str]:
    """The picture as SVG, or None and why not (Graphviz missing or failing)."""
    graphviz = shutil.which("dot")
    if graphviz is None:
        return None, "Graphviz 'dot' is not installed"
    result = subprocess.run([graphviz, "-Tsvg"], input=dot_text, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return None, "dot failed: " + (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[0]
    return result.stdout, ""


def write(directory: Path, dot_text: str) -> tuple[list[Path], list[str]]:
    """fabric.dot, and fabric.svg when Graphviz can render it: (paths written, one line per file
    skipped and why)."""
    atomic_write_text(directory / DOT_FILE, dot_text)
    written, skipped = [directory / DOT_FILE], []
    picture, why = svg(dot_text)
    if picture is None:
        return written, [f"{SVG_FILE}: skipped, {why}"]
    atomic_write_text(directory / SVG_FILE, picture)
    written.append(directory / SVG_FILE)
    return written, skipped

"""The printed Recovery checklist: one sheet per Mac that needs a person to enable RDMA.

Templates live in render/templates/ (checklist.html.j2 for a printer, one A4/Letter page per Mac;
checklist.txt.j2, the same content for a terminal or a label printer); this module renders them
with Jinja2 (HTML autoescaped) and writes them atomically next to the hostfile, with the RDMA
ledger (plugin_utils.rdma.readiness).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render import rdma_summary
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import printable, template_environment
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json, atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.versions import version_tuple
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.outputs import staged

HTML_FILE = "recovery-checklist.html"
TEXT_FILE = "recovery-checklist.txt"
_STAMP = re.compile(r"^State read (.+)$", re.MULTILINE)

# How a person enables RDMA, by the first macOS each way applies to (docs/recovery/README.md has the sources).
# Recovery and `rdma_ctl enable`: Apple TN3205, from macOS 26.2. The System Settings switch WWDC26 session 233
# shows ("Enable RDMA over Thunderbolt", then a restart) is tied to no macOS version by any source found, so it
# has no row: a Mac gets Recovery until one is cited, with the sheets' steps for it.
RECOVERY = "recovery"
ENABLE_PATHS = (("26.2", RECOVERY),)


def enable_path(product_version: str | None) -> str:
    """The way to enable RDMA on a Mac of this macOS (its facts' product_version): Recovery where the version is
    unknown or no source names another way for it."""
    version = version_tuple(product_version)
    found = [path for first, path in ENABLE_PATHS if version and version >= version_tuple(first)]
    return found[-1] if found else RECOVERY


def context(assessment: rdma.Assessment, *, inventory: str, output_dir: str, generated: str,
            addresses: dict | None = None, cli: bool = False) -> dict:
    """What the templates show; cli: the commands are mlx-fleet's (plugin_utils.base.fixes)."""
    pages = []
    for host in assessment.hosts(rdma.NEEDS_RECOVERY):
        page = assessment.nodes[host].to_dict()
        page["address"] = (addresses or {}).get(host)
        page["enable_path"] = enable_path(page["product_version"])
        pages.append(page)
    return printable({
        "pages": pages,
        "inventory": inventory,
        "output_dir": output_dir,
        "generated": generated,
        "summary": rdma_summary.summary(assessment),
        "command": fixes.run_command("checklist", inventory, cli=cli),
        "converge": fixes.run_command("site", inventory, cli=cli),
    })


def render(ctx: dict) -> tuple[str, str]:
    """(html, text) for a context from ``context``."""
    env = template_environment()
    return env.get_template("checklist.html.j2").render(ctx), env.get_template("checklist.txt.j2").render(ctx)


@dataclass
class Written:
    html: Path
    text: Path
    ledger: Path
    changed: bool  # the checklist's content or the ledger's record (not just its times) changed
    regressions: list[str]


def write(directory: str | Path, assessment: rdma.Assessment, *, inventory: str, generated: str,
          addresses: dict | None = None, write_files: bool = True, cli: bool = False) -> Written:
    """Render the checklist and update the ledger in directory (atomically; nothing when not write_files);
    cli: its commands are mlx-fleet's.

    A checklist whose sheets read the same as the ones on disk, but for the time they were made,
    is left alone, so a re-run over an unchanged cluster changes nothing but the ledger's times.
    """
    directory = Path(directory)
    html_path, text_path, ledger_path = directory / HTML_FILE, directory / TEXT_FILE, directory / rdma.LEDGER_FILE
    ledger = rdma.read_ledger(ledger_path)
    regressions = rdma.note_regressions(assessment, ledger)
    new_ledger, ledger_changed = rdma.update_ledger(ledger, assessment)

    def rendered(stamp: str) -> tuple[str, str]:
        return render(context(assessment, inventory=inventory, output_dir=str(directory), generated=stamp,
                              addresses=addresses, cli=cli))

    old = {p: p.read_text() if p.exists() else None for p in (html_path, text_path)}
    previous = _STAMP.search(old[text_path] or "")
    html, text = rendered(generated)
    changed = ledger_changed
    if previous:
        html_then, text_then = rendered(previous.group(1))
        if (html_then, text_then) == (old[html_path], old[text_path]):
            html, text = html_then, text_then  # the same sheets: keep them as they are
        else:
            changed = True
    else:
        changed = True
    if write_files:
        with staged(directory) as stage:  # published together with the hostfiles' generation
            for path, content in ((html_path, html), (text_path, text)):
                if old[path] != content:
                    atomic_write_text(stage / path.name, content)
            if new_ledger != ledger:
                atomic_write_json(stage / ledger_path.name, new_ledger)
    return Written(html_path, text_path, ledger_path, changed, regressions)

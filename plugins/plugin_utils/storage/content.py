# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Where the collection's own files are: one place, valid in a clone, an installed collection and the wheel.

The wheel installs the collection as ``ansible_collections/mlx_fleet/cluster`` in site-packages, so
every path here stays inside the installed collection."""

from __future__ import annotations

from pathlib import Path

import jinja2

# plugins/plugin_utils/storage/content.py -> the collection's root
COLLECTION_ROOT = Path(__file__).parents[3]
# The printed reports' templates, beside their renderers (plugin_utils/render/).
TEMPLATES = COLLECTION_ROOT / "plugins" / "plugin_utils" / "render" / "templates"
ROLES = COLLECTION_ROOT / "roles"


def template_environment(*folders: Path) -> jinja2.Environment:
    """Jinja2 for the printed reports (the Recovery checklist, the audit; the CLI's own from its FOLDERS, the
    watch's status page): HTML autoescaped, strict."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([*(str(folder) for folder in folders), str(TEMPLATES)]),
        autoescape=lambda name: bool(name) and ".html" in name,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def printable(value):
    """value with every non-printable character of its strings (newline, carriage return, form feed,
    terminal escapes, line separators) written as its escape (\\n, \\x1b): the lines of a sheet or of the
    terminal come from mlx-fleet's own text only, never from a value an inventory or a Mac supplied (a
    serial number with a newline would forge a line). The one cleaning of every printed report."""
    if isinstance(value, str):
        return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value)
    if isinstance(value, dict):
        return {key: printable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(item) for item in value]
    return value


def terminal_text(lines) -> str:
    """Lines for the terminal, each cleaned with printable: a line break inside one (a multi-line message)
    continues it indented, so nothing a Mac or an inventory supplied starts a line of its own."""
    out = []
    for line in lines:
        first, *more = str(line).split("\n")
        out += [printable(first), *("  " + printable(part) for part in more)]
    return "\n".join(out)

# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Where the collection's own files are: one place, valid in a clone, an installed collection and the wheel.

The wheel installs the collection as ``ansible_collections/mlx_fleet/cluster`` in site-packages, so
every path here stays inside the installed collection."""

from __future__ import annotations

from pathlib import Path

import jinja2

# plugins/plugin_utils/content.py -> the collection's root
COLLECTION_ROOT = Path(__file__).parent.parent.parent
TEMPLATES = COLLECTION_ROOT / "docs" / "recovery"
AUDIT_TEMPLATES = COLLECTION_ROOT / "docs" / "audit"
WATCH_TEMPLATES = COLLECTION_ROOT / "docs" / "watch"
ROLES = COLLECTION_ROOT / "roles"


def template_environment() -> jinja2.Environment:
    """Jinja2 for the printed reports (the Recovery checklist, the audit, the watch's status page): HTML autoescaped, strict."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(TEMPLATES), str(AUDIT_TEMPLATES), str(WATCH_TEMPLATES)]),
        autoescape=lambda name: bool(name) and ".html" in name,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )

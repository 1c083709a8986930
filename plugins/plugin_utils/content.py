# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""Where the collection's own files are: one place, valid in a clone, an installed collection and the wheel.

The wheel installs the collection as ``ansible_collections/mlx_fleet/cluster`` in site-packages, so
every path here stays inside the installed collection."""

from __future__ import annotations

from pathlib import Path

# plugins/plugin_utils/content.py -> the collection's root
COLLECTION_ROOT = Path(__file__).parent.parent.parent
TEMPLATES = COLLECTION_ROOT / "docs" / "recovery"
ROLES = COLLECTION_ROOT / "roles"

"""Shared test set-up: make the repository's collection importable by its FQCN."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# collections/ansible_collections/mlx_fleet/cluster links back to the repository root.
sys.path.insert(0, str(REPO / "collections"))

REFERENCE_DIR = (REPO.parent / "shared" / "reference").resolve()
FIXTURE_DIR = REPO / "tests" / "fixtures" / "macos"

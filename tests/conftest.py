"""Shared test set-up: make the repository's collection importable by its FQCN."""

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# collections/ansible_collections/mlx_fleet/cluster links back to the repository root.
sys.path.insert(0, str(REPO / "collections"))

REFERENCE_DIR = (REPO.parent / "shared" / "reference").resolve()
FIXTURE_DIR = REPO / "tests" / "fixtures" / "macos"


# A prompt line the source kept: "% cmd", "~ % cmd", "$ cmd", "user@host dir % cmd".
_PROMPT = re.compile(r"^(?:\S+(?: \S+)* )?[%$] \S")


def load(path):
    """The published output: without the '# source:' line and a leading prompt line."""
    lines = path.read_text().split("\n")
    assert lines[0].startswith("# source: "), path.name
    body = lines[1:]
    if body and _PROMPT.match(body[0]):
        body = body[1:]
    return "\n".join(body)

"""The molecule scenarios pass: converge, idempotence and testinfra verification on the sim."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from simlib import BIN

pytestmark = pytest.mark.sim
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("scenario", sorted(p.name for p in (REPO / "molecule").iterdir() if p.is_dir()))
def test_scenario(scenario):
    env = os.environ | {"PATH": f"{BIN}:{os.environ['PATH']}", "NO_COLOR": "1", "ANSIBLE_FORCE_COLOR": "0"}
    result = subprocess.run([str(BIN / "molecule"), "test", "-s", scenario], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=1200)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "Idempotence completed successfully" in output or "idempotence: Executed: Successful" in output
    assert "1 successful" in output

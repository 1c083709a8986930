"""The CLI starts without the simulator: only `mlx-fleet sim` imports mlx_fleet.sim."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from mlx_fleet import cli
try:
    status = cli.main(sys.argv[1:])
except SystemExit as exc:
    status = exc.code
print("SIM" if any(m == "mlx_fleet.sim" or m.startswith("mlx_fleet.sim.") for m in sys.modules) else "NO-SIM")
"""


def _probe(*argv: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=False)
    return done.stdout.split()


def test_version_and_help_do_not_import_the_simulator():
    assert _probe("--version") == ["mlx-fleet", "0.2.0", "NO-SIM"]
    out = _probe("--help")
    assert out[-1] == "NO-SIM" and "sim" in out  # still listed


def test_the_sim_command_imports_it_and_says_its_errors_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE, "sim", "status", "--dir", str(tmp_path / "none")],
                          capture_output=True, text=True, check=False)
    assert done.stdout.split() == ["SIM"]
    assert done.stderr.startswith("mlx-fleet sim: ") and str(tmp_path / "none") in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr

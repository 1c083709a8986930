"""Wall time of `mlx-fleet audit` on 4 and on 16 simulated Macs (needs root, like macsim).

The Macs are read in parallel (one read-only module call each), so 16 Macs should take at most twice
as long as 4. The clusters are fresh, never converged: the audit must work on them (everything is
drift), and a fresh Mac has no environment to hash, so this measures the reads and the comparison.

    .venv/bin/python benchmarks/audit.py [--runs 3] [--sizes 4 16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MLX_FLEET = str(Path(sys.executable).parent / "mlx-fleet")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([MLX_FLEET, *args], capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)


def time_audits(nodes: int, runs: int) -> list[float]:
    """Seconds of each `mlx-fleet audit` on a fresh cluster of NODES simulated Macs."""
    folder = Path(tempfile.mkdtemp(prefix=f"mlx-fleet-bench-audit-{nodes}-", dir="/var/tmp"))
    folder.chmod(0o755)
    up = _run("sim", "up", "--dir", str(folder), "--nodes", str(nodes), "--topology", "ring")
    if up.returncode != 0:
        raise SystemExit(f"sim up failed: {up.stderr or up.stdout}")
    try:
        times = []
        for _ in range(runs):
            started = time.monotonic()
            result = _run("audit", "-i", str(folder / "inventory.yml"), "--format", "json")
            times.append(time.monotonic() - started)
            report = json.loads(result.stdout)
            if result.returncode != 1 or len(report["macs"]) != nodes:  # a fresh cluster is all drift
                raise SystemExit(f"audit on {nodes} Macs: exit {result.returncode}, {len(report['macs'])} Macs read")
        return times
    finally:
        _run("sim", "down", "--dir", str(folder))
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="audits per cluster size (the median counts)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16], help="cluster sizes")
    args = parser.parse_args(argv)
    medians = {}
    for nodes in args.sizes:
        times = time_audits(nodes, args.runs)
        medians[nodes] = statistics.median(times)
        print(f"audit on {nodes:>2} Macs: median {medians[nodes]:.1f} s  (runs: {', '.join(f'{t:.1f}' for t in times)})")
    small, large = min(medians), max(medians)
    if small != large:
        ratio = medians[large] / medians[small]
        print(f"{large} Macs / {small} Macs: {ratio:.2f}x (goal: at most 2x)")
        return 0 if ratio <= 2 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What `mlx-fleet run` costs on top of plain `mlx.launch` (needs root, like macsim): a converged 4-Mac ring,
a trivial script (examples/all_sum.py), each tool run alternately (interleaved, under the same load), the
medians of their wall time and of the controller's CPU time (the tool and its children). The goal (issue 29):
the check and the record cost at most 1.5 s more.

    .venv/bin/python benchmarks/run_overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOAL_SECONDS = 1.5
sys.path.insert(0, str(REPO / "tests/sim"))
from simlib import node_python  # noqa: E402  (one interpreter with MLX at the same path on every simulated Mac)


def _run(argv: list[str], timeout: float = 900) -> subprocess.CompletedProcess:
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd="/",
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


def _timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, the controller's CPU seconds: the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    _run(argv)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each tool, alternately (default 5)")
    args = parser.parse_args(argv)
    python, script = node_python()
    folder = Path(tempfile.mkdtemp(prefix="mlx-fleet-bench-run-", dir="/var/tmp"))
    folder.chmod(0o755)  # the simulated Macs' admin user reads from here
    names = [f"brun-{os.getpid() % 10000}-{i}" for i in range(1, 5)]  # names of their own: other clusters may be up
    (folder / "plan.yml").write_text(yaml.safe_dump({"nodes": {n: {"model": "mini-m4-pro"} for n in names},
                                                    "cables": [f"{names[i]}:2 -- {names[(i + 1) % 4]}:1"
                                                               for i in range(4)]}))
    _run([str(BIN / "mlx-fleet"), "sim", "up", "--dir", str(folder), "--topology", str(folder / "plan.yml"),
          "--rdma", "none"])
    try:
        inventory = folder / "inventory.yml"
        _run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks/fabric.yml")])
        hostfile = folder / ".mlx-fleet" / "hostfile.json"
        theirs = [str(BIN / "mlx.launch"), "--hostfile", str(hostfile), "--backend", "ring", "--", python, script]
        ours = [str(BIN / "mlx-fleet"), "run", "-i", str(inventory), "--python", python, "--out",
                str(folder / "runs"), "--", script]
        figures: dict[str, list[tuple[float, float]]] = {"mlx.launch": [], "mlx-fleet run": []}
        for _ in range(args.runs):
            figures["mlx.launch"].append(_timed(theirs))
            figures["mlx-fleet run"].append(_timed(ours))
    finally:
        subprocess.run([str(BIN / "mlx-fleet"), "sim", "down", "--dir", str(folder)], capture_output=True,
                       stdin=subprocess.DEVNULL, cwd="/")
        shutil.rmtree(folder, ignore_errors=True)
    wall = {who: statistics.median(w for w, _ in runs) for who, runs in figures.items()}
    cpu = {who: statistics.median(c for _, c in runs) for who, runs in figures.items()}
    more = wall["mlx-fleet run"] - wall["mlx.launch"]
    print("| figure | mlx-fleet run | mlx.launch | more | goal |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| all_sum.py on a converged 4-Mac ring (median of {args.runs}, interleaved) | "
          f"{wall['mlx-fleet run']:.1f} s, {cpu['mlx-fleet run']:.1f} CPU-s | {wall['mlx.launch']:.1f} s, "
          f"{cpu['mlx.launch']:.1f} CPU-s | {more:+.1f} s | <= +{GOAL_SECONDS:g} s: "
          f"{'met' if more <= GOAL_SECONDS else 'NOT MET'} |")
    print("load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3]) + f" on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

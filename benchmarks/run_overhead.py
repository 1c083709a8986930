"""What `mlx-fleet run` costs on top of plain `mlx.launch` (needs root, like macsim): a converged 4-Mac ring,
a trivial script (examples/all_sum.py), each tool run alternately (interleaved, under the same load), the
medians of their wall time and of the controller's CPU time (the tool and its children). The goal (issue 29):
the check and the record cost at most 1.5 s more. With --baseline TREE (an earlier mlx-fleet's source tree),
that tree's `mlx-fleet run` runs too, interleaved, with this venv and its src/ and collections/ first on
PYTHONPATH, as benchmarks/bench.py does it.

    .venv/bin/python benchmarks/run_overhead.py [--runs 5] [--baseline TREE]
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
BASELINE = "mlx-fleet run, baseline"
sys.path.insert(0, str(REPO / "tests/sim"))
from simlib import node_python  # noqa: E402  (one interpreter with MLX at the same path on every simulated Mac)


def _run(argv: list[str], timeout: float = 900, tree: Path | None = None) -> subprocess.CompletedProcess:
    """ARGV run to its end; TREE: with that mlx-fleet source tree first on PYTHONPATH."""
    env = os.environ | {"ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(tree / "collections")])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd="/",
                          env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


def _timed(argv: list[str], tree: Path | None = None) -> tuple[float, float]:
    """(wall seconds, the controller's CPU seconds: the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    _run(argv, tree=tree)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of each tool, alternately (default 5)")
    parser.add_argument("--baseline", type=Path, metavar="TREE",
                        help="an earlier mlx-fleet's source tree whose mlx-fleet run runs too, interleaved")
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
        trees = {"mlx.launch": None, "mlx-fleet run": None} | ({BASELINE: args.baseline.resolve()}
                                                                 if args.baseline else {})
        figures: dict[str, list[tuple[float, float]]] = {who: [] for who in trees}
        for _ in range(args.runs):
            for who, tree in trees.items():
                figures[who].append(_timed(theirs if who == "mlx.launch" else ours, tree))
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
    if args.baseline:
        print(f"| the same, {BASELINE} ({args.baseline}) | {wall[BASELINE]:.1f} s, {cpu[BASELINE]:.1f} CPU-s | "
              f"{wall['mlx.launch']:.1f} s, {cpu['mlx.launch']:.1f} CPU-s | "
              f"{wall[BASELINE] - wall['mlx.launch']:+.1f} s | |")
    print("load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3]) + f" on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())

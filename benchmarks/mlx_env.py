#!/usr/bin/env python3
"""Benchmark: the MLX environment on a fresh simulated cluster (roles/mlx_env).

Brings up an N-Mac mesh (macsim, needs root), fills the controller's download cache if it
is empty (a first converge, reported as cold), then on fresh clusters times playbooks/env.yml
and site.yml with the warm cache, a no-op site.yml, and a no-op playbooks/env.yml, counting the commands
each Mac ran over SSH in the no-op env.yml (one per module execution or transfer step).

    .venv/bin/python benchmarks/mlx_env.py [--nodes 4] [--dir /tmp/bench-env] [--cache DIR]

Figures depend on the machine (the sim's Macs share its CPUs); compare runs on one machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(argv: list[str], env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return proc, elapsed


def sim(*args: str) -> None:
    run([str(BIN / "mlx-fleet"), "sim", *args])


def playbook(sim_dir: Path, name: str, cache: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return run([str(BIN / "ansible-playbook"), "-i", str(sim_dir / "inventory.yml"), str(REPO / name),
                "-e", f"mlx_env_cache_dir={cache}", "-e", f"mlx_fleet_output_dir={sim_dir / 'out'}", *extra], env)


def remote_commands(verbose_output: str) -> dict[str, int]:
    """Commands ansible ran on each Mac over SSH (-vvv prints one EXEC line each)."""
    counts: dict[str, int] = {}
    for host in re.findall(r"^<([^>]+)> SSH: EXEC ", verbose_output, re.M):
        counts[host] = counts.get(host, 0) + 1
    return counts


def changed(output: str) -> dict[str, int]:
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", output, re.M)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench-env"))
    parser.add_argument("--cache", type=Path, default=Path("/var/tmp/mlx-fleet-env-cache"),
                        help="controller download cache, kept between runs (default: %(default)s)")
    args = parser.parse_args()
    figures: dict = {"nodes": args.nodes}

    def fresh_cluster() -> None:
        if (args.dir / "state.json").exists():
            sim("down", "--dir", str(args.dir))
        shutil.rmtree(args.dir, ignore_errors=True)
        sim("up", "--dir", str(args.dir), "--nodes", str(args.nodes), "--topology", "mesh", "--rdma", "all")

    try:
        if not (args.cache / "artifacts").is_dir() or not any((args.cache / "artifacts").iterdir()):
            fresh_cluster()
            _, figures["env_fresh_cold_cache_s"] = playbook(args.dir, "playbooks/env.yml", args.cache)
        fresh_cluster()
        _, figures["env_fresh_warm_cache_s"] = playbook(args.dir, "playbooks/env.yml", args.cache)
        fresh_cluster()
        out, figures["site_fresh_warm_cache_s"] = playbook(args.dir, "site.yml", args.cache)
        out, figures["site_noop_s"] = playbook(args.dir, "site.yml", args.cache)
        figures["site_noop_changed"] = changed(out.stdout)
        out, figures["env_noop_s"] = playbook(args.dir, "playbooks/env.yml", args.cache, "-vvv")
        figures["env_noop_remote_commands"] = remote_commands(out.stdout)
    finally:
        if (args.dir / "state.json").exists():
            sim("down", "--dir", str(args.dir))
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

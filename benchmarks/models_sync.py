"""`make bench`'s models rows (issue 28): `mlx-fleet models sync` of a model of about 1 GiB (4 safetensors shards of
random bytes, a config, a tokenizer; a path entry) on simulated Macs in a ring (root, like the simulator):

  sync first     the first sync to 4 Macs that hold none of it: the controller feeds one Mac over the management
                 network, the others copy along the cables, every byte hashed at the receiver
  sync from Mac  the same with one Mac already holding it (where mlx_lm.share starts): every copy over a cable
  mlx_lm.share   MLX's own copy (mlx-lm from the bench extra, pinned in constraints.txt, installed into a Python
                 every simulated Mac runs at one path), ring backend over the same cables (the hostfile
                 `mlx-fleet hostfile` writes), from the Mac holding it to the 3 others; it verifies nothing
  floor          one raw TCP stream of the same bytes over one cable, not hashed (models_transport.py's "raw")
  floor (the sync's cables at once, to disk)
                 one such stream for every copy the last `sync from Mac` made (sender, receiver), all at once,
                 each over the cable the two share, each file on the receiver's disk (fsync) before its rename as
                 the sync's are: what the simulated Macs' shared CPUs and disk allow those copies
  no-op          a sync with nothing to copy after one that wrote every copy (no byte hashed); goal at most 3 s
  sync first N   the first sync at 2 and 8 Macs, each on a cluster of its own

The 4-Mac rows run interleaved on one cluster, round by round, the order rotating; each copy starts from Macs
cleared of the previous one. Beside the wall seconds: the CPU seconds of the command and its children (the
controller's; the floor's are both Macs') and the whole machine's busy CPU seconds meanwhile (the simulated Macs
included: on a shared machine the wall seconds are noise beside them). Prints one JSON line per run, then the
medians, the load average at the start and the end, and under a goal not met the profile of its median run.

    python benchmarks/models_sync.py [--mib 1024] [--rounds 3] [--macs 2,8] [--rows no-op]

--rows runs only the 4-Mac rows named (their first word: sync, mlx_lm.share, floor, no-op), and no other cluster
size unless --macs names one; a goal whose rows did not run is left out.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import Cluster, busy_cpu_seconds, children_cpu_seconds, load, run_profile, run_profiled
from models_transport import Bench as Transport
from models_transport import MODEL

REPOSITORY = Path(__file__).resolve().parents[1]
SHARE_PYTHON = Path("/var/tmp/mlx-fleet-bench-mlx-lm")  # outside the sims' private folders: every Mac runs it
SHARE_HOME = "/Users/admin/share-bench"  # the admin's own, where mlx_lm.share (run as the admin) writes
NOOP_GOAL = 3.0
CABLES_FLOOR = "floor (the sync's cables at once, to disk)"
SHOWN = ("seconds", "cpu_seconds", "machine_cpu_seconds", "hashed_bytes")  # per run, on its JSON line


def share_python() -> Path:
    """mlx_lm.share in a Python the simulated Macs share (their own /usr/bin/python3's venv), with mlx and mlx-lm
    at the versions constraints.txt pins (the bench extra)."""
    share = SHARE_PYTHON / "venv" / "bin" / "mlx_lm.share"
    if not share.exists():
        SHARE_PYTHON.mkdir(mode=0o755, parents=True, exist_ok=True)
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(SHARE_PYTHON / "venv")], check=True)
        subprocess.run([str(SHARE_PYTHON / "venv" / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        "-c", str(REPOSITORY / "constraints.txt"), "mlx[cpu]", "mlx-lm"], check=True)
    return share


def timed(argv: list[str], env: dict | None = None, runs: Path | None = None) -> dict:
    """Wall seconds, the command's CPU seconds with its children's, the machine's busy CPU seconds; the profile of
    an mlx-fleet run (its newest run folder under RUNS: `models sync` prints its report, not the summary naming
    it)."""
    machine, own, wall = busy_cpu_seconds(), children_cpu_seconds(), time.time()
    seconds, summary, profile = run_profiled(argv, env)
    folders = sorted(runs.iterdir(), key=lambda p: p.stat().st_mtime) if runs and runs.is_dir() else []
    if folders and not profile:
        profile = run_profile(f"full output: {folders[-1]}/stdout", wall, wall + seconds)
    return {"seconds": round(seconds, 2), "cpu_seconds": round(children_cpu_seconds() - own, 2),
            "machine_cpu_seconds": round(busy_cpu_seconds() - machine, 2), "profile": profile, "summary": summary,
            "hashed_bytes": hashed_bytes(folders[-1]) if folders else None, "run": folders[-1] if folders else None}


def copies_made(run: Path) -> list[tuple[str, str]]:
    """(sender, receiver) of every Mac's copy in a `models sync` run, from its report's event (each row's senders)."""
    for path in (run / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task_action") == "mlx_fleet.cluster.models_sync_report":
            return sorted((sender, row["mac"]) for row in data["res"]["report"]["rows"] for sender in row["senders"])
    raise SystemExit(f"{run}: no sync report among its events")


def hashed_bytes(run: Path) -> int | None:
    """The bytes the Macs' read before the plan hashed, from the run's events (model_files_facts' hashed_bytes;
    None from a read that does not say, which hashed every byte)."""
    found = None
    for path in (run / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and data.get("task_action") == "mlx_fleet.cluster.model_files_facts":
            said = data["res"]["ansible_facts"]["mlx_fleet_model_files"].get("hashed_bytes")
            found = None if said is None else (found or 0) + said
    return found


class ModelsBench:
    """A cluster of N Macs in a ring with the cables' addresses (`mlx-fleet hostfile`) and the model declared as a
    path entry of the controller; the first Mac holds it as the sync puts it (the transport's sender)."""

    def __init__(self, cluster: Cluster, mib: int):
        self.cluster, self.macs = cluster, cluster.nodes
        timed(cluster.mlx_fleet("hostfile"))
        self.transport = Transport(cluster.dir, self.macs[0], self.macs[1])
        self.expected = self.transport.make_model(mib)  # on the first Mac, at the path the sync keeps it
        self.bytes = sum(p.stat().st_size for p in self.held(self.macs[0]).iterdir())
        self.source = cluster.dir / "source" / MODEL  # the controller's folder: the same bytes
        shutil.copytree(self.held(self.macs[0]), self.source)
        inventory = yaml.safe_load(cluster.inventory.read_text())
        inventory["all"]["children"]["mlx_cluster"]["vars"]["mlx_fleet_models"] = [
            {"name": MODEL, "path": str(self.source)}]
        cluster.inventory.write_text(yaml.safe_dump(inventory, sort_keys=False))
        self.env = dict(os.environ, PATH=f"{cluster.dir / 'own-ssh'}:{os.environ['PATH']}")
        self.first_written_by_sync = False  # the first Mac's copy is the transport's, outside the sync's record
        self.copies: list[tuple[str, str]] = []  # (sender, receiver) of every copy the last sync from a Mac made

    def held(self, mac: str) -> Path:
        return self.transport.host_path(mac, f"/opt/mlx-fleet/models/{MODEL}")

    def clear(self, macs: list[str]) -> None:
        self.first_written_by_sync &= self.macs[0] not in macs
        for mac in macs:
            shutil.rmtree(self.held(mac), ignore_errors=True)
            shutil.rmtree(self.transport.host_path(mac, SHARE_HOME), ignore_errors=True)

    def sync(self) -> dict:
        argv = self.cluster.mlx_fleet("models")
        return timed([*argv[:2], "sync", *argv[2:]], runs=self.cluster.dir / "out" / "runs")

    def sync_first(self) -> dict:
        self.clear(self.macs)
        found = self.sync()
        self.check_held(self.macs)
        self.first_written_by_sync = True
        return found

    def sync_from_mac(self) -> dict:
        self.clear(self.macs[1:])
        found = self.sync()
        self.check_held(self.macs)
        self.copies = copies_made(found["run"])
        return found

    def noop(self) -> dict:
        """A sync after one that wrote every Mac's copy (a copy made otherwise is hashed at every sync)."""
        if not self.first_written_by_sync:
            self.sync_first()
        elif not all(self.held(mac).is_dir() for mac in self.macs):  # after mlx_lm.share's round
            self.sync()
        return self.sync()

    def share(self) -> dict:
        """mlx_lm.share from the first Mac (the model in the admin's home) to the others, ring backend."""
        self.clear(self.macs[1:])
        self.sync_if_missing()
        source = self.transport.host_path(self.macs[0], f"{SHARE_HOME}/{MODEL}")
        if not source.exists():
            shutil.copytree(self.held(self.macs[0]), source)
            admin = source.parent.parent.stat()
            for path in (source.parent, source, *source.iterdir()):
                os.chown(path, admin.st_uid, admin.st_gid)
        for mac in self.macs:  # every rank makes its temporary folder there (the destination's file system)
            tmp = self.transport.host_path(mac, f"{SHARE_HOME}/tmp")
            tmp.mkdir(parents=True, exist_ok=True)
            admin = tmp.parent.parent.stat()
            for path in (tmp.parent, tmp):
                os.chown(path, admin.st_uid, admin.st_gid)
        found = timed([str(share_python()), "--path", f"{SHARE_HOME}/{MODEL}", "--tmpdir", f"{SHARE_HOME}/tmp",
                       "--hostfile", str(self.cluster.dir / "out" / "hostfile-ring.json")], self.env)
        for mac in self.macs[1:]:
            copied = self.transport.host_path(mac, f"{SHARE_HOME}/{MODEL}")
            assert sorted(p.name for p in copied.iterdir()) == sorted(self.expected), f"mlx_lm.share on {mac}"
        return found

    def sync_if_missing(self) -> None:
        if not self.held(self.macs[0]).is_dir():
            self.sync()

    def floor(self) -> dict:
        self.sync_if_missing()
        found = self.transport.measure("raw", self.expected, self.bytes / (1 << 20))
        return {"seconds": found["seconds"], "cpu_seconds": found["cpu_seconds"], "machine_cpu_seconds": None,
                "profile": [], "summary": ""}

    def floor_cables(self) -> dict:
        """Raw streams for the copies the last sync from a Mac made, at once (that sync first if none ran yet)."""
        if not self.copies:
            self.sync_from_mac()
        elif not all(self.held(mac).is_dir() for mac in self.macs):  # after mlx_lm.share's or the first sync's round
            self.sync()
        machine = busy_cpu_seconds()
        seconds = self.transport.raw_at_once(self.copies, self.expected)
        machine = round(busy_cpu_seconds() - machine, 2)  # its Macs' CPU: nothing else of the bench runs meanwhile
        print(f"# {CABLES_FLOOR}: " + ", ".join(f"{a} -> {b}" for a, b in self.copies), flush=True)
        return {"seconds": round(seconds, 2), "cpu_seconds": machine, "machine_cpu_seconds": machine, "profile": [],
                "summary": ""}

    def check_held(self, macs: list[str]) -> None:
        for mac in macs:
            assert sorted(p.name for p in self.held(mac).iterdir()) == sorted(self.expected), f"sync on {mac}"


def own_ssh(cluster: Cluster) -> None:
    """A plain `ssh` first on PATH that reads this cluster's ssh_config only (mlx_lm.share calls `ssh NODE`)."""
    folder = cluster.dir / "own-ssh"
    folder.mkdir()
    (folder / "ssh").write_text(f"#!/bin/sh\nexec {shutil.which('ssh')} -F {cluster.dir / 'ssh_config'} \"$@\"\n")
    (folder / "ssh").chmod(0o755)


def median_row(name: str, runs: list[dict], size: int) -> dict:
    pick = sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]
    machine = [r["machine_cpu_seconds"] for r in runs if r["machine_cpu_seconds"] is not None]
    return {"row": name, "runs": len(runs), "seconds": statistics.median(r["seconds"] for r in runs),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
            "machine_cpu_seconds": statistics.median(machine) if machine else None,
            "mb_per_s": round(size / 1e6 / statistics.median(r["seconds"] for r in runs), 1), "median_run": pick}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--macs", default=None, help="the other cluster sizes of the first sync's row (default "
                        "2,8; none with --rows)")
    parser.add_argument("--rows", default="", help="only the 4-Mac rows named, comma-separated (no-op, floor, ...)")
    args = parser.parse_args(argv)
    wanted = [row for row in args.rows.split(",") if row]
    macs_sizes = args.macs if args.macs is not None else ("" if wanted else "2,8")
    print(f"# {load()}; {args.mib} MiB model, {args.rounds} rounds", flush=True)
    if not wanted or "mlx_lm.share" in wanted:
        share_python()
    root = Path(tempfile.mkdtemp(prefix="mlx-fleet-bench-models-", dir="/var/tmp"))
    root.chmod(0o755)
    rows = []
    try:
        with Cluster(root, 4, "ring") as cluster:
            own_ssh(cluster)
            bench = ModelsBench(cluster, args.mib)
            kinds = {"sync first 4": bench.sync_first, "sync from Mac 4": bench.sync_from_mac,
                     "mlx_lm.share 4": bench.share, "floor (1 cable)": bench.floor,
                     CABLES_FLOOR: bench.floor_cables, "no-op 4": bench.noop}
            kinds = {name: run for name, run in kinds.items() if not wanted or name.split()[0] in wanted}
            results = {name: [] for name in kinds}
            names = list(kinds)
            for round_number in range(args.rounds):
                for name in names[round_number % len(names):] + names[:round_number % len(names)]:
                    found = kinds[name]()
                    results[name].append(found)
                    print(json.dumps({"row": name, "round": round_number + 1,
                                      **{k: found.get(k) for k in SHOWN}}),
                          flush=True)
            rows += [median_row(name, runs, bench.bytes) for name, runs in results.items()]
        for macs in [int(n) for n in macs_sizes.split(",") if n]:
            with Cluster(root, macs, "ring") as cluster:
                bench = ModelsBench(cluster, args.mib)
                runs = []
                for round_number in range(args.rounds):
                    runs.append(bench.sync_first())
                    print(json.dumps({"row": f"sync first {macs}", "round": round_number + 1,
                                      **{k: runs[-1].get(k) for k in SHOWN}}),
                          flush=True)
                rows.append(median_row(f"sync first {macs}", runs, bench.bytes))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"# medians ({load()}): row, wall s, CPU s (controller; the floor: both Macs; the cables' floor: the "
          "machine's), machine CPU s, MB/s "
          "(the model's bytes over the wall time)")
    for row in rows:
        machine = f"{row['machine_cpu_seconds']:8.2f}" if row["machine_cpu_seconds"] is not None else "       -"
        print(f"{row['row']:42s} {row['seconds']:7.2f} {row['cpu_seconds']:7.2f} {machine} {row['mb_per_s']:8.1f}")
    by_name = {row["row"]: row for row in rows}
    goals = [("no-op 4", None, NOOP_GOAL, f"at most {NOOP_GOAL} s"),
             ("sync from Mac 4", "mlx_lm.share 4", 1.0, "faster than mlx_lm.share, every byte verified"),
             ("sync from Mac 4", "floor (1 cable)", 1.5, "within 1.5x of one raw stream over one cable"),
             ("sync from Mac 4", CABLES_FLOOR, 1.5,
              "within 1.5x of raw streams over the same cables at once, to disk")]
    for name, against, limit, what in goals:
        if name not in by_name or (against and against not in by_name):
            continue
        seconds = by_name[name]["seconds"]
        ratio = seconds / by_name[against]["seconds"] if against else seconds
        met = ratio <= limit
        print(f"# goal {name}: {what}: {ratio:.2f}{'x' if against else ' s'} {'met' if met else 'NOT met'}")
        if not met:
            for spent, where in sorted(by_name[name]["median_run"]["profile"], reverse=True)[:8]:
                print(f"#   {spent:6.2f} s  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

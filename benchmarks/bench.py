"""The waits a user knows, measured on macsim: `make bench` (root, like the simulator).

Each figure runs interleaved with its comparison on the same simulated cluster, and the table
gives medians and ratios:

  hostfile   `mlx-fleet hostfile` against MLX's `mlx.distributed_config --backend B --auto-setup`:
             a mesh of 4 Mac Studios (jaccl) and a ring of 8 (jaccl-ring); each tool on a cluster of
             its own (MLX's --auto-setup gives the ports addresses of its own scheme, which mlx-fleet
             would then put back, and the other way round), after one untimed run of its own there
             (mlx-fleet configures a fresh cluster's ports in it)
  site       `mlx-fleet converge` (site.yml) on a fresh cluster, then again with nothing to do,
             at 4 Macs (mesh), 8 and 16 (ring; 16: the fresh converge once per tree, the no-op repeated),
             with the tasks of the busiest Mac (ok + skipped); the no-op row's note counts the module runs
             each play costs a converged Mac (-vvv, untimed). Beside each no-op, on the same cluster, the
             floor: one parallel round over cold SSH, outside Ansible, of the reads the converge's modules
             run to show nothing differs (NOOP_READS), all of a Mac's at once in one ssh session
             (--site-macs 4,16: only those sizes)
  noop       the site figure's no-op rows alone: each tree's cluster converged once, untimed, then its no-op
             and the floor, interleaved, at the same sizes (--site-macs too)
  memory     the controller's peak memory during a fresh site.yml on 4 and on 16 Macs: its largest
             process (RSS), and its whole process tree (proportional set size: forked workers share
             pages); the 16-Mac row's note says what each Mac beyond 4 added
  audit      `mlx-fleet audit` at 4 and 16 converged Macs, when the command exists, with the CPU time
             the whole machine spent meanwhile: the controller's share (mlx-fleet and its children)
             and the rest, the simulated Macs' own work, which a real rack does on each Mac's CPUs
  watch      one round of `mlx-fleet watch`'s probe at 4 and 16 Macs (ring), in this process: the
             controller's CPU for the round (its own and its ssh processes'), and the round's wait
  verify     `mlx-fleet verify` on a converged 4-Mac ring with one cable pulled: how long until it
             fails naming both ends

With --baseline [REF] (a git revision, by default the merge-base of HEAD with main; or the path of an
earlier mlx-fleet's source tree), every mlx-fleet figure also runs with that code, interleaved (before,
after, before, after ...), for a before/after measured under the same load: a revision is checked out in
a git worktree of its own under the bench's folder, removed afterwards, and runs with this venv, its src/
and collections/ first on PYTHONPATH (the simulator is this tree's, so a baseline older than a sim feature
still runs on today's sim). `make bench BENCH_ARGS="--baseline main --only site"`.

The table gives each row's goals and whether its medians meet them (GOALS: the hostfile at most 0.40x
MLX's time; a no-op converge at most 2x its floor, at most 4 s at 4 Macs, and at 16 Macs at most 2x the
4-Mac no-op; with --baseline no row slower than the baseline). The load average is printed at the start
and the end: the machine may be shared. Under a goal not met it prints the profile of mlx-fleet's median run of that row: where
its wall time went, step by step, from ansible-runner's events (the start before the first event,
each task until the next, the end after the recap), largest first. Every run starts with cold SSH connections (a ControlPath folder of its own),
as MLX's plain `ssh` calls do. Clusters come up under /tmp/mlx-fleet-bench-* and go down afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import resource
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_commands, mlx_env, node_facts, thunderbolt_services
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from mlx_fleet.capture import remote_command
from mlx_fleet.sim.layout import generated_cables
from mlx_fleet.verify import nodes as ssh_nodes, plan

BIN = Path(sys.executable).parent
FIGURES = ("hostfile", "site", "noop", "memory", "audit", "watch", "verify")
RECAP = re.compile(r"^(\S+)\s+: (ok=.*)$", re.M)
PLAY = re.compile(r"^PLAY \[(.*)\] \**$")
# -vvv prints one line per command sent to a Mac; with pipelining, one per module run.
REMOTE_COMMAND = re.compile(r"^<([^>]+)> SSH: EXEC ")
OURS, BASELINE, THEIRS, FLOOR = "mlx-fleet", "baseline", "comparison", "floor"
SITE_SIZES = {4: "mesh", 8: "ring", 16: "ring"}  # the site figure's clusters: Macs -> topology
REPOSITORY = Path(__file__).resolve().parent.parent
# The reads (macos_commands.READS) a converge with nothing to do makes on each Mac, all in the preflight's one
# macos_facts run: the Mac and its Thunderbolt ports, macos_node's (pmset, sysctl, the names, the automatic-install
# default) and thunderbolt_network's (the ports, the service order, ifconfig: all among the others); with them
# NOOP_EXTRA_READS, the reads that are not READS.
NOOP_READS = tuple(dict.fromkeys(node_facts.MACOS_READS + node_facts.THUNDERBOLT_READS + (
    "pmset", "sysctl", "computer_name", "local_host_name", "auto_install_macos")))
# The roles' defaults the bench's clusters keep (roles/mlx_env, roles/mlx_fabric) and the sim's target Python.
VENV, STORE, HOSTFILES, TARGET_PYTHON = "/opt/mlx-fleet/venv", "/opt/mlx-fleet/store", "/opt/mlx-fleet", "/usr/bin/python3"
# The preflight reads ifconfig first (with the hardware ports and the service order): it names the Thunderbolt
# services whose configuration it reads, those whose port holds an address (NOOP_FIRST, in $i).
NOOP_FIRST = "i=$(env LC_ALL=C ifconfig 2>/dev/null);"
# Each a shell command: thunderbolt_network's record and those services' configurations (networksetup -getinfo
# and -getadditionalroutes each), the Mac's copies of the hostfiles, and mlx_env_facts' reads (uname -m, the
# target Python's probe, the venv's probe that imports MLX, the store's record of its checked files and their
# sizes and dates).
NOOP_EXTRA_READS = (
    remote_command(["cat", thunderbolt_services.RECORD]),
    "networksetup -listallhardwareports | awk '/^Hardware Port: /{p=substr($0,16)} /^Device: /{if (p ~ "
    "/^Thunderbolt [0-9]+$/) print $2, p}' | while read -r d p; do printf '%s\\n' \"$i\" | awk -v d=\"$d\" "
    "'index($0, d\":\")==1{f=1;next} /^[^ \\t]/{f=0} f&&/inet /{ok=1} END{exit !ok}' && { networksetup -getinfo "
    "\"$p\" & networksetup -getadditionalroutes \"$p\" & }; done; wait",
    f"cat {HOSTFILES}/hostfile*.json",
    remote_command(["uname", "-m"]),
    remote_command([TARGET_PYTHON, "-I", "-B", "-c", mlx_env.PROBE]),
    remote_command([f"{VENV}/bin/python", "-I", "-B", "-c", mlx_env.PROBE, "installed", "prove"]),
    f"cat {STORE}/verified.json; ls -ln --time-style=+%s.%N {STORE}/wheels {STORE}/bin",
)


def run(argv: list[str], env: dict | None = None, timeout: float = 3600) -> tuple[float, str]:
    """(seconds, stdout) of a command that must succeed."""
    return run_profiled(argv, env, timeout)[:2]


def run_profiled(argv: list[str], env: dict | None = None, timeout: float = 3600) -> tuple[float, str, list]:
    """(seconds, stdout, profile) of a command that must succeed; the profile (run_profile) when it is an
    mlx-fleet run whose summary names its run log, else []."""
    started, wall = time.monotonic(), time.time()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                            cwd="/", env=env)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return seconds, result.stdout, run_profile(result.stdout, wall, wall + seconds)


def run_profile(summary: str, started: float, ended: float) -> list[tuple[float, str]]:
    """Where an mlx-fleet run's wall time went, (seconds, what) in the run's order, from ansible-runner's
    events in the run folder its summary names: the start until the first event (the CLI, ansible-runner,
    ansible-playbook, the inventory and the playbook parsed), each play and task until the next one (with
    the Macs it ran on and the slowest one's own duration: the rest is the controller's), the end after the
    recap (the summary, the exit)."""
    folder = re.search(r"^full output: (\S+)/stdout", summary, re.M)
    if not folder:
        return []
    events = sorted((json.loads(path.read_text()) for path in Path(folder.group(1), "job_events").glob("*.json")),
                    key=lambda event: event["counter"])
    steps: list[list] = []  # [start, label, Macs' durations]
    for event in events:
        kind, data = event["event"], event.get("event_data", {})
        if kind in ("playbook_on_play_start", "playbook_on_task_start", "playbook_on_stats"):
            label = {"playbook_on_play_start": f"play: {data.get('play', '')}",
                     "playbook_on_stats": "the recap"}.get(kind, f"task: {data.get('task', '')}")
            steps.append([datetime.fromisoformat(event["created"]).timestamp(), label, []])
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable") and steps:
            steps[-1][2].append((data.get("host"), float(data.get("duration") or 0)))
    if not steps:
        return []
    profile = [(steps[0][0] - started, "start: the CLI, ansible-runner, ansible-playbook, inventory and playbook")]
    for (at, label, hosts), (until, _, _) in zip(steps, steps[1:] + [[ended, "", []]]):
        if hosts:
            slowest = max(duration for _, duration in hosts)
            label += f" ({len(hosts)} host{'s' * (len(hosts) > 1)}, slowest's own run {slowest:.1f} s)"
        profile.append((until - at, label if label != "the recap" else "end: the recap, the summary, the exit"))
    return profile


def busy_cpu_seconds() -> float:
    """CPU time this machine has spent busy since boot, all CPUs together (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_with_cpu(argv: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """(seconds, the command's own CPU seconds with its children's, the whole machine's busy CPU seconds)."""
    machine, own = busy_cpu_seconds(), children_cpu_seconds()
    seconds = run(argv, env)[0]
    return seconds, children_cpu_seconds() - own, busy_cpu_seconds() - machine


class Cluster:
    """A simulated cluster for the length of a with-block.

    Its Macs have names of their own (bench-TAG-N): MLX's plain `ssh NODE` reaches the newest
    cluster on this machine with that name, and other clusters may be up beside this one.
    """

    def __init__(self, root: Path, nodes: int, topology: str, model: str = "mini-m4-pro"):
        self.dir = Path(tempfile.mkdtemp(prefix=f"{nodes}-{topology}-", dir=root))
        self.dir.chmod(0o755)  # the simulated Macs' admin user reads from here
        tag = secrets.token_hex(2)
        models = {f"bench-{tag}-{i}": MODELS[model] for i in range(1, nodes + 1)}
        self.nodes = list(models)
        plan = {"nodes": {name: {"model": model, "rdma": True} for name in models},
                "cables": [str(cable) for cable in generated_cables(models, topology)]}
        (self.dir / "plan.yml").write_text(yaml.safe_dump(plan))
        self.inventory = self.dir / "inventory.yml"
        self.runs = 0

    def __enter__(self) -> Cluster:
        run([str(BIN / "mlx-fleet"), "sim", "up", "--dir", str(self.dir), "--topology", str(self.dir / "plan.yml")])
        return self

    def __exit__(self, *exc) -> None:
        subprocess.run([str(BIN / "mlx-fleet"), "sim", "down", "--dir", str(self.dir)], capture_output=True,
                       stdin=subprocess.DEVNULL, cwd="/")
        shutil.rmtree(self.dir, ignore_errors=True)

    def floor(self) -> float:
        """Seconds of one round of NOOP_READS and NOOP_EXTRA_READS on every Mac at once, one cold ssh session each (no ControlMaster),
        each Mac's reads side by side as the modules run them."""
        cold = ("-o", "ControlMaster=no", "-o", "ControlPath=none")
        targets = [dataclasses.replace(host.ssh, args=host.ssh.args + cold)
                   for host in plan.read_inventory([str(self.inventory)])[1]]
        reads = [remote_command(macos_commands.READS[name]) for name in NOOP_READS if name != "ifconfig"]
        script = NOOP_FIRST + " ".join(f"{{ {read}; }} 2>/dev/null &" for read in reads + list(NOOP_EXTRA_READS)) + " wait"
        started = time.monotonic()
        answers = ssh_nodes.probe(targets, script, ssh_nodes.CONNECT_TIMEOUT, ssh_nodes.SSH_TIMEOUT)
        seconds = time.monotonic() - started
        if unreachable := [name for name, node in answers.items() if not node.reachable]:
            raise SystemExit(f"the floor's reads: {', '.join(unreachable)} did not answer")
        return seconds

    def mlx_fleet(self, command: str, *args: str) -> list[str]:
        """argv of an mlx-fleet command on this cluster, with SSH connections no earlier run opened."""
        self.runs += 1
        return [str(BIN / "mlx-fleet"), command, "-i", str(self.inventory), "--output-dir", str(self.dir / "out"),
                "-e", f"ansible_control_path_dir={self.dir / f'cp-{self.runs}'}", *args]


def full_output(summary: str) -> str:
    """The run's whole Ansible output, from the file the CLI's summary names."""
    stdout = re.search(r"^full output: (\S+)", summary, re.M)
    return re.sub(r"\x1b\[[0-9;]*m", "", Path(stdout.group(1)).read_text() if stdout else summary)


def tasks_per_mac(summary: str) -> int:
    """ok + skipped of the busiest Mac, from the run's recap."""
    text = full_output(summary)
    counts = [dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2)))
              for m in RECAP.finditer(text) if m.group(1) != "localhost"]
    if not counts:
        raise SystemExit(f"no play recap in the run's output:\n{text[-2000:]}")
    return max(c["ok"] + c["skipped"] for c in counts)


def module_runs_per_play(summary: str) -> dict[str, int]:
    """play -> the most module runs one Mac made in it, from a -vvv run's output (plays in order)."""
    runs: dict[str, dict[str, int]] = {}
    play = None
    for line in full_output(summary).splitlines():
        if match := PLAY.match(line):
            play = match.group(1)
            runs.setdefault(play, {})
        elif (match := REMOTE_COMMAND.match(line)) and play is not None:
            runs[play][match.group(1)] = runs[play].get(match.group(1), 0) + 1
    return {name: max(per_mac.values(), default=0) for name, per_mac in runs.items()}


@dataclass
class Goal:
    """What a row's mlx-fleet median should reach: at most `limit` times the median of `against` (in the row
    itself, or with `of` in that other row's mlx-fleet column), or, with no `against`, at most `limit` seconds."""

    text: str
    limit: float
    against: str | None = None
    of: Row | None = None

    def judge(self, row: Row) -> tuple[bool, str] | None:
        """(met, the goal with its measure), or None when the row lacks a median it needs."""
        ours, theirs = row.median(OURS), self.against and (self.of or row).median(self.against)
        if ours is None or (self.against and not theirs):
            return None
        value = ours / theirs if self.against else ours
        met = value <= self.limit
        return met, f"{self.text}: {'met' if met else 'NOT MET'} ({value:.2f}x)" if self.against else (
            f"{self.text}: {'met' if met else 'NOT MET'} ({value:.1f} s)")


# The goals of issues 20 and 27: the hostfile well under MLX's own tool, a converge with nothing to do near
# the floor of its reads and quick enough to run often, growing less than the cluster; and, with --baseline,
# no row slower than before.
HOSTFILE_GOAL = Goal("<= 0.40x comparison", 0.40, THEIRS)
NOOP_GOAL = Goal("<= 4.0 s", 4.0)
NOOP_FLOOR_GOAL = Goal("<= 2.00x floor", 2.0, FLOOR)
BASELINE_GOAL = Goal("<= 1.00x baseline", 1.00, BASELINE)


@dataclass
class Row:
    figure: str
    seconds: dict[str, list[float]] = field(default_factory=dict)
    tasks: dict[str, set[int]] = field(default_factory=dict)
    note: str = ""
    goals: list[Goal] = field(default_factory=list)
    profiles: dict[str, list[list]] = field(default_factory=dict)  # beside seconds: each run's run_profile

    def add(self, who: str, seconds: float, tasks: int | None = None, profile: list | None = None) -> None:
        self.seconds.setdefault(who, []).append(seconds)
        self.profiles.setdefault(who, []).append(profile or [])
        if tasks is not None:
            self.tasks.setdefault(who, set()).add(tasks)

    def median(self, who: str) -> float | None:
        return statistics.median(self.seconds[who]) if self.seconds.get(who) else None

    def judged(self) -> list[tuple[bool, str]]:
        return [judged for judged in (goal.judge(self) for goal in self.goals) if judged]

    def median_profile(self, who: str) -> tuple[float, list]:
        """(seconds, profile) of the run in the middle of who's runs (the upper middle of an even count)."""
        runs = sorted(zip(self.seconds.get(who, []), self.profiles.get(who, [])), key=lambda run: run[0])
        return runs[len(runs) // 2] if runs else (0.0, [])

    def cells(self, columns: list[str]) -> list[str]:
        out = [self.figure]
        for who in columns:
            median = self.median(who)
            tasks = "/".join(map(str, sorted(self.tasks.get(who, ()))))
            out.append("-" if median is None else f"{median:.1f} s" + (f", {tasks} tasks" if tasks else ""))
        ours = self.median(OURS)
        ratios = [f"{ours / self.median(who):.2f}x vs {who}" for who in columns[1:] if ours and self.median(who)]
        goals = "; ".join(text for _, text in self.judged())
        return out + ["; ".join(ratios) or "-", goals or "-", self.note]


class Bench:
    def __init__(self, root: Path, repeat: int, baseline: Path | None, site_macs: tuple[int, ...] = tuple(SITE_SIZES)):
        self.root, self.repeat, self.site_macs = root, repeat, site_macs
        self.envs = {OURS: None}
        if baseline:
            self.envs[BASELINE] = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(baseline / "src"), str(baseline / "collections")]))

    def hostfile(self) -> list[Row]:
        rows = []
        for nodes, topology, backend in ((4, "mesh", "jaccl"), (8, "ring", "jaccl-ring")):
            row = Row(f"hostfile, {nodes} Mac Studios ({topology})", goals=[HOSTFILE_GOAL],
                      note=f"comparison: mlx.distributed_config --backend {backend} --auto-setup")
            with contextlib.ExitStack() as stack:
                clusters = {who: stack.enter_context(Cluster(self.root, nodes, topology, "studio-m3-ultra"))
                            for who in (*self.envs, THEIRS)}
                theirs = clusters[THEIRS]
                theirs_file = theirs.dir / "mlx-hostfile.json"
                mlx = [str(BIN / "mlx.distributed_config"), "--hosts", ",".join(theirs.nodes), "--over",
                       "thunderbolt", "--backend", backend, "--auto-setup", "--output-hostfile", str(theirs_file)]
                for who, env in self.envs.items():  # untimed: the first run configures a fresh cluster's ports
                    run(clusters[who].mlx_fleet("hostfile"), env)
                run(mlx)
                for _ in range(self.repeat):
                    for who, env in self.envs.items():
                        seconds, _, profile = run_profiled(clusters[who].mlx_fleet("hostfile"), env)
                        row.add(who, seconds, profile=profile)
                    row.add(THEIRS, run(mlx)[0])
                ours = json.loads((clusters[OURS].dir / "out" / "hostfile.json").read_text())
                theirs_data = json.loads(theirs_file.read_text())
                if (ours["backend"], [h["rdma"] for h in ours["hosts"]]) != (
                        theirs_data["backend"], [h["rdma"] for h in theirs_data["hosts"]]):
                    row.note += "; THE HOSTFILES DIFFER"
            rows.append(row)
        return rows

    def noop_row(self, nodes: int, four: Row | None) -> Row:
        """The no-op row of a cluster size, with its goals (FOUR: the 4-Mac no-op row, the 16-Mac row's measure)."""
        row = Row(f"site.yml no-op, {nodes} Macs", goals=[NOOP_FLOOR_GOAL])
        if nodes == 4:
            row.goals.append(NOOP_GOAL)
        if nodes == 16 and four:
            row.goals.append(Goal("<= 2.00x the 4-Mac no-op", 2.0, OURS, four))
        return row

    def noop_and_floor(self, row: Row, module_runs: dict[str, str], who: str, env: dict | None,
                       cluster: Cluster) -> None:
        """One no-op converge of a converged cluster and its floor into ROW; the first of WHO's also -vvv, untimed,
        for its module runs per play (MODULE_RUNS, the row's note)."""
        seconds, summary, profile = run_profiled(cluster.mlx_fleet("converge"), env)
        row.add(who, seconds, tasks_per_mac(summary), profile)
        row.add(FLOOR, cluster.floor())
        if who not in module_runs:
            per_play = module_runs_per_play(run(cluster.mlx_fleet("converge", "-vvv"), env)[1])
            module_runs[who] = ", ".join(f"{play} {count}" for play, count in per_play.items())
        row.note = "; ".join(f"{who}: module runs per converged Mac: {runs}" for who, runs in module_runs.items())

    def site(self) -> list[Row]:
        rows: list[Row] = []
        four = None
        for nodes in self.site_macs:
            topology = SITE_SIZES[nodes]
            fresh = Row(f"site.yml fresh, {nodes} Macs ({topology})" + (", once per tree" if nodes == 16 else ""))
            noop = self.noop_row(nodes, four)
            four = noop if nodes == 4 else four
            module_runs: dict[str, str] = {}
            if nodes < 16:
                for _ in range(self.repeat):
                    for who, env in self.envs.items():
                        with Cluster(self.root, nodes, topology) as cluster:
                            seconds, summary, profile = run_profiled(cluster.mlx_fleet("converge"), env)
                            fresh.add(who, seconds, tasks_per_mac(summary), profile)
                            self.noop_and_floor(noop, module_runs, who, env, cluster)
            else:  # a fresh 16-Mac converge is long: once per tree, on a cluster kept for the no-ops
                with contextlib.ExitStack() as stack:
                    clusters = {who: stack.enter_context(Cluster(self.root, nodes, topology)) for who in self.envs}
                    for who, env in self.envs.items():
                        seconds, summary, profile = run_profiled(clusters[who].mlx_fleet("converge"), env)
                        fresh.add(who, seconds, tasks_per_mac(summary), profile)
                    for _ in range(self.repeat):
                        for who, env in self.envs.items():
                            self.noop_and_floor(noop, module_runs, who, env, clusters[who])
            print(f"{table([fresh, noop], [OURS, *self.envs.keys() - {OURS}, FLOOR])}\n({load()})", file=sys.stderr,
                  flush=True)
            rows += [fresh, noop]
        return rows

    def noop(self) -> list[Row]:
        rows: list[Row] = []
        four = None
        for nodes in self.site_macs:
            noop = self.noop_row(nodes, four)
            four = noop if nodes == 4 else four
            module_runs: dict[str, str] = {}
            with contextlib.ExitStack() as stack:
                clusters = {who: stack.enter_context(Cluster(self.root, nodes, SITE_SIZES[nodes])) for who in self.envs}
                for who, env in self.envs.items():  # untimed: converges the fresh cluster
                    run(clusters[who].mlx_fleet("converge"), env)
                for _ in range(self.repeat):
                    for who, env in self.envs.items():
                        self.noop_and_floor(noop, module_runs, who, env, clusters[who])
            rows.append(noop)
        return rows

    def memory(self) -> list[Row]:
        rows, peaks, sizes = [], {}, (4, 16)
        for nodes in sizes:
            row = Row(f"site.yml fresh, {nodes} Macs (ring): controller memory")
            notes = []
            for who, env in self.envs.items():
                with Cluster(self.root, nodes, "ring") as cluster:
                    seconds, largest, tree = peak_memory(cluster.mlx_fleet("converge"), env)
                row.add(who, seconds)
                peaks[who, nodes] = largest, tree
                notes.append(f"{who}: largest process {largest / 1024:.0f} MiB RSS, "
                             f"whole tree {tree / 1024:.0f} MiB PSS")
                if nodes == sizes[-1]:
                    (fewest_largest, fewest_tree), added = peaks[who, sizes[0]], (nodes - sizes[0]) * 1024
                    notes[-1] += (f", each Mac beyond {sizes[0]} adding {(largest - fewest_largest) / added:.2f} "
                                  f"MiB RSS and {(tree - fewest_tree) / added:.1f} MiB PSS")
            row.note = "; ".join(notes)
            rows.append(row)
        return rows

    def audit(self) -> list[Row]:
        probe = subprocess.run([str(BIN / "mlx-fleet"), "audit", "--help"], capture_output=True,
                               stdin=subprocess.DEVNULL, cwd="/")
        if probe.returncode != 0:
            return [Row("audit, 4 and 16 Macs", note="skipped: this mlx-fleet has no audit command")]
        rows = []
        for nodes, topology in ((4, "mesh"), (16, "ring")):
            row = Row(f"audit, {nodes} converged Macs ({topology})")
            controller, machine = [], []
            with Cluster(self.root, nodes, topology) as cluster:
                run(cluster.mlx_fleet("converge"))
                for _ in range(self.repeat):
                    seconds, own, busy = run_with_cpu(cluster.mlx_fleet("audit"))
                    row.add(OURS, seconds)
                    controller.append(own)
                    machine.append(busy)
            own, busy = statistics.median(controller), statistics.median(machine)
            row.note = (f"CPU (medians): {busy:.1f} CPU-s on this machine's {os.cpu_count()} CPUs: the controller "
                        f"{own:.1f}, the simulated Macs {busy - own:.1f}")
            rows.append(row)
        return rows

    def watch(self) -> list[Row]:
        from argparse import Namespace

        from mlx_fleet.watch_cli import Watch

        rows = []
        for nodes in (4, 16):
            row, cpu = Row(f"watch, one probe round, {nodes} Macs (ring)"), []
            with Cluster(self.root, nodes, "ring") as cluster:
                run(cluster.mlx_fleet("hostfile"))  # the address ledger the round compares with
                round_ = Watch(Namespace(inventory=[str(cluster.inventory)], every=60, once=True, on_change=None,
                                         output_dir=str(cluster.dir / "out"), out=None, connect_timeout=5,
                                         rdma_timeout=5))
                for _ in range(self.repeat):
                    before = resource.getrusage(resource.RUSAGE_SELF), children_cpu_seconds()
                    started = time.monotonic()
                    round_.one_round()
                    row.add(OURS, time.monotonic() - started)
                    after = resource.getrusage(resource.RUSAGE_SELF)
                    cpu.append(after.ru_utime + after.ru_stime - before[0].ru_utime - before[0].ru_stime
                               + children_cpu_seconds() - before[1])
            row.note = f"controller CPU per round (median): {statistics.median(cpu):.2f} CPU-s"
            rows.append(row)
        return rows

    def verify(self) -> list[Row]:
        row = Row("verify, 4 converged Macs (ring), one cable pulled: until it fails")
        with Cluster(self.root, 4, "ring") as cluster:
            run(cluster.mlx_fleet("converge"))
            cable = yaml.safe_load((cluster.dir / "plan.yml").read_text())["cables"][0]
            run([str(BIN / "mlx-fleet"), "sim", "unplug", "--dir", str(cluster.dir), cable.split(" -- ")[0]])
            for _ in range(self.repeat):
                argv = [str(BIN / "mlx-fleet"), "verify", "-i", str(cluster.inventory), "--output-dir",
                        str(cluster.dir / "out"), "--out", str(cluster.dir / f"verify-{cluster.runs}")]
                cluster.runs += 1
                started = time.monotonic()
                done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd="/")
                row.add(OURS, time.monotonic() - started)
                named = done.returncode == 1 and cable in done.stdout
                row.note = f"cable {cable} pulled; " + ("named in the summary" if named else
                                                        f"NOT NAMED (exit {done.returncode})")
        return [row]


def _tree(pid: int) -> list[int]:
    """pid and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _pss_kib(pid: int) -> int:
    try:
        match = re.search(r"^Pss:\s+(\d+) kB", Path(f"/proc/{pid}/smaps_rollup").read_text(), re.M)
    except OSError:
        return 0
    return int(match.group(1)) if match else 0


def peak_memory(argv: list[str], env: dict | None) -> tuple[float, int, int]:
    """(seconds, largest process's peak RSS in KiB, the process tree's peak PSS in KiB) of a command.
    The largest process comes from a wrapper's RUSAGE_CHILDREN (it waits for nothing else); the tree
    is sampled from /proc every 0.2 s."""
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)")
    process = subprocess.Popen([sys.executable, "-c", wrapper, *argv], stdout=subprocess.PIPE, text=True,
                               stdin=subprocess.DEVNULL, cwd="/", env=env)
    peak, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, sum(_pss_kib(p) for p in _tree(process.pid)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    started = time.monotonic()
    sampler.start()
    out, _ = process.communicate(timeout=3600)
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    largest, rc = (int(x) for x in out.split())
    if rc != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({rc})")
    return seconds, largest, peak


def table(rows: list[Row], columns: list[str]) -> str:
    head = ["figure", *(f"{who} (median)" for who in columns), "ratio", "goals", "note"]
    cells = [head] + [row.cells(columns) for row in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |" for line in cells]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def profiles(rows: list[Row], top: int = 8) -> str:
    """Under each row with a goal not met: where the time of mlx-fleet's median run went, largest first."""
    out = []
    for row in rows:
        missed = [text for met, text in row.judged() if not met]
        seconds, profile = row.median_profile(OURS)
        if not missed:
            continue
        out.append(f"\nprofile of mlx-fleet's median run, {row.figure} ({seconds:.1f} s; {'; '.join(missed)}):")
        if not profile:
            out.append("  (no run log to read: this figure runs no playbook)")
        for step_seconds, what in sorted(profile, key=lambda step: -step[0])[:top]:
            out.append(f"  {step_seconds:6.2f} s {100 * step_seconds / seconds:4.0f}%  {what}")
    return "\n".join(out)


@contextlib.contextmanager
def baseline_tree(root: Path, baseline: str | None):
    """The baseline's source tree for a with-block: BASELINE itself when it is one, else a git worktree of the
    revision it names (by default the merge-base of HEAD with main), removed afterwards; None without one."""
    if baseline is None:
        yield None
        return
    if baseline and (Path(baseline) / "src" / "mlx_fleet").is_dir():
        yield Path(baseline).resolve()
        return
    revision = baseline or subprocess.run(["git", "-C", str(REPOSITORY), "merge-base", "HEAD", "main"],
                                          capture_output=True, text=True, check=True).stdout.strip()
    tree = root / "baseline"
    added = subprocess.run(["git", "-C", str(REPOSITORY), "worktree", "add", "--detach", str(tree), revision],
                           capture_output=True, text=True)
    if added.returncode != 0:
        raise SystemExit(f"--baseline {revision}: {added.stderr.strip()}")
    print(f"bench: baseline {revision} in {tree}", file=sys.stderr, flush=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(REPOSITORY), "worktree", "remove", "--force", str(tree)], capture_output=True)


def load() -> str:
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3]) + f" on {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each figure (default 5; the table shows medians)")
    parser.add_argument("--only", default=",".join(FIGURES),
                        help=f"comma-separated figures to run (default all: {','.join(FIGURES)})")
    parser.add_argument("--baseline", nargs="?", const="", metavar="REF",
                        help="the mlx-fleet to compare with, interleaved: a git revision (alone: the merge-base of "
                             "HEAD with main) or an earlier source tree")
    parser.add_argument("--site-macs", default=",".join(map(str, SITE_SIZES)),
                        help=f"comma-separated cluster sizes of the site figure (default all: {','.join(map(str, SITE_SIZES))})")
    args = parser.parse_args(argv)
    site_macs = tuple(int(n) for n in args.site_macs.split(",") if n.strip().isdigit())
    only = [f.strip() for f in args.only.split(",") if f.strip()]
    if set(only) - set(FIGURES) or args.repeat < 1 or not site_macs or set(site_macs) - set(SITE_SIZES):
        parser.error(f"--only takes {', '.join(FIGURES)}; --repeat at least 1; --site-macs some of "
                     f"{', '.join(map(str, SITE_SIZES))}")
    if os.geteuid() != 0:
        parser.error("macsim needs root")
    root = Path(tempfile.mkdtemp(prefix="mlx-fleet-bench-", dir="/tmp"))
    root.chmod(0o755)
    rows: list[Row] = []
    started_under = f"at the start, {load()}"
    print(f"bench: {started_under}", file=sys.stderr, flush=True)
    with_baseline = args.baseline is not None
    columns = [OURS] + ([BASELINE] if with_baseline else []) + ([THEIRS] if "hostfile" in only else []) + (
        [FLOOR] if {"site", "noop"} & set(only) else [])
    try:
        with baseline_tree(root, args.baseline) as baseline:
            bench = Bench(root, args.repeat, baseline, site_macs)
            for figure in only:
                print(f"bench: {figure} ...", file=sys.stderr, flush=True)
                figure_rows = getattr(bench, figure)()
                for row in figure_rows if with_baseline else []:
                    row.goals.append(BASELINE_GOAL)
                # Each figure's rows as soon as they are measured: a long bench cut short keeps them.
                print(f"{table(figure_rows, columns)}\n({load()})", file=sys.stderr, flush=True)
                rows += figure_rows
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table(rows, columns))
    print(f"{started_under}; at the end, {load()}")
    print(profiles(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

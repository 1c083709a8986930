"""`mlx-fleet verify`, start to end: stage, check all ranks, check every cable alone, the user's task,
diagnose, clean up. The report (verify.json, verify.html) is made from the Outcome by report.py."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from mlx_fleet.verify import compare, jobs, nodes
from mlx_fleet.verify.check_program import __file__ as CHECK_PROGRAM
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from mlx_fleet.verify.diagnose import cable_findings, cause, diagnose, node_findings, rewired
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Link
from mlx_fleet.verify.plan import Cluster, link_hostfile, single_host_hostfile

PASSED, FAILED, UNREACHABLE = "passed", "failed", "unreachable"
SCRIPT_DIR = "script"
MODEL_PATH_ENV = "MLX_FLEET_MODEL_PATH"  # where a --script finds the --model on every Mac


@dataclass
class Options:
    inventory: str  # as given, for the fixes the report suggests
    python: str
    sizes: list[int]
    timeout: float
    script: Path | None = None
    script_args: list[str] = field(default_factory=list)
    repeat: int = 3
    rtol: float = 1e-5
    atol: float = 1e-8
    bridge: str | None = None  # mlx_fabric_bridge (None: the role's default)
    model: tuple[str, str] | None = None  # --model: its name and its path on every Mac, verified there


@dataclass
class Outcome:
    cluster: Cluster
    options: Options
    out: Path
    run_id: str
    started: datetime
    finished: datetime | None = None
    nodes: dict[str, nodes.Node] = field(default_factory=dict)  # as staged (versions, ports)
    evidence: dict[str, nodes.Node] = field(default_factory=dict)  # as read for the diagnosis
    jobs: list[jobs.Job] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    single: list[compare.Run] = field(default_factory=list)
    scripted: list[compare.Run] = field(default_factory=list)
    comparisons: list[compare.Comparison] = field(default_factory=list)
    level: str | None = None
    reasons: list[compare.Reason] = field(default_factory=list)
    leftovers: dict[str, list[str]] = field(default_factory=dict)

    def checks(self) -> list[jobs.Job]:
        return [j for j in self.jobs if j.kind != "script"]

    @property
    def status(self) -> str:
        if any(cause(f) == "unreachable" for f in self.findings):
            return UNREACHABLE
        if self.findings or not all(j.passed for j in self.checks()) or not self.checks():
            return FAILED
        if self.options.script and self.level != compare.REPRODUCES:
            return FAILED
        return PASSED


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


class _Runner:
    def __init__(self, outcome: Outcome, launcher: list[str]):
        self.outcome = outcome
        self.launcher = launcher
        self.rundir = nodes.rundir_for(outcome.run_id)

    def job(self, name: str, kind: str, hostfile: dict, command: list[str], cable: Cable | None = None) -> jobs.Job:
        job = jobs.Job(name, _safe(name), kind, hostfile["backend"], hostfile, self.outcome.out / "logs" / _safe(name),
                       cable=cable)
        jobs.run(job, launcher=self.launcher, python=self.outcome.options.python, rundir=self.rundir,
                 command=command, deadline=self.outcome.options.timeout)
        if not job.passed:  # nothing of it may linger into the next job (ports, memory)
            killed = nodes.stop(job.hosts, self.rundir, job.name)
            job.leftovers = [f"{host}: {line}" for host, lines in killed.items() for line in lines]
        self.outcome.jobs.append(job)
        return job

    def check(self, name: str, kind: str, hostfile: dict, cable: Cable | None = None) -> jobs.Job:
        sizes = ",".join(str(s) for s in self.outcome.options.sizes)
        return self.job(name, kind, hostfile, ["check_program.py", kind, "--backend",
                                               hostfile["backend"], "--sizes", sizes], cable)

    def link(self, link: Link) -> None:
        cluster = self.outcome.cluster
        if cluster.rdma:
            devices = {end.host: self.outcome.nodes[end.host].ports.get(end.receptacle) for end in link.ends()}
            if all(devices.values()):
                job = self.check(f"link {link.cable} {cluster.backend}", "link",
                                 link_hostfile(cluster, link, cluster.backend, devices), link.cable)
                if job.passed:
                    return
        self.check(f"link {link.cable} ring", "link", link_hostfile(cluster, link, "ring"), link.cable)

    def script(self, hostfile: dict) -> None:
        options = self.outcome.options
        command = [f"{SCRIPT_DIR}/{options.script.name}", *options.script_args]  # relative to rundir
        for k in range(1, options.repeat + 1):
            for runs, label, where in ((self.outcome.single, "single Mac", single_host_hostfile(self.outcome.cluster)),
                                       (self.outcome.scripted, "cluster", hostfile)):
                job = self.job(f"script {label} {k}", "script", with_model(where, options.model), command)
                runs.append(_script_run(job, f"{label} run {k}"))


def with_model(hostfile: dict, model: tuple[str, str] | None) -> dict:
    """HOSTFILE with the --model's path in every rank's environment (MLX_FLEET_MODEL_PATH)."""
    if model is None:
        return hostfile
    return dict(hostfile, envs=[*hostfile["envs"], f"{MODEL_PATH_ENV}={model[1]}"])


def _script_run(job: jobs.Job, label: str) -> compare.Run:
    outputs = {r.rank: compare.result_of([text for stream, text in r.lines if stream == "out"]) for r in job.ranks}
    problem = "; ".join(f"rank {r.rank} on {r.host}: {r.outcome()}" + (f": {r.error}" if r.error else "")
                        for r in job.failed_ranks()) or "; ".join(job.launcher_errors)
    return compare.Run(label, job.passed, outputs, problem)


def _files(options: Options) -> dict[str, bytes]:
    files = {"check_program.py": Path(CHECK_PROGRAM).read_bytes()}
    if options.script:
        files[f"{SCRIPT_DIR}/{options.script.name}"] = options.script.read_bytes()
    return files


def verify(cluster: Cluster, options: Options, out: Path, launcher: list[str]) -> Outcome:
    outcome = Outcome(cluster, options, out, uuid.uuid4().hex[:16], datetime.now(timezone.utc))
    runner = _Runner(outcome, launcher)
    reads = nodes.NETWORK_READS + (nodes.RDMA_READS if cluster.rdma else ())
    hosts = cluster.hosts
    try:
        outcome.nodes = nodes.stage(hosts, runner.rundir, _files(options), options.python, reads)
        outcome.findings = [f for node in outcome.nodes.values()
                            for f in node_findings(node, options.python, options.inventory)]
        # A cable out or moved shows before any job: say so now rather than after a job's timeout.
        moves = rewired(cluster.cables, outcome.nodes)
        outcome.findings += [f for link in cluster.cables
                             for f in cable_findings(link, outcome.nodes, options.inventory, moves=moves)
                             if cause(f) in ("cable", "moved")]
        if outcome.findings:
            outcome.evidence = dict(outcome.nodes)
            return outcome
        first = runner.check("all_sum", "all_sum", cluster.hostfile)
        if not first.passed and cluster.rdma and cluster.ring_hostfile:
            # The same ranks over TCP: tells an RDMA problem from a network one.
            runner.check("all_sum ring", "all_sum", cluster.ring_hostfile)
        for link in cluster.cables:
            runner.link(link)
        checks_passed = all(j.passed for j in outcome.jobs if j.backend == cluster.backend or j.kind == "link")
        if options.script and checks_passed:
            runner.script(cluster.hostfile)
        failed = sorted({h for j in outcome.jobs if not j.passed for h in j.hosts}, key=hosts.index)
        outcome.evidence = dict(outcome.nodes)
        outcome.evidence.update(nodes.read(failed, reads))  # the state the failures met
        outcome.findings = diagnose(outcome.jobs, cluster, outcome.evidence, options.inventory, options.bridge)
        outcome.comparisons = compare.comparisons(outcome.single, outcome.scripted, options.rtol, options.atol)
        outcome.level, outcome.reasons = compare.level(
            checks_passed and not outcome.findings, outcome.single, outcome.scripted, outcome.comparisons,
            options.script is not None)
        return outcome
    finally:
        # Only where this run made the folder (a path already there is not ours to empty); every Mac when
        # staging itself was interrupted (Ctrl-C): the folder, if there, is then this run's own.
        staged = [h for h in hosts if outcome.nodes[h].staged] if outcome.nodes else hosts
        outcome.leftovers = nodes.stop(staged, runner.rundir, remove=True)
        outcome.finished = datetime.now(timezone.utc)

"""`mlx-fleet run`, start to end: stage, launch through verify's launcher (mlx_fleet.verify.jobs), stop every
rank's process tree on the first failure, a timeout, a stall or an interrupt, check over ssh that nothing of
the job is left, and judge the exit status (docs/run.md)."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from mlx_fleet import explain
from mlx_fleet.errors import EXIT_INTERRUPTED, EXIT_OK
from mlx_fleet.verify import jobs, nodes
from mlx_fleet.verify.check_program import ERR, OUT
from mlx_fleet.verify.check_program import __file__ as CHECK_PROGRAM

SCRIPT_DIR = "script"
EXIT_TIMEOUT = 124  # --timeout, as timeout(1) says it
EXIT_STALL = 125  # --stall
EXIT_SIGNAL = 128  # + N: the first failing rank was killed by signal N
EXIT_LOST = 255  # the first failing rank ended without an exit status (its session or supervisor lost), as ssh says
EXIT_REFUSED = 126  # a check before the launch found a problem: nothing was started
STATUS_OF_ENDING = {"timed-out": EXIT_TIMEOUT, "stalled": EXIT_STALL}


@dataclass
class Launch:
    inventory: str  # as given, for the fixes
    hostfile: dict
    python: str  # the cluster's interpreter, on every Mac
    command: list[str]  # the user's COMMAND
    folder: Path  # runs/<id>
    run_id: str
    timeout: float = 0  # seconds, 0: none
    stall: float = 0

    @property
    def hosts(self) -> list[str]:
        return [h["ssh"] for h in self.hostfile["hosts"]]


@dataclass
class Outcome:
    job: jobs.Job | None = None
    findings: list[Finding] = field(default_factory=list)  # why nothing was started
    interrupted: bool = False
    killed: list[str] = field(default_factory=list)  # "host: JOB.RANK PID" the stop had to kill
    left: list[str] = field(default_factory=list)  # what was still there when checked afterwards

    @property
    def first_failed(self) -> jobs.Rank | None:
        """The first rank whose end came in as a failure, else the lowest rank that did not exit 0; None when
        every rank exited 0 or the run was interrupted (its ranks stopped for that)."""
        if self.job is None or self.interrupted:
            return None
        if self.job.first_failure is not None and self.job.first_failure < len(self.job.ranks):
            return self.job.ranks[self.job.first_failure]
        return next((r for r in self.job.ranks if r.exit_code != 0), None)

    @property
    def exit_status(self) -> int:
        if self.findings:
            return EXIT_REFUSED
        if self.interrupted:
            return EXIT_INTERRUPTED
        rank = self.first_failed
        if rank is None:
            return EXIT_OK
        if rank.ending == "exited":
            return rank.exit_code
        if rank.ending == "killed":
            return EXIT_SIGNAL - rank.exit_code
        return STATUS_OF_ENDING.get(rank.ending, EXIT_LOST)

    def cause(self) -> explain.Explanation:
        """What explain's rules make of every rank's output and mlx.launch's own complaints."""
        text = "\n".join([text for rank in self.job.ranks for stream, text in rank.lines if stream in (OUT, ERR)]
                         + self.job.launcher_errors)
        return explain.explain(text)


def command_files(command: list[str]) -> tuple[dict[str, bytes], list[str], bool]:
    """What to stage and what the supervisor runs: a Python script on the controller is copied to every Mac and
    run by the cluster's interpreter; anything else runs as given, the interpreter's folder first on PATH.
    (files, the supervisor's command, whether it runs as is)."""
    files = {"check_program.py": Path(CHECK_PROGRAM).read_bytes()}
    script = Path(command[0])
    if script.suffix == ".py" and script.is_file():
        files[f"{SCRIPT_DIR}/{script.name}"] = script.read_bytes()
        return files, [f"{SCRIPT_DIR}/{script.name}", *command[1:]], False
    return files, command, True


def launch(plan: Launch, launcher: list[str], on_output) -> Outcome:
    """Run plan's command on every rank; the outcome, with nothing of it left on any Mac."""
    files, command, as_is = command_files(plan.command)
    rundir = nodes.rundir_for(plan.run_id, "run")
    outcome = Outcome()
    staged: dict[str, nodes.Node] = {}
    name = f"run-{plan.run_id}"
    try:
        staged = nodes.stage(plan.hosts, rundir, files, plan.python, ())
        if not all(node.staged and node.python for node in staged.values()):
            # Only then the diagnosis, whose imports (the audit's judgements) cost a start a third of a second.
            from mlx_fleet.verify.diagnose import node_findings

            outcome.findings = [f for node in staged.values()
                                for f in node_findings(node, plan.python, plan.inventory)]
            if outcome.findings:
                return outcome
        outcome.job = jobs.Job(" ".join(plan.command), name, "run", plan.hostfile["backend"], plan.hostfile,
                               plan.folder)
        jobs.run(outcome.job, launcher=launcher, python=plan.python, rundir=rundir, command=command,
                 deadline=plan.timeout, supervision=jobs.Supervision(plan.timeout, plan.stall, as_is),
                 on_output=on_output, stop_on_failure=True)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        # Ctrl-C while cleaning up must not leave the ranks: the stop and the check run to their end.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            hosts = [h for h in plan.hosts if staged[h].staged] if staged else plan.hosts
            stopped = _lines(nodes.stop(hosts, rundir, name, remove=True, check=True))
            outcome.left = [line for line in stopped if line.split(": ", 1)[1].startswith(nodes.LEFT)]
            outcome.killed = [line for line in stopped if line not in outcome.left]
        finally:
            signal.signal(signal.SIGINT, previous)
    return outcome


def _lines(killed: dict[str, list[str]]) -> list[str]:
    return [f"{host}: {line}" for host, lines in killed.items() for line in lines]


def rank_fields(job: jobs.Job) -> list[dict]:
    """Each rank for the run record: how it ended, its exit code or signal, its log and the log's size."""
    found = []
    for rank in job.ranks:
        log = jobs.rank_log(job, rank)
        found.append({"rank": rank.rank, "mac": rank.host, "ending": rank.ending, "exit_code": rank.exit_code,
                      "signal": rank.signal, "final_event": rank.final, "log": str(log),
                      "log_bytes": log.stat().st_size if log.exists() else None})
    return found

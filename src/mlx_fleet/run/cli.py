"""`mlx-fleet run -i INVENTORY [--backend B] [--timeout S] [--stall S] [--out DIR] [--all-ranks] -- COMMAND`:
the command line, the checks before, the run record around the launch, what the terminal shows, the exit status."""

from __future__ import annotations

import argparse
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import lines
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder, private_folder
from mlx_fleet import explain
from mlx_fleet import record as records
from mlx_fleet import runner
from mlx_fleet.arguments import long_seconds
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK, UserError
from mlx_fleet.run import job as jobrun
from mlx_fleet.run.checks import before_launch, read_cluster
from mlx_fleet.run.facts import record_from
from mlx_fleet.verify import nodes
from mlx_fleet.verify.check_program import ERR, OUT

BACKENDS = ("auto", "jaccl", "jaccl-ring", "ring")
EXIT_STATUSES = f"""exit status:
  0        every rank exited 0
  N        the first rank to fail exited with N (its own status), named with its Mac on the summary's first line
  128+N    the first rank to fail was killed by signal N (named)
  {jobrun.EXIT_TIMEOUT}      --timeout: every rank stopped
  {jobrun.EXIT_STALL}      --stall: a rank printed nothing and used no CPU time for S seconds; every rank stopped
  {jobrun.EXIT_REFUSED}      a check before the launch refused it (one line each): nothing was started
  130      interrupted (Ctrl-C, SIGTERM, SIGHUP): every rank stopped
  {jobrun.EXIT_LOST}      the first rank to fail ended without a status (its ssh session or supervisor lost)
  2        bad input (command line, inventory, no mlx.launch); 3 another run holds the output folder
Whatever the ending, every rank's process tree is stopped on every Mac (SIGTERM, SIGKILL after 5 s) and checked
over ssh afterwards; a rank whose launcher is gone (this command killed) stops itself."""


def add_run_parser(sub, command) -> None:
    examples = ("  mlx-fleet run -i inventory/mine -- train.py --epochs 3\n"
                "  mlx-fleet run -i inventory/mine --stall 300 --all-ranks -- python -m mlx_lm.generate --prompt hi")
    parser = command(
        sub, "run", "run a command on every rank through mlx.launch: checks, per-rank logs, true exit status",
        "Check the cluster, write the run record, then run COMMAND on every rank of the published hostfile through "
        "mlx.launch with the cluster's interpreter and the hostfile's envs. A Python script on this machine is "
        "copied to every Mac; anything else runs as given there. Each rank's output goes to its own log "
        "(runs/<id>/rank-<N>-<mac>.log, timestamped, stdout and stderr marked apart); the terminal shows rank 0, "
        "or every rank with --all-ranks. The first rank to fail, a timeout, a stall or an interrupt stops every "
        "rank on every Mac. docs/run.md.", examples)
    parser.epilog = "examples:\n" + examples + "\n\n" + EXIT_STATUSES
    runner.add_playbook_options(parser, read_only=True)
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="auto: the published hostfile's; ring: hostfile-ring.json (default: %(default)s)")
    parser.add_argument("--timeout", type=long_seconds, default=0, metavar="S",
                        help="stop every rank after S seconds (exit 124; default: none)")
    parser.add_argument("--stall", type=long_seconds, default=0, metavar="S",
                        help="stop every rank once one printed nothing and used no CPU time for S seconds (exit 125)")
    parser.add_argument("--out", help="folder for the runs (default: OUTPUT_DIR/runs); each run in <id>/")
    parser.add_argument("--all-ranks", action="store_true", help="show every rank's output, as [N mac] LINE")
    parser.add_argument("--python", help="the interpreter on every Mac (default: mlx_env_path/bin/python)")
    parser.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="what every rank runs")
    parser.set_defaults(deep=False)  # the record reads the declared models' sizes and dates, not every byte


def hostfile_name(backend: str) -> str:
    """The published hostfile a backend runs on: the ring's own when asked for ring."""
    return RING_HOSTFILE if backend == "ring" else HOSTFILE


def _hostfile(folder: Path, backend: str) -> dict:
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json

    path = folder / hostfile_name(backend)
    if not path.exists():
        path = folder / hostfile_name("auto")
    hostfile = load_json(path.read_text())
    if backend != "auto" and hostfile["backend"] != backend:
        raise UserError(f"--backend {backend}: the published hostfiles are for {hostfile['backend']} "
                        f"({path}); give --backend auto or publish the cluster for {backend}")
    return hostfile


def _show(all_ranks: bool, hosts: list[str]):
    """The terminal's share of the ranks' output: rank 0's as it is, or every rank's with [N mac]."""

    def show(rank: int, stream: str, text) -> None:
        if stream not in (OUT, ERR) or (rank != 0 and not all_ranks):
            return
        prefix = f"[{rank} {hosts[rank] if rank < len(hosts) else '?'}] " if all_ranks else ""
        print(terminal_text([prefix + text]), file=sys.stdout if stream == OUT else sys.stderr, flush=True)

    return show


def run_run(args) -> int:
    command = args.launch[1:] if args.launch[:1] == ["--"] else args.launch
    if not command:
        raise UserError("give the command after --: mlx-fleet run -i INVENTORY -- COMMAND [ARG...]")
    with nodes.shared_connections():  # the check, the staging and the stop: one ssh connection per Mac
        return _run(args, command)


def _run(args, command: list[str]) -> int:
    inventory = args.inventory[0]
    cluster = read_cluster(inventory)
    settings = cluster[0]
    folder = Path(args.output_dir).resolve() if args.output_dir else settings.output_dir
    check = before_launch(inventory, args.backend, command, cluster)
    if check.findings:
        for line in lines(check.findings):
            print(f"mlx-fleet run: refused: {line}", file=sys.stderr)
        return jobrun.EXIT_REFUSED
    hostfile = _hostfile(folder, args.backend)
    from mlx_fleet.verify.jobs import LaunchError, mlx_launch

    try:
        launcher = mlx_launch()
    except LaunchError as exc:
        raise UserError(str(exc)) from None
    now = datetime.now(timezone.utc)
    run_id = f"{now.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:6]}"
    try:
        out = private_folder(Path(args.out).resolve() if args.out else runner.output_dir_from(args) / "runs") / run_id
        out.mkdir(mode=0o700)
    except UnsafeFolder as exc:
        raise UserError(f"run --out: {exc}") from None
    if check.declares_models:  # how each Mac holds the declared models' files: the audit's read of them
        from mlx_fleet.audit_cli import write_record

        report, record, record_path = write_record(args, command, out / "record.json")
        if record is None:
            return runner.print_summary(report, stream=sys.stderr) or EXIT_ATTENTION
    else:  # the rest the check's own round read
        published = folder / HOSTFILE
        facts, not_recorded = record_from(check, published.read_text() if published.is_file() else None)
        record, record_path = records.save(facts, inventory=Path(inventory), output_dir=runner.output_dir_from(args),
                                           not_recorded=not_recorded, command=command, out=out / "record.json")
    plan = jobrun.Launch(inventory, hostfile, args.python or settings.python, command, out, run_id,
                         args.timeout, args.stall)
    print(f"mlx-fleet run {run_id}: {hostfile['backend']}, {len(plan.hosts)} ranks; logs and record in {out}",
          file=sys.stderr, flush=True)
    outcome = jobrun.launch(plan, launcher, _show(args.all_ranks, plan.hosts))
    status = outcome.exit_status
    summary = _summary(outcome, inventory)
    record["run"] = {"id": run_id, "backend": hostfile["backend"], "exit_status": status,
                     "seconds": outcome.job.seconds if outcome.job else 0,
                     "first_failure": outcome.first_failed.rank if outcome.first_failed else None,
                     "interrupted": outcome.interrupted, "cause": summary[0] if status else None,
                     "refused": [f.to_dict() for f in outcome.findings],
                     "killed_after": outcome.killed, "left_running": outcome.left,
                     "ranks": jobrun.rank_fields(outcome.job) if outcome.job else []}
    records.write(record_path, record)
    print(terminal_text(summary + [f"record: {record_path}"]), file=sys.stderr)
    return status


def _summary(outcome: jobrun.Outcome, inventory: str) -> list[str]:
    """The summary's lines: on a failure the first names the likely cause (explain's rules) and the rank."""
    status = outcome.exit_status
    if outcome.findings:
        return [f"refused: {line}" for line in lines(outcome.findings)]
    job = outcome.job
    if job is None:
        return ["interrupted before the launch: nothing was started"]
    left = ([f"still running after the stop: {', '.join(outcome.left)}"] if outcome.left
            else ["checked over ssh: nothing of the job left on any Mac"])
    if status == EXIT_OK:
        return [f"every rank exited 0 ({len(job.ranks)} ranks, {job.seconds:g} s)"] + left
    rank = outcome.first_failed
    if rank is None:
        said = "interrupted: every rank stopped"
    else:
        said = f"rank {rank.rank} on {rank.host} {rank.outcome()}"
    explanation = outcome.cause()
    more = explain.report(explanation, inventory)[1:] if explanation.causes else []
    ranks = "ranks: " + "; ".join(f"{r.rank} on {r.host} {r.outcome()}" for r in job.ranks)
    return [f"{explanation.first_line}; {said} (exit {status})", ranks] + left + [line for line in more if line]

"""`mlx-fleet ps -i INV` lists the MLX jobs on every Mac; `mlx-fleet stop -i INV [MAC:PID...|--orphans|--all]`
stops them, each job's whole process tree, and reads the Macs again to say what is gone (docs/jobs-ps-stop.md).
The read and the stop are mlx_fleet.jobs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet import jobs
from mlx_fleet.arguments import seconds
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK, EXIT_UNREACHABLE, UserError
from mlx_fleet.verify.plan import VerifyError, read_inventory

PS_STATUSES = "Exit status: 0 no orphan (jobs may be running), 1 an orphan found, 2 bad input, 4 a Mac not read."
STOP_STATUSES = ("Exit status: 0 every chosen job gone (or nothing to stop), 1 a job still running afterwards, 2 bad "
                 "input (a MAC:PID ps does not list), 4 a Mac not read (nothing stopped there).")


def add_ps_parsers(sub, command) -> None:
    ps = command(sub, "ps", "list the MLX jobs on every Mac: pid, age, memory, whether their launcher is alive",
                 "List the MLX jobs on every Mac (mlx.launch and the processes of the cluster's environment), "
                 "each with its Mac and pid (its JOB name for stop), its age, the memory (RSS) of its whole "
                 "process tree and its launcher: the sshd session, mlx.launch or terminal it runs under, or "
                 "none when it was reparented to launchd (an orphan: its launcher is gone, it holds its memory "
                 "until stopped). One ssh session per Mac, all at once. " + PS_STATUSES,
                 "  mlx-fleet ps -i inventory/mine\n  mlx-fleet ps -i inventory/mine --json")
    stop = command(sub, "stop", "stop MLX jobs on the Macs (TERM, then KILL after a grace), checked afterwards",
                   "Stop MLX jobs as mlx-fleet ps lists them: each named job (MAC:PID), the orphans (--orphans) or "
                   "every job (--all), its whole process tree: TERM, then KILL after --grace seconds, then the "
                   "Mac's process list again, which says what is gone. " + STOP_STATUSES,
                   "  mlx-fleet stop -i inventory/mine --orphans\n  mlx-fleet stop -i inventory/mine mini-2:4242")
    for parser in (ps, stop):
        parser.add_argument("-i", "--inventory", action="append", required=True,
                            help="inventory file or folder (repeatable), as for ansible-playbook")
        parser.add_argument("--connect-timeout", type=seconds, default=5, metavar="S",
                            help="seconds to wait for a Mac's ssh connection (default: 5)")
    ps.add_argument("--json", action="store_true", help="print the jobs as JSON (host -> jobs) instead of a table")
    which = stop.add_mutually_exclusive_group(required=True)
    which.add_argument("job", nargs="*", default=[], metavar="MAC:PID", help="a job as mlx-fleet ps names it")
    which.add_argument("--orphans", action="store_true", help="every job whose launcher is gone")
    which.add_argument("--all", action="store_true", help="every MLX job on every Mac")
    stop.add_argument("--grace", type=seconds, default=jobs.GRACE, metavar="S",
                      help=f"seconds between TERM and KILL (default: {jobs.GRACE})")


def _cluster(args):
    try:
        settings, hosts = read_inventory(args.inventory)
    except VerifyError as exc:
        raise UserError(str(exc)) from None
    return str(Path(settings.python).parent.parent), [host.ssh for host in hosts]


def _say(lines) -> None:
    print(terminal_text(list(lines)), flush=True)


def run_ps_or_stop(args) -> int:
    env_path, targets = _cluster(args)
    found = jobs.read(targets, env_path, args.connect_timeout)
    down = [host for host, mac in found.items() if not mac.reachable or mac.error]
    if args.tool == "stop":
        return _stop(args, env_path, targets, found, down)
    orphans = [job for mac in found.values() for job in mac.jobs if job["orphan"]]
    if args.json:
        print(json.dumps({host: {"reachable": mac.reachable, "error": mac.error, "jobs": mac.jobs}
                          for host, mac in found.items()}, indent=2))
    else:
        _say(_table(found, args.inventory[0]))
    return EXIT_UNREACHABLE if down else EXIT_ATTENTION if orphans else EXIT_OK


def _table(found: dict[str, jobs.MacJobs], inventory: str) -> list[str]:
    rows = [("JOB", "AGE", "RSS", "LAUNCHER", "COMMAND")]
    for host, mac in found.items():
        rows += [(jobs.job_id(host, job), jobs.age(job["age_seconds"]), jobs.size(job["rss_kib"]),
                  "ORPHAN (launchd)" if job["orphan"] else (job["launcher"] or "?")[:30], job["command"][:100])
                 for job in mac.jobs]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[4] for row in rows]
    count = sum(len(mac.jobs) for mac in found.values())
    orphans = sum(job["orphan"] for mac in found.values() for job in mac.jobs)
    lines += [f"{host}: {'unreachable' if not mac.reachable else 'not read'} ({mac.error})"
              for host, mac in found.items() if not mac.reachable or mac.error]
    lines += [f"{host}: {warning}" for host, mac in found.items() for warning in mac.warnings]
    lines.append(f"{count} MLX job{'' if count == 1 else 's'} on {len(found)} Macs, {orphans} orphaned"
                 + (f"; stop them: {fixes.fill(jobs.STOP_ORPHANS, inventory)}" if orphans else ""))
    return lines if count else lines[len(rows):]


def _chosen(args, found: dict[str, jobs.MacJobs]) -> dict[str, list[dict]]:
    """The jobs the command line names, by Mac; a MAC:PID that is no job listed is bad input."""
    if args.all or args.orphans:
        return {host: [job for job in mac.jobs if args.all or job["orphan"]] for host, mac in found.items()}
    chosen: dict[str, list[dict]] = {}
    for name in args.job:
        host, _, pid = name.rpartition(":")
        job = next((j for j in found.get(host, jobs.MacJobs(host)).jobs if str(j["pid"]) == pid), None)
        if job is None:
            raise UserError(f"stop: {name} is no MLX job mlx-fleet ps lists (MAC:PID); run mlx-fleet ps -i "
                            f"{' -i '.join(args.inventory)}")
        chosen.setdefault(host, []).append(job)
    return chosen


def _stop(args, env_path, targets, found, down) -> int:
    chosen = _chosen(args, found)
    if not any(chosen.values()):
        _say([f"nothing to stop on {len(found)} Macs" + (f" ({len(down)} not read: {', '.join(down)})" if down else "")])
        return EXIT_UNREACHABLE if down else EXIT_OK
    done = jobs.stop(targets, chosen, env_path, args.grace, args.connect_timeout)
    lines = [f"{host}: stopped {jobs.job_id(host, job)} ({jobs.size(job['rss_kib'])}: {job['command'][:80]})"
             for host, result in done.items() for job in result.stopped]
    lines += [f"{host}: still running {jobs.job_id(host, job)}" + (f" (not checked: {result.error})" if result.error else "")
              for host, result in done.items() for job in result.left]
    left = sum(len(result.left) for result in done.values())
    stopped = sum(len(result.stopped) for result in done.values())
    lines.append(f"stopped {stopped} job{'' if stopped == 1 else 's'}, {left} still running")
    _say(lines)
    for host in down:
        print(terminal_text([f"{host}: not read ({found[host].error})"]), file=sys.stderr)
    return EXIT_ATTENTION if left else EXIT_UNREACHABLE if down else EXIT_OK

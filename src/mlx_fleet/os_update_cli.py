"""`mlx-fleet os-update`: macOS updates across the cluster, one Mac at a time (playbook mlx_fleet.cluster.os_update;
logic: plugin_utils.checks.os_update; docs/os-update.md)."""

from __future__ import annotations

import sys

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import secret_socket
from mlx_fleet import arguments, runner
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, Interrupted, UserError

PLAN_ACTION = "mlx_fleet.cluster.os_update_plan"
UPDATE_ACTION = "mlx_fleet.cluster.os_update"


def add_os_update_parser(sub, command) -> None:
    p = command(sub, "os-update", "update macOS on every Mac, one at a time, to one build (canary first, rank 0 last)",
                "Read every Mac's build and the macOS updates Apple offers it (in parallel), print the plan, then "
                "update one Mac at a time: a canary first (not rank 0), rank 0 last. Each Mac installs with the volume "
                "owner's password on softwareupdate's stdin, prepares, restarts by itself and must come back on the "
                "target build with RDMA, its Thunderbolt addresses and MLX as before. Stops at the first Mac that does "
                "not, with what a person must do there (a visit sheet when hands are needed); a rerun resumes. Refuses "
                "while an MLX job runs. Exit status 0: every Mac on the target; 1: stopped or refused.",
                "  mlx-fleet os-update -i inventory/mine --check\n"
                "  mlx-fleet os-update -i inventory/mine --to 26.5.2 --canary studio-3 --password-file ./owner-pw")
    runner.add_playbook_options(p, read_only=True)
    p.add_argument("--to", metavar="VERSION|BUILD", help="the target (default: the newest macOS update every Mac offers)")
    p.add_argument("--canary", metavar="NAME", help="the Mac updated first (default: the first Mac that is not rank 0)")
    p.add_argument("--password-file", help="read the volume owner's password from this file's first line "
                                           "(else it is asked once)")
    p.add_argument("--check", action="store_true", help="print the plan and every Mac's offered macOS updates; "
                                                        "change nothing")
    p.add_argument("--timeout", type=arguments.long_seconds, default=os_update.DEFAULT_TIMEOUT,
                   help="seconds a Mac may take to prepare, restart and come back, at most a day (default: %(default)s)")
    p.add_argument("--poll", type=arguments.seconds, default=10.0,
                   help="seconds between looks at a restarting Mac, at most an hour (default: %(default)s)")


def _interrupted(report) -> bool:
    """Ctrl-C: ansible-runner reports the run canceled (its rc 254)."""
    status = report.artifacts / "status" if report.artifacts else None
    return bool(status and status.exists() and status.read_text().strip() == "canceled")


def _password_consumers(args) -> list[str]:
    """The Macs the password may go to, once each; refused (exit 2, no Mac touched) where the run's pipelining
    is off, since the password, a module argument, would then be written on the Mac in an AnsiballZ file."""
    from mlx_fleet.inventory_view import (
        InventoryView, InventoryViewError)

    try:
        view = InventoryView(args.inventory)
        macs = view.hosts()
        off = [] if args.check else secret_socket.pipelining_off(view, runner.ansible_config(), macs)
    except InventoryViewError as exc:
        raise UserError(str(exc)) from None
    if off:
        raise UserError(f"pipelining is off for {', '.join(off)} (ANSIBLE_PIPELINING, ansible_pipelining, "
                        f"ANSIBLE_KEEP_REMOTE_FILES or {runner.ansible_config()}): the volume owner's password would "
                        "be written on the Mac; turn it on (unset ANSIBLE_PIPELINING and ANSIBLE_KEEP_REMOTE_FILES, drop "
                        "ansible_pipelining: false, pipelining = True in ansible.cfg)")
    return macs


def _read_record(path) -> dict:
    """The record as far as it goes ({"macs": {}} when there is none); a malformed one is a UserError."""
    try:
        return os_update.read_record(path) or {"macs": {}}
    except os_update.BadRecord as exc:
        raise UserError(str(exc)) from None


def run_os_update(args) -> int:
    from mlx_fleet.onboard import read_password

    macs = _password_consumers(args)
    password = "" if args.check else read_password(args.password_file, "Password of the Macs' volume owner: ",
                                                   "the volume owner's password")
    options = runner.options_from(args, "os-update", True)
    extravars = dict(runner.output_extravars(args), mlx_fleet_os_update_check=args.check,
                     mlx_fleet_os_update_timeout=args.timeout, mlx_fleet_os_update_poll=args.poll,
                     **{k: v for k, v in (("mlx_fleet_os_update_to", args.to),
                                           ("mlx_fleet_os_update_canary", args.canary)) if v})
    # Each Mac's install fetches the password once (its FileVault unlock has a socket of its own).
    record_path = runner.output_dir_from(args) / os_update.RECORD_FILE
    try:
        with secret_socket.serve_secret(password, len(macs)) as secret_env:
            options.environment = secret_env
            report = runner.run_playbook("os_update", args.inventory, options, extravars=extravars,
                                         output_dir=runner.output_dir_from(args))
    except Interrupted:  # the runner's line would say "converge": an update is resumed by os-update alone
        print(terminal_text(os_update.interrupted_lines(_read_record(record_path))))
        return EXIT_INTERRUPTED
    plan = report.result(PLAN_ACTION)
    if not plan or "plan" not in plan:  # refused or could not read every Mac: nothing changed
        refused = [line for dummy, text in report.cluster_failed for line in text.splitlines()]
        if refused:
            print(terminal_text([f"refused: {line}" for line in refused]), file=sys.stderr)
            status = EXIT_BAD_INPUT if report.input_errors else EXIT_ATTENTION
            print(f"result: nothing was changed (exit {status})", file=sys.stderr)
            return status
        return runner.print_summary(report, stream=sys.stderr) or EXIT_ATTENTION
    plan = plan["plan"]
    out = os_update.plan_lines(plan)
    if args.check:
        print(terminal_text(out + ["result: --check: nothing was changed"]))
        return report.exit_status
    record = _read_record(record_path)
    for name in plan["order"]:
        mac = record["macs"].get(name, {})
        status = mac.get("status", "untouched")
        after = mac.get("after") or {}
        out.append(f"{name}: " + {os_update.DONE: f"on {after.get('version')} ({after.get('build')}), checked",
                                 os_update.FAILED: f"stopped: {mac.get('reason')}",
                                 os_update.STARTED: "started, not finished"}.get(status, "untouched"))
    for res in report.results.get(UPDATE_ACTION, []):
        if res.get("visit_sheet"):
            out.append(f"visit sheet: {res['visit_sheet']}")
        problem = res.get("problem")
        if problem and not problem["visit"]:  # a visit sheet holds the steps otherwise
            out += [f"  to do: {step}" for step in problem["steps"]]
    if not any(res.get("problem") for res in report.results.get(UPDATE_ACTION, [])):  # failed elsewhere: say why
        out += [f"failed: {task}:" for task, dummy in report.cluster_failed]
        out += [f"failed: {host}: {msg.splitlines()[0]}" for host in sorted(report.failed)
                for msg in report.failures(host)]
    for host, why in sorted(report.unreachable.items()):
        out.append(f"unreachable: {host}: {why}")
    stopped = [n for n in plan["order"] if record["macs"].get(n, {}).get("status") != os_update.DONE]
    if _interrupted(report):
        print(terminal_text(out + os_update.interrupted_lines(record)))
        return EXIT_INTERRUPTED
    if not stopped and report.exit_status == EXIT_OK:
        out.append(f"result: every Mac on macOS {plan['target']['version']} ({plan['target']['build']}); "
                   f"record: {record_path}")
        print(terminal_text(out))
        return EXIT_OK
    untouched = [n for n in stopped if n not in record["macs"]]
    if untouched:
        out.append(f"untouched: {', '.join(untouched)}")
    held = os_update.hold_line(runner.output_dir_from(args), " -i ".join(args.inventory))
    if held:
        out.append(f"{held} (hostfile.held beside the hostfiles)")
    out.append(f"full output: {report.artifacts}/stdout")
    out.append("result: the update stopped; do what is said above, then run mlx-fleet os-update again (exit 1)")
    print(terminal_text(out))
    return report.exit_status or EXIT_ATTENTION


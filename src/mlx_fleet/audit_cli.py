"""`mlx-fleet audit` and `mlx-fleet record`: both run mlx_fleet.cluster.audit (read-only) and report on it
(logic: plugin_utils.checks.audit, plugin_utils.render.audit_report, plugin_utils.checks.run_record; the record: mlx_fleet.record)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.audit_report import summary_lines
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.summary import natural
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet import record as records
from mlx_fleet import runner
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_OK, UserError

AUDIT_ACTION = "mlx_fleet.cluster.audit"


def add_audit_parsers(sub, command) -> None:
    audit = command(sub, "audit", "compare every Mac with the declared state and with the other Macs (read-only)",
                    "Read every Mac (one read-only call each, all in parallel) and compare it with the inventory, the "
                    "roles' defaults and the lock, and with the other Macs: macOS build, hardware, the environment "
                    "and its files, node settings, Thunderbolt addresses, bridge, cables, RDMA, hostfiles, the declared "
                    "models' files (sizes and dates; --deep: every byte hashed). Prints only "
                    "what differs, with the fix; writes audit.json and audit.html. Changes nothing. Exit status 0: no "
                    "drift, 1: drift.",
                    "  mlx-fleet audit -i inventory/mine\n  mlx-fleet audit -i inventory/mine --deep --format json")
    runner.add_playbook_options(audit, read_only=True)
    _add_deep(audit)
    audit.add_argument("--format", choices=("text", "json"), default="text",
                       help="json: the report (mlx-fleet-audit/1) on stdout, for monitoring")
    rec = command(sub, "record", "write the run record of the cluster (versions, hashes, topology) for an experiment",
                  "Read every Mac as the audit does and write a record of the environment an experiment runs on: "
                  "per Mac macOS, model, serial, memory, Python and every package with hashes, the wired limit; the "
                  "backend, hostfile, cables and RDMA; the mlx-fleet version and the inventory's git commit. With "
                  "-- COMMAND, the launch command and the current folder's git commit too (the command is recorded, not "
                  "run: start it yourself). JSON plus Markdown. "
                  "--diff A B prints what changed between two records (exit 1 when more than the time did).",
                  "  mlx-fleet record -i inventory/mine -- mlx.launch --hostfile h.json train.py\n"
                  "  mlx-fleet record --diff before.json after.json")
    runner.add_playbook_options(rec, inventory_required=False, read_only=True)
    _add_deep(rec)
    rec.add_argument("--out", help="the record's JSON file; the Markdown goes beside it "
                                   "(default: OUTPUT_DIR/records/record-TIME.json)")
    rec.add_argument("--diff", nargs=2, dest="compare", metavar=("A", "B"), help="compare two records instead of making one")
    rec.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command the record is for (recorded, not run)")


def _add_deep(parser) -> None:
    parser.add_argument("--deep", action="store_true",
                        help="hash every byte of the declared models' files on every Mac, not only compare sizes "
                             "and dates")


def _audit(args, name: str):
    """Run the audit playbook; (run report, the audit action's result or None)."""
    options = runner.options_from(args, name, True)
    extravars = dict(runner.output_extravars(args), mlx_fleet_inventory=args.inventory[0],
                     mlx_fleet_models_deep=args.deep)
    report = runner.run_playbook("audit", args.inventory, options, extravars=extravars,
                                 output_dir=runner.output_dir_from(args))
    result = report.result(AUDIT_ACTION)
    return report, result if result and "report" in result else None


def _status(report, drift: bool) -> int:
    status = report.exit_status
    return EXIT_ATTENTION if status == EXIT_OK and drift else status


def _not_audited(report) -> list[str]:
    lines = [f"not audited: {host}: unreachable: {report.unreachable[host]}" for host in natural(report.unreachable)]
    return lines + [f"not audited: {host}: {m}" for host in natural(report.failed) for m in report.failures(host)]


def run_audit_or_record(args) -> int:
    """The command line's entry for both commands this module adds."""
    return run_audit(args) if args.tool == "audit" else run_record(args)


def run_audit(args) -> int:
    report, result = _audit(args, "audit")
    if result is None:  # the comparison did not run or failed: every Mac unreachable, bad input
        if args.format == "json":
            print(json.dumps({"format": "mlx-fleet-audit/1", "error": "no Mac could be read"}))
            return report.exit_status or EXIT_ATTENTION
        return runner.print_summary(report, stream=sys.stderr) or EXIT_ATTENTION
    audit = result["report"]
    status = _status(report, bool(audit["drift"]))
    if args.format == "json":
        print(json.dumps(audit, indent=2))
        return status
    lines = summary_lines(audit)
    if status == EXIT_OK:
        print(terminal_text([f"{lines[0]} (report: {result['json']}, {result['html']})"]))
        return status
    lines += _not_audited(report)
    lines.append(f"report: {result['json']}, {result['html']}")
    lines.append({EXIT_ATTENTION: "result: drift (exit 1)", EXIT_BAD_INPUT: "result: fix the input above (exit 2)"}
                 .get(status, f"result: some Macs were not audited (exit {status})"))
    print(terminal_text(lines))
    return status


def write_record(args, launch: list[str] | None, out: Path | None = None):
    """Read every Mac as the audit does and write the record of LAUNCH (the command, or None) to OUT (default
    OUTPUT_DIR/records/record-TIME.json) with its Markdown beside it: (the run's report, the record or None
    when no Mac could be read, its path)."""
    report, result = _audit(args, "record")
    if result is None:
        return report, None, out
    record, out = records.save(result["record"], inventory=Path(args.inventory[0]),
                               output_dir=runner.output_dir_from(args),
                               not_recorded=sorted(set(report.unreachable) | set(report.failed)), command=launch, out=out)
    return report, record, out


def run_record(args) -> int:
    if args.compare:
        lines = records.diff(records.load(args.compare[0]), records.load(args.compare[1]))
        print(terminal_text(lines) if lines else "no difference")
        return EXIT_ATTENTION if any(not line.startswith(records.TIME_KEY + ":") for line in lines) else EXIT_OK
    if not args.inventory:
        raise UserError("give the inventory with -i (or --diff A B to compare two records)")
    launch = args.launch[1:] if args.launch[:1] == ["--"] else args.launch
    report, record, out = write_record(args, launch or None, Path(args.out) if args.out else None)
    if record is None:
        return runner.print_summary(report, stream=sys.stderr) or EXIT_ATTENTION
    notebook = out.with_suffix(".md")
    for line in _not_audited(report):
        print(terminal_text([line.replace("not audited", "not recorded")]))
    print(f"record: {out} (Markdown: {notebook}); {len(record['macs'])} Macs")
    if record["command"]:
        print(f"command recorded, not run: {record['command']['text']} (start it yourself)")
    return report.exit_status

"""`mlx-fleet explain [LOG|-] [-i INVENTORY]`: what an MLX failure means, the evidence to collect and the fix
(the knowledge base: mlx_fleet.explain; with -i, the watch's probe reads the Macs and narrows the cause)."""

from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path

from mlx_fleet import explain
from mlx_fleet import watch
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet import arguments
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK, UserError


def add_explain_parser(sub, command) -> None:
    parser = command(
        sub, "explain", "say what an MLX error means: the likely cause, the evidence to collect, the fix",
        "Read a log (mlx.launch's output, a traceback, exo's log) and print the likely cause on the first line, "
        "as `cause: WORD` or `cause: WORD or WORD` when the message alone cannot tell, then what the log said, "
        "the evidence to collect with the exact commands, and the fix. With -i, read the Macs now (one ssh "
        "session each, as `mlx-fleet watch --once` does) and keep the causes they confirm. Causes: "
        + ", ".join(explain.CAUSES) + ". Exit status 0: a cause named; 1: no message mlx-fleet knows.",
        "  mlx.launch --hostfile h.json job.py 2>&1 | tee job.log; mlx-fleet explain job.log\n"
        "  mlx-fleet explain job.log -i inventory/mine")
    parser.add_argument("log", nargs="?", default="-", help="the log file, or - for stdin (default)")
    parser.add_argument("-i", "--inventory", action="append", help="read the Macs of this inventory to narrow the cause")
    parser.add_argument("--output-dir", help="where the last converge's records are (with -i; default: "
                                             "mlx_fleet_output_dir, else .mlx-fleet in the inventory's folder)")
    parser.add_argument("--connect-timeout", type=arguments.seconds, default=5, metavar="S",
                        help="seconds to wait for a Mac's ssh connection (with -i; default: 5)")


def _read(log: str) -> str:
    """The log as text: a log is whatever a rank wrote, so bytes that are not UTF-8 are replaced, not refused."""
    try:
        data = sys.stdin.buffer.read() if log == "-" else Path(log).read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {log}: {exc.strerror}") from None
    return data.decode("utf-8", errors="replace")


def run_explain(args) -> int:
    text = _read(args.log)
    findings, inventory, output_dir = None, "INVENTORY", "OUTPUT_DIR"
    if args.inventory:
        from mlx_fleet.watch_cli import Watch

        run = Watch(Namespace(inventory=args.inventory, output_dir=args.output_dir, out=None, every=60, once=True,
                              on_change=None, connect_timeout=args.connect_timeout, rdma_timeout=5))
        findings = watch.assess(run.baseline, run.probe())
        inventory, output_dir = " ".join(args.inventory), str(run.out.parent)
    result = explain.explain(text, findings)
    # The report quotes the log's lines: its escape sequences (clipboard, clear screen) are printed as text.
    print(terminal_text(explain.report(result, inventory, output_dir)))
    return EXIT_OK if result.causes else EXIT_ATTENTION

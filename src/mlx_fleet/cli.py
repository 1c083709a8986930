"""mlx-fleet: converge Apple Silicon Macs into an MLX distributed cluster, and keep it that way.

Exit status: 0 ok; 1 the cluster needs attention (a failure, drift, cables still to plug in); 2 bad input
(command line or inventory; nothing changed); 3 another run is using the cluster's outputs (nothing done);
4 some Macs unreachable (the others were handled); 130 interrupted. A Recovery step still to do is a line
of the summary ("to do at the rack"), not an exit status: meanwhile, with mlx_fleet_backend auto, the
cluster runs on the backend its cables allow without RDMA."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import dataclass

from mlx_fleet import __version__
from mlx_fleet.errors import EXIT_BAD_INPUT, EXIT_BUSY, EXIT_INTERRUPTED, EXIT_OK, Busy, Interrupted, UserError

SIM_HELP = "a simulated Mac cluster (macsim) to rehearse on; needs root"


def _command(sub, name: str, summary: str, description: str, examples: str):
    return sub.add_parser(name, help=summary, description=description,
                          epilog="examples:\n" + examples + "\n\n" + __doc__.split("\n\n", 1)[1],
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _capture_parser(sub, command) -> None:
    cap = command(sub, "capture", "record, read-only over ssh, every macOS output mlx-fleet reads from a Mac",
                   "Record, read-only over plain ssh, every macOS command output mlx-fleet reads from a Mac, "
                   "for a bug report that macsim can replay.",
                   "  mlx-fleet capture studio-1 --out ./capture-studio-1\n"
                   "  mlx-fleet sim up --dir /tmp/replay --replay studio-1=./capture-studio-1")
    cap.add_argument("host", help="the Mac, as you reach it with plain ssh (your ssh config applies)")
    cap.add_argument("--out", required=True, help="new folder for the capture (replay it: mlx-fleet sim up --replay NODE=DIR)")


def _run_capture(args) -> int:
    from mlx_fleet.capture import capture

    manifest = capture(args.host, args.out)
    failed = [f"{name} (exit {read['rc']})" for name, read in manifest["reads"].items() if read["rc"] != 0]
    print(f"captured {len(manifest['reads'])} reads from {args.host} into {args.out}")
    if failed:
        print("non-zero exits (recorded as they are): " + ", ".join(failed))
    return EXIT_OK


# name -> (playbook, needs every Mac's facts, one-line help, description, examples)
PLAYBOOK_COMMANDS = {
    "converge": ("site", True, "converge every Mac (mlx_fleet.cluster.site): settings, environment, fabric, hostfiles",
                 "Run mlx_fleet.cluster.site: preflight, node settings, the pinned MLX environment, RDMA "
                 "readiness and the Thunderbolt fabric with its hostfiles.",
                 "  mlx-fleet converge -i inventory/mine\n  mlx-fleet converge -i inventory/mine --check --diff -K"),
    "hostfile": ("hostfile", True, "rediscover the Thunderbolt fabric and rewrite the mlx.launch hostfiles",
                 "Read every Mac's Thunderbolt ports, check the cabling against the plan, choose the backend "
                 "and rewrite hostfile.json (and hostfile-ring.json) on the controller and every Mac. A cable "
                 "moved since the last converge gets its ports configured first (no hostfile names an address "
                 "its Mac does not have); converges nothing else.",
                 "  mlx-fleet hostfile -i inventory/mine\n  mlx-fleet hostfile -i inventory/mine --output-dir /tmp/out"),
    "checklist": ("checklist", True, "print the macOS Recovery checklist for the Macs whose RDMA is off",
                  "Read every Mac's RDMA state and write the printable Recovery-mode checklist (HTML and text) "
                  "for the Macs that need a person to run `rdma_ctl enable` in Recovery. Converges nothing.",
                  "  mlx-fleet checklist -i inventory/mine"),
}


def _run_playbook_command(args) -> int:
    from mlx_fleet import runner

    playbook, needs_every_mac = PLAYBOOK_COMMANDS[args.tool][:2]
    options = runner.options_from(args, args.tool, needs_every_mac)
    report = runner.run_playbook(playbook, args.inventory, options, extravars=runner.output_extravars(args),
                                 output_dir=runner.output_dir_from(args))
    return runner.print_converge_summary(report)


def _playbook_parsers(sub, command) -> None:
    from mlx_fleet.runner import add_playbook_options

    for name, (_, _, summary, description, examples) in PLAYBOOK_COMMANDS.items():
        add_playbook_options(command(sub, name, summary, description, examples))


@dataclass(frozen=True)
class Tool:
    """One entry of the command line: the commands it adds, the module holding them (imported only when a
    run names one of them, or for the whole help, so every command starts without the others' imports),
    the function adding their parsers, `(sub, command)`, and the one running them, `(args) -> exit status`."""

    names: tuple[str, ...]
    module: str
    add_parsers: str
    run: str


# Every command, in the help's order: the one registry the parser and the dispatch both read.
TOOLS = (
    Tool(tuple(PLAYBOOK_COMMANDS), "mlx_fleet.cli", "_playbook_parsers", "_run_playbook_command"),
    Tool(("lock",), "mlx_fleet.env_lock_cli", "add_env_lock_parser", "run_env_lock"),
    Tool(("verify",), "mlx_fleet.verify.cli", "add_verify_parser", "run_verify"),
    Tool(("run",), "mlx_fleet.run.cli", "add_run_parser", "run_run"),
    Tool(("audit", "record"), "mlx_fleet.audit_cli", "add_audit_parsers", "run_audit_or_record"),
    Tool(("models",), "mlx_fleet.models_cli", "add_models_parser", "run_models"),
    Tool(("watch",), "mlx_fleet.watch_cli", "add_watch_parser", "run_watch"),
    Tool(("ps", "stop"), "mlx_fleet.ps_cli", "add_ps_parsers", "run_ps_or_stop"),
    Tool(("explain",), "mlx_fleet.explain_cli", "add_explain_parser", "run_explain"),
    Tool(("capture",), "mlx_fleet.cli", "_capture_parser", "_run_capture"),
    Tool(("os-update",), "mlx_fleet.os_update_cli", "add_os_update_parser", "run_os_update"),
    Tool(("onboard",), "mlx_fleet.onboard", "add_onboard_parser", "run_onboard"),
    Tool(("sim",), "mlx_fleet.sim.cli", "add_sim_parser", "run_sim"),
)


def _tool(name: str) -> Tool | None:
    return next((tool for tool in TOOLS if name in tool.names), None)


def build_parser(tool: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; given the TOOL a run names, only that tool's parser is built for real (its
    module imported), every other tool being a name argparse knows, so each command starts without the
    others' imports. None, or a word that is no tool: every parser, for the help; the simulator's only for
    None or `sim` (listed in the help as it is)."""
    import importlib

    parser = argparse.ArgumentParser(prog="mlx-fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"mlx-fleet {__version__}")
    sub = parser.add_subparsers(dest="tool", required=True)
    named = _tool(tool) if tool else None
    for entry in TOOLS:
        if entry.names == ("sim",):
            if tool in (None, "sim"):
                importlib.import_module(entry.module).add_sim_parser(sub, SIM_HELP)
            else:  # its arguments are parsed once `sim` is the tool
                sub.add_parser("sim", help=SIM_HELP, add_help=False).add_argument("sim_args", nargs=argparse.REMAINDER)
        elif named is None or named is entry:
            getattr(importlib.import_module(entry.module), entry.add_parsers)(sub, _command)
        else:
            for name in entry.names:  # parsed only once it is the tool (its own parser is then built)
                sub.add_parser(name, add_help=False).add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _dispatch(args, argv: list[str] | None) -> int:
    import importlib

    entry = _tool(args.tool)
    args.command_line = ["mlx-fleet", *(argv if argv is not None else sys.argv[1:])]  # for a report that records it
    return getattr(importlib.import_module(entry.module), entry.run)(args)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    args = build_parser(given[0] if given else "").parse_args(argv)
    from mlx_fleet.interrupt import raise_keyboard_interrupt

    # SIGTERM and SIGHUP unwind as Ctrl-C does (a run's playbook is stopped by runner/run.py); the sim keeps its own.
    previous = {signum: signal.signal(signum, raise_keyboard_interrupt)
                for signum in (signal.SIGTERM, signal.SIGHUP) if args.tool != "sim"}
    try:
        return _dispatch(args, argv)
    except Busy as exc:
        return _say(args.tool, exc, EXIT_BUSY)
    except UserError as exc:
        return _say(args.tool, exc, EXIT_BAD_INPUT)
    except Interrupted as exc:
        return _say(args.tool, exc, EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        return _say(args.tool, "interrupted", EXIT_INTERRUPTED)
    except OSError as exc:
        if exc.filename is None:  # not a file the user named or owns: a real fault, with its traceback
            raise
        # A folder or file the user cannot write or read (the output folder, --out): one line naming it.
        return _say(args.tool, f"cannot use {exc.filename}: {exc.strerror}; fix its permissions or give another "
                               "folder", EXIT_BAD_INPUT)
    except Exception as exc:
        if not _bad_input(exc):
            raise
        return _say(args.tool, exc, EXIT_BAD_INPUT)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# The errors of bad input the commands' modules raise besides UserError, by module: a module the run never
# imported raised none, so a command does not import the others' modules (the lock's loads ansible) to tell.
BAD_INPUT = (("ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan", "CablePlanError"),
             ("ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.environment", "EnvLockError"),
             ("mlx_fleet.capture", "CaptureError"),
             ("mlx_fleet.sim.host", "SimError"))


def _bad_input(exc: Exception) -> bool:
    return any(isinstance(exc, getattr(sys.modules[module], name)) for module, name in BAD_INPUT if module in sys.modules)


def _say(tool: str, message, status: int) -> int:
    try:
        print(f"mlx-fleet {tool}: {message}", file=sys.stderr)
    except OSError:
        pass  # the terminal is gone (SIGHUP): the status still says it
    return status


if __name__ == "__main__":
    sys.exit(main())

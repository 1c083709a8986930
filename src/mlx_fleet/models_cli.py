"""`mlx-fleet models status`, `models sync` and `models prune`: run mlx_fleet.cluster.models_status (read-only on the
Macs), mlx_fleet.cluster.models or mlx_fleet.cluster.models_prune and print their report (logic:
plugin_utils.steps.models, plugin_utils.models; sentences: plugin_utils.render.models_status and models_sync)."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from contextlib import contextmanager

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.models_status import size
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet import runner
from mlx_fleet.runner.progress import Progress
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK

STATUS_ACTION = "mlx_fleet.cluster.models_status"
PLAN_ACTION = "mlx_fleet.cluster.models_sync_plan"
REPORT_ACTION = "mlx_fleet.cluster.models_sync_report"


def add_models_parser(sub, command) -> None:
    models = command(sub, "models", "the declared models (mlx_fleet_models) on the Macs",
                     "The models the inventory declares (mlx_fleet_models: Hub entries pinned by `mlx-fleet lock`, "
                     "folders of the controller), at the same path on every Mac.",
                     "  mlx-fleet models status -i inventory/mine\n  mlx-fleet models status -i inventory/mine --deep\n"
                     "  mlx-fleet models sync -i inventory/mine --check\n  mlx-fleet models sync -i inventory/mine qwen3-4b\n"
                     "  mlx-fleet models sync -i inventory/mine --deep\n"
                     "  mlx-fleet models prune -i inventory/mine --check")
    actions = models.add_subparsers(dest="models_command", required=True)
    status = actions.add_parser("status", help="per Mac and model: present, verified, missing files and bytes",
                                description="Read every Mac's declared models (one read-only call each) against "
                                            "their pinned files: per Mac and model, present and verified, the files "
                                            "missing, the bytes to copy, the free space, the revision. Changes "
                                            "nothing on the Macs. Exit status 0: every model on every Mac, 1: a Mac "
                                            "lacks one (or a Hub model is not pinned).")
    runner.add_playbook_options(status, read_only=True)
    status.add_argument("--deep", action="store_true", help="hash every byte of every file, not only sizes")
    sync = actions.add_parser("sync", help="copy the declared models to the Macs that lack them, over the cables",
                              description="Copy every declared model (or those NAMEd) to the Macs that lack files "
                                          "of it or hold them with other bytes (every file hashed but those the "
                                          "sync verified and still of the size and date it recorded; --deep: "
                                          "every byte): a Hub model fetched once on the "
                                          "controller, one copy to one Mac over the management network, every "
                                          "other Mac to Mac over the Thunderbolt cables, every byte verified at the "
                                          "receiver; an interrupted copy resumes. Refused before any byte moves "
                                          "when a Mac has too little space. --check: what each Mac would receive. "
                                          "Exit status 0: every Mac holds every model, 1: one could not be "
                                          "completed, 2: bad input.")
    sync.add_argument("names", nargs="*", metavar="NAME", help="only these models of mlx_fleet_models")
    runner.add_playbook_options(sync)
    sync.add_argument("--deep", action="store_true",
                      help="hash every byte of every file, also those the sync verified and left unchanged")
    prune = actions.add_parser("prune", help="remove from the Macs the model files no declared model pins any more",
                               description="Remove from every Mac what mlx-fleet's sync wrote that no entry of "
                                           "mlx_fleet_models pins: Hub revisions (snapshots, refs, blobs no pinned "
                                           "snapshot uses) and path entries' folders no entry names. A file the sync "
                                           "did not write is never removed. Every Hub entry must be pinned first. "
                                           "Prints, per Mac, the files that go; --check: what would go, nothing "
                                           "removed. Exit status 0, 2: bad input, 4: a Mac did not answer.")
    runner.add_playbook_options(prune)


def run_models(args) -> int:
    if args.models_command == "sync":
        return run_sync(args)
    if args.models_command == "prune":
        return run_prune(args)
    extravars = dict(runner.output_extravars(args), mlx_fleet_inventory=args.inventory[0],
                     mlx_fleet_models_deep=args.deep)
    report = runner.run_playbook("models_status", args.inventory, runner.options_from(args, "models status", False),
                                 extravars=extravars, output_dir=runner.output_dir_from(args))
    result = report.result(STATUS_ACTION)
    if not result or "report" not in result:  # the judgement did not run: bad input, every Mac unreachable
        return runner.print_summary(report, stream=sys.stderr) or EXIT_ATTENTION
    print(terminal_text(result["msg"].splitlines()))
    status = report.exit_status
    return EXIT_ATTENTION if status == EXIT_OK and not result["report"]["complete"] else status


SHOWN_EVERY = 0.5  # seconds between two updates of the live line


class Transfers:
    """Per Mac, from its progress datagrams (model_copy's `progress`): bytes held and to receive, and when."""

    def __init__(self):
        self.macs: dict[str, tuple[float, int, int, int, float]] = {}  # first seen, held then, held, total, now

    def heard(self, datagram: bytes, now: float) -> None:
        """One Mac's [name, held, total]; anything else is ignored (it is only shown)."""
        try:
            name, held, total = json.loads(datagram)
        except (ValueError, TypeError):  # not JSON, not three things
            return
        if not (isinstance(name, str) and isinstance(held, int) and isinstance(total, int)):
            return
        first, held_first = self.macs.get(name, (now, held))[:2]
        self.macs[name] = (first, held_first, held, total, now)

    def line(self) -> str:
        """Per Mac receiving: bytes held of those to receive, the rate since it was first heard, the time left."""
        shown = []
        for name, (first, held_first, held, total, now) in sorted(self.macs.items()):
            rate = (held - held_first) / (now - first) if now > first else 0
            left = f", {(total - held) / rate:.0f} s left" if rate and held < total else ""
            shown.append(f"{name} {size(held)}/{size(total)} {size(int(rate))}/s{left}")
        return "; ".join(shown)


@contextmanager
def transfer_progress(progress: Progress):
    """A UDP listener for the Macs' progress datagrams while the sync runs (yields its port), feeding PROGRESS's
    live line at most every SHOWN_EVERY seconds; closed on leaving."""
    transfers = Transfers()
    stopped = threading.Event()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("0.0.0.0", 0))
        listener.settimeout(SHOWN_EVERY)

        def listen():
            shown = 0.0
            while not stopped.is_set():
                try:
                    transfers.heard(listener.recv(512), time.monotonic())
                except OSError:  # nothing came within SHOWN_EVERY (socket.timeout), or closed
                    continue
                if time.monotonic() - shown >= SHOWN_EVERY:
                    shown = time.monotonic()
                    try:
                        progress.set_detail(transfers.line())
                    except OSError:  # the terminal went away (SIGHUP): nothing more to show
                        return

        thread = threading.Thread(target=listen, daemon=True)
        thread.start()
        try:
            yield listener.getsockname()[1]
        finally:
            stopped.set()
            thread.join()


def run_sync(args) -> int:
    extravars = dict(runner.output_extravars(args), mlx_fleet_inventory=args.inventory[0],
                     mlx_fleet_models_sync_names=list(args.names), mlx_fleet_models_deep=args.deep)
    progress = Progress()
    with transfer_progress(progress) as port:
        report = runner.run_playbook("models", args.inventory, runner.options_from(args, "models sync", False),
                                     extravars=dict(extravars, mlx_fleet_models_progress_port=port),
                                     output_dir=runner.output_dir_from(args), progress=progress)
    planned = report.result(PLAN_ACTION)
    done = report.result(REPORT_ACTION)
    if not planned or "plan" not in planned:  # refused before any byte moved: bad input, too little space
        return runner.print_summary(report, stream=sys.stderr) or EXIT_ATTENTION
    if args.check:
        print(terminal_text(planned["msg"].splitlines()))
        return report.exit_status
    if not done or "report" not in done:
        return runner.print_summary(report, stream=sys.stderr) or EXIT_ATTENTION
    print(terminal_text(done["msg"].splitlines()))
    status = report.exit_status
    return EXIT_ATTENTION if status == EXIT_OK and not done["report"]["complete"] else status


def run_prune(args) -> int:
    """The files that go are each Mac's diff (Ansible's own rendering, always shown), then the summary."""
    args.diff = True
    extravars = dict(runner.output_extravars(args), mlx_fleet_inventory=args.inventory[0])
    report = runner.run_playbook("models_prune", args.inventory, runner.options_from(args, "models prune", False),
                                 extravars=extravars, output_dir=runner.output_dir_from(args))
    return runner.print_summary(report)

"""`mlx-fleet models status`: runs mlx_fleet.cluster.models_status (read-only on the Macs) and prints its report
(logic: plugin_utils.steps.models, plugin_utils.models.status; sentences: plugin_utils.render.models_status)."""

from __future__ import annotations

import sys

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from mlx_fleet import runner
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_OK

STATUS_ACTION = "mlx_fleet.cluster.models_status"


def add_models_parser(sub, command) -> None:
    models = command(sub, "models", "the declared models (mlx_fleet_models) on the Macs",
                     "The models the inventory declares (mlx_fleet_models: Hub entries pinned by `mlx-fleet lock`, "
                     "folders of the controller), at the same path on every Mac.",
                     "  mlx-fleet models status -i inventory/mine\n  mlx-fleet models status -i inventory/mine --deep")
    actions = models.add_subparsers(dest="models_command", required=True)
    status = actions.add_parser("status", help="per Mac and model: present, verified, missing files and bytes",
                                description="Read every Mac's declared models (one read-only call each) against "
                                            "their pinned files: per Mac and model, present and verified, the files "
                                            "missing, the bytes to copy, the free space, the revision. Changes "
                                            "nothing on the Macs. Exit status 0: every model on every Mac, 1: a Mac "
                                            "lacks one (or a Hub model is not pinned).")
    runner.add_playbook_options(status, read_only=True)
    status.add_argument("--deep", action="store_true", help="hash every byte of every file, not only sizes")


def run_models(args) -> int:
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

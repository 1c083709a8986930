"""`mlx-fleet verify -i INVENTORY`: the command line, the terminal summary and the exit status
(0 passed, 1 failed, 2 bad input, 4 a Mac unreachable)."""

from __future__ import annotations

import argparse
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import OUTPUT_DIR_NAME
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks import os_update
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder, private_folder
from mlx_fleet.arguments import long_seconds
from mlx_fleet.errors import EXIT_ATTENTION, UserError
from mlx_fleet.verify import models, nodes, report
from mlx_fleet.verify.jobs import LaunchError, mlx_launch
from mlx_fleet.verify.plan import (DEFAULT_SIZES, VerifyError, load_cluster, parse_sizes,
                                   settings_from_inventory)
from mlx_fleet.verify.run import MODEL_PATH_ENV, Options, verify

def add_verify_parser(sub, command) -> None:
    parser = command(
        sub, "verify", "check that every rank starts, every cable carries data, and your task reproduces",
        "Run a check program through mlx.launch with the cluster's hostfile: all_sum over every rank at each "
        "size, then each cable alone (latency, bandwidth); with --script, your task on one Mac and on the "
        "cluster, compared within --rtol/--atol. Writes verify.json and verify.html. Needs mlx-fleet[launch].",
        "  mlx-fleet verify -i inventory/mine\n"
        "  mlx-fleet verify -i inventory/mine --script examples/matrix_sum.py --repeat 3\n"
        "  mlx-fleet verify -i inventory/mine --script generate.py --model qwen3-4b")
    parser.add_argument("-i", "--inventory", action="append", required=True,
                        help="inventory file or folder (repeatable), as for ansible-playbook")
    parser.add_argument("--output-dir", help="where the hostfiles are (default: mlx_fleet_output_dir, else "
                                             f"{OUTPUT_DIR_NAME} in the inventory's folder)")
    parser.add_argument("--out", help="folder for this run's report and logs (default: OUTPUT_DIR/verify/<time>)")
    parser.add_argument("--python", help="the interpreter on every Mac (default: mlx_env_path/bin/python)")
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help="message sizes: FROM:TO (x4 steps) or a list, e.g. 1KiB,4MiB (default: %(default)s)")
    parser.add_argument("--timeout", type=long_seconds, default=120,
                        help="seconds each job may run before every rank is stopped (default: %(default)s)")
    parser.add_argument("--script", type=Path, help="your own small task: a Python script that prints its result "
                                                    "as JSON (numbers or arrays)")
    parser.add_argument("--model", help="a model of mlx_fleet_models the --script loads: refused unless present and "
                                         f"verified on every Mac; the script finds it at ${MODEL_PATH_ENV}")
    parser.add_argument("--repeat", type=int, default=3, help="runs of --script on one Mac and on the cluster "
                                                              "(default: %(default)s)")
    parser.add_argument("--rtol", type=float, default=1e-5, help="relative tolerance (default: %(default)s)")
    parser.add_argument("--atol", type=float, default=1e-8, help="absolute tolerance (default: %(default)s)")
    parser.add_argument("--args", nargs=argparse.REMAINDER, default=[], dest="script_args",
                        help="the rest of the line goes to --script")


def _options(args, python: str) -> Options:
    if args.script is not None and not args.script.is_file():
        raise VerifyError(f"--script {args.script}: no such file")
    if args.script_args and args.script is None:
        raise VerifyError("--args goes with --script")
    if args.model and args.script is None:
        raise VerifyError("--model goes with --script")
    if args.repeat < 1:
        raise VerifyError("--repeat must be 1 or more")
    if not (math.isfinite(args.rtol) and math.isfinite(args.atol)) or args.rtol < 0 or args.atol < 0:
        raise VerifyError("--rtol and --atol must be finite and not negative")
    return Options(" ".join(args.inventory), python, parse_sizes(args.sizes), args.timeout,
                   args.script.resolve() if args.script else None, list(args.script_args), args.repeat,
                   args.rtol, args.atol)


def run_verify(args) -> int:
    try:
        settings = settings_from_inventory(args.inventory)
        options = _options(args, args.python or settings.python)
        options.bridge = settings.bridge
        folder = Path(args.output_dir).resolve() if args.output_dir else settings.output_dir
        held = os_update.hold_reason(folder)
        if held:
            raise VerifyError(held)
        cluster = load_cluster(folder, args.inventory[0])
        launcher = mlx_launch()
        manifest = models.pinned(settings, args.model, args.inventory[0]) if args.model else None
    except (VerifyError, LaunchError) as exc:
        raise UserError(str(exc)) from None
    if manifest is not None:
        hf_cache, models_dir = models.where(settings)
        held = models.read(cluster.hosts, manifest, options.python, hf_cache, models_dir)
        refused = models.refusal(args.model, manifest, held, args.inventory[0])
        if refused:
            print(refused, file=sys.stderr)
            return EXIT_ATTENTION
        options.model = (args.model, models.path_on_macs(manifest, hf_cache, models_dir))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:  # a folder another account can write could get links planted in it, written through
        out = private_folder(Path(args.out).resolve() if args.out else folder / "verify" / stamp)
    except UnsafeFolder as exc:
        raise UserError(f"verify --out: {exc}") from None
    print(f"mlx-fleet verify: {cluster.backend}, {len(cluster.hosts)} Macs, {len(cluster.cables)} cables; "
          f"report in {out}", flush=True)
    with nodes.shared_connections():  # the staging, the reads after a failure and the stop: one ssh connection per Mac
        outcome = verify(cluster, options, out, launcher)
    data = report.build(outcome, args.command_line)
    report.write(out, data)
    report.print_summary(data, out)
    return data["exit_code"]

"""The `mlx-fleet` command line."""

from __future__ import annotations

import argparse
import sys

from mlx_fleet.cableplan import CablePlanError
from mlx_fleet.sim.cli import add_sim_parser, run_sim


def _capture_parser(sub) -> None:
    cap = sub.add_parser("capture", help="record, read-only over ssh, every macOS output mlx-fleet reads from a Mac")
    cap.add_argument("host", help="the Mac, as you reach it with plain ssh (your ssh config applies)")
    cap.add_argument("--out", required=True, help="new folder for the capture (replay it: mlx-fleet sim up --replay NODE=DIR)")


def _run_capture(args) -> int:
    from mlx_fleet.capture import capture

    manifest = capture(args.host, args.out)
    failed = [f"{name} (exit {read['rc']})" for name, read in manifest["reads"].items() if read["rc"] != 0]
    print(f"captured {len(manifest['reads'])} reads from {args.host} into {args.out}")
    if failed:
        print("non-zero exits (recorded as they are): " + ", ".join(failed))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mlx-fleet", description=__doc__)
    sub = parser.add_subparsers(dest="tool", required=True)
    add_sim_parser(sub)
    _capture_parser(sub)
    from mlx_fleet.lock import add_lock_parser
    from mlx_fleet.runner import add_playbook_parser, run_from_args

    add_lock_parser(sub)
    add_playbook_parser(sub, "hostfile", "rediscover the Thunderbolt fabric and rewrite the mlx.launch hostfiles, "
                                         "converging nothing else")
    add_playbook_parser(sub, "checklist", "read every Mac's RDMA state and print the macOS Recovery checklist "
                                          "for those that need it, converging nothing")
    from mlx_fleet.verify.cli import add_verify_parser

    add_verify_parser(sub)
    args = parser.parse_args(argv)
    from mlx_fleet.capture import CaptureError
    from mlx_fleet.sim.host import SimError

    try:
        if args.tool == "sim":
            return run_sim(args)
        if args.tool == "capture":
            return _run_capture(args)
        if args.tool == "hostfile":
            return run_from_args("hostfile.yml", args)
        if args.tool == "checklist":
            return run_from_args("checklist.yml", args)
        if args.tool == "verify":
            from mlx_fleet.verify.cli import run_verify

            return run_verify(args, argv)
        if args.tool == "lock":
            from mlx_fleet.lock import run_lock

            return run_lock(args)
    except (SimError, CablePlanError, CaptureError) as exc:
        print(f"mlx-fleet: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`mlx-fleet sim`: the command line of macsim, the simulated Mac cluster."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from mlx_fleet.arguments import long_seconds, seconds

DEFAULT_HUB_LIFETIME = 4 * 3600  # a stand-in a rehearsal forgot stops by itself

DEFAULT_SIM_DIR = os.environ.get("MLX_FLEET_SIM_DIR", ".sim")


def add_sim_parser(sub, help_text: str) -> None:
    sim = sub.add_parser("sim", help=help_text)
    ssub = sim.add_subparsers(dest="sim_command", required=True)

    def with_dir(p):
        p.add_argument("--dir", default=DEFAULT_SIM_DIR, help="cluster folder (default: %(default)s)")
        return p

    up = with_dir(ssub.add_parser("up", help="build the cluster and write DIR/inventory.yml and DIR/ssh_config"))
    up.add_argument("--nodes", type=int, help="number of Macs (not needed with a plan file)")
    up.add_argument("--model", help="a key of the model catalogue (plugin_utils/base/mac_models.py): mini-m4-pro (default), "
                                         "studio-m4-max, studio-m2-ultra, macbook-pro-m5-max, ...")
    up.add_argument("--topology", default="mesh", help="mesh (default), ring, line, a cable-plan FILE, or your inventory (file or folder)")
    up.add_argument("--rdma", default="plan", help="all, none, or NODE,NODE... with RDMA enabled (default: all, or the plan file's)")
    up.add_argument("--seed", type=int, default=0, help="serials, UUIDs and MACs derive from it (default: 0)")
    up.add_argument("--replay", action="append", metavar="NODE=CAPTURE_DIR",
                    help="add NODE replaying a real Mac's capture (mlx-fleet capture); repeatable")
    up.add_argument("--manage-over", action="append", metavar="NODE=bridge0|NODE=tb:N",
                    help="the controller reaches NODE over a Thunderbolt cable, at an address on its "
                         "Thunderbolt Bridge or on Thunderbolt port N, instead of en0; repeatable")
    add = with_dir(ssub.add_parser("add", help="power on a new Mac as it leaves Setup Assistant: password login only, "
                                                "not cabled, not in the inventory"))
    add.add_argument("name")
    add.add_argument("--model", help="a key of the model catalogue (plugin_utils/base/mac_models.py): mini-m4-pro (default), "
                                         "studio-m4-max, studio-m2-ultra, macbook-pro-m5-max, ...")
    add.add_argument("--macos-version", help="e.g. 26.2 (default: the sim's)")
    add.add_argument("--macos-build", help="e.g. 25C56 (default: the sim's)")
    with_dir(ssub.add_parser("down", help="remove everything the cluster made"))
    with_dir(ssub.add_parser("status", help="nodes, their state and the cables"))
    for name, helptext in (("snapshot", "save every node's disk, the cables and the controller's files as NAME"),
                           ("restore", "put snapshot NAME back, restarting every node from its saved disk")):
        with_dir(ssub.add_parser(name, help=helptext)).add_argument("name", nargs="?", default="default",
                                                                    help="(default: %(default)s)")
    for name, helptext in (("exec", "run a command as root (or --user) on a node's console"),
                           ("recovery", "boot a node into macOS Recovery and run a Terminal command there")):
        p = with_dir(ssub.add_parser(name, help=helptext))
        if name == "exec":
            p.add_argument("--user", help="as this local account instead of root (admin, or student: a "
                                          "standard account with no sudo)")
        p.add_argument("node")
        p.add_argument("node_command", nargs=argparse.REMAINDER, metavar="-- COMMAND")
    link = with_dir(ssub.add_parser("link", help="take the link the controller manages NODE through down (or up), "
                                                  "the node staying on"))
    link.add_argument("node")
    link.add_argument("state", choices=("down", "up"))
    update = with_dir(ssub.add_parser("update", help="install a macOS update on a node: new version, RDMA off "
                                                      "(as users report), restart"))
    update.add_argument("node")
    update.add_argument("--macos-build", required=True, help="the new build, e.g. 25D125")
    update.add_argument("--macos-version", help="the new version, e.g. 26.3 (default: unchanged)")
    update.add_argument("--keep-rdma", action="store_true", help="an update that leaves RDMA as it was")
    update.add_argument("--reenable-bridge", action="store_true", help="an update that turns the Thunderbolt Bridge back on")
    offer = with_dir(ssub.add_parser("offer", help="Apple offers a macOS update to the nodes (softwareupdate --list "
                                                    "shows it; --install prepares, then restarts into it)"))
    offer.add_argument("nodes", nargs="*", metavar="NODE", help="the nodes offered it (default: every node)")
    offer.add_argument("--macos-version", required=True, help="e.g. 26.5.2")
    offer.add_argument("--macos-build", required=True, help="e.g. 25F84")
    offer.add_argument("--fault", action="append", default=[], metavar="NODE=FAULT",
                       help="rehearse an update gone wrong on NODE: no-prepare, no-return, filevault-locked, rdma-off")
    offer.add_argument("--prepare-seconds", type=seconds, default=5.0,
                       help="how long the preparation takes before the restart (default: %(default)s; a Mac takes minutes)")
    with_dir(ssub.add_parser("unlock", help="log in at a node's FileVault login window (after an update)")).add_argument("node")
    pip = with_dir(ssub.add_parser("pip", help="pip of a Python environment on a node, as its owner, offline: "
                                               "install or upgrade a package by hand (drift)"))
    pip.add_argument("--env", default="/opt/mlx-fleet/venv", help="the environment's folder (default: %(default)s)")
    pip.add_argument("node")
    pip.add_argument("pip_args", nargs=argparse.REMAINDER, metavar="-- PIP_ARGS")
    with_dir(ssub.add_parser("reboot", help="restart a node (keeps networksetup settings, drops ifconfig ones)")).add_argument("node")
    with_dir(ssub.add_parser("unplug", help="pull the cable out of NODE:PORT")).add_argument("port")
    plug = with_dir(ssub.add_parser("plug", help="cable NODE:PORT to NODE:PORT"))
    plug.add_argument("a")
    plug.add_argument("b")
    plug.add_argument("--speed", type=int, choices=(20, 40, 80), help="a slower cable: 40 is a Thunderbolt 4 cable")
    plug.add_argument("--dock", metavar="NAME", help="a dock or hub between the two Macs, e.g. 'CalDigit TS4'")
    plug.add_argument("--rate", type=int, metavar="MBIT",
                      help="the cable carries at most MBIT megabits per second each way: rehearse a long copy with "
                           "small files (the sim's own; macOS reports the link speed only)")
    hub = with_dir(ssub.add_parser("hub", help="a Hugging Face Hub stand-in serving a folder of repos "
                                               "(HF_ENDPOINT for the controller and the Macs; docs/macsim.md)"))
    hsub = hub.add_subparsers(dest="hub_command", required=True)
    serve = hsub.add_parser("serve", help="serve FOLDER/ORG/NAME (revision main) and FOLDER/ORG/NAME@REV in the "
                                          "background, at the cluster's bridge address (127.0.0.1 without a cluster)")
    serve.add_argument("folder")
    serve.add_argument("--port", type=int, default=0, help="the API's port (default: a free one)")
    serve.add_argument("--gated", action="append", default=[], metavar="ORG/NAME",
                       help="a gated repo: its files need a login (a token); repeatable")
    serve.add_argument("--cut", action="append", default=[], metavar="ORG/NAME=BYTES",
                       help="a download of the repo's files stops after BYTES, as a dropped connection; repeatable")
    serve.add_argument("--for", dest="lifetime", type=long_seconds, default=DEFAULT_HUB_LIFETIME,
                       help="stop by itself after this long (default: %(default)s seconds)")
    hsub.add_parser("stop", help="stop the stand-in (sim down does too)")
    st = with_dir(ssub.add_parser("set", help="change a node's hardware or OS facts, e.g. os_build=25C57"))
    st.add_argument("node")
    st.add_argument("assignments", nargs="+", metavar="KEY=VALUE")


def _strip_dashes(command: list[str]) -> list[str]:
    return command[1:] if command[:1] == ["--"] else command


def run_sim(args) -> int:
    from mlx_fleet.sim import host
    from mlx_fleet.sim.cluster import Cluster
    from mlx_fleet.sim.layout import build_layout, parse_manage_over

    host.check_cluster_dir(Path(os.path.abspath(args.dir)))  # not resolved: a symlink there is checked itself
    if os.geteuid() == 0:
        host.remove_stale_drop_ins()
    cluster = Cluster(args.dir)
    cmd = args.sim_command
    if cmd == "up":
        from mlx_fleet.sim.replay import parse_replay_args

        replays = parse_replay_args(args.replay)
        layout = build_layout(args.nodes, args.model, args.topology, args.rdma, replays=replays)
        layout.manage_over = parse_manage_over(args.manage_over, layout.models)
        _warn(host.name_warnings(layout.models))
        cluster.up(layout, seed=args.seed)
        for name, replay in replays.items():
            for note in replay.notes:
                print(f"replay {name}: {note}")
        status = cluster.status()
        print(f"macsim: {len(status['nodes'])} Macs up in {status['dir']}")
        _print_status(status)
        print(f"\ninventory: {cluster.dir / 'inventory.yml'}   try: ssh {status['nodes'][0]['name']} sw_vers")
    elif cmd == "add":
        from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import DEFAULT_MODEL
        from mlx_fleet.sim.layout import catalogue_model

        _warn(host.name_warnings([args.name]))
        added = cluster.add(args.name, catalogue_model(args.model or DEFAULT_MODEL), args.macos_version, args.macos_build)
        print(f"{added['name']} ({added['computer_name']}) is up at {added['address']}: not cabled, not in the inventory")
        print(f"admin password: {added['password_file']}")
        print(f"host key: {added['fingerprint']} (not in {cluster.dir / 'known_hosts'})")
    elif cmd == "down":
        from mlx_fleet.sim import hub

        if hub.stop(cluster.dir):
            print(f"macsim: Hub stand-in of {cluster.dir} stopped")
            if not cluster.state:
                return 0
        cluster.down()
        print(f"macsim: cluster in {cluster.dir} removed")
    elif cmd == "hub":
        return _run_hub(args, cluster)
    elif cmd == "status":
        _print_status(cluster.status())
    elif cmd == "snapshot":
        print(f"snapshot {args.name}: {cluster.snapshot(args.name)}")
    elif cmd == "restore":
        print(f"restored snapshot {args.name}: {', '.join(cluster.restore(args.name))} restarted from it")
    elif cmd == "exec":
        return cluster.exec(args.node, _strip_dashes(args.node_command), user=args.user)
    elif cmd == "recovery":
        return cluster.recovery(args.node, _strip_dashes(args.node_command))
    elif cmd == "link":
        print(f"{args.node}: management link {args.state} ({cluster.set_link(args.node, args.state == 'up')})")
    elif cmd == "update":
        profile = cluster.update(args.node, args.macos_build, args.macos_version, keep_rdma=args.keep_rdma,
                                 bridge_on=args.reenable_bridge)
        print(f"{args.node} updated to macOS {profile['os_version']} ({profile['os_build']}) and restarted; "
              f"RDMA {'enabled' if profile['rdma_enabled'] else 'disabled'}")
    elif cmd == "offer":
        faults = dict(item.partition("=")[::2] for item in args.fault)
        offered = cluster.offer(args.nodes, args.macos_version, args.macos_build, faults, args.prepare_seconds)
        print(f"macOS {args.macos_version} ({args.macos_build}) offered to {', '.join(offered)}"
              + "".join(f"; {node}: {fault}" for node, fault in faults.items()))
    elif cmd == "unlock":
        cluster.unlock(args.node)
        print(f"{args.node}: logged in at the login window; FileVault unlocked, the Mac started up")
    elif cmd == "pip":
        return cluster.pip(args.node, args.env, _strip_dashes(args.pip_args))
    elif cmd == "reboot":
        cluster.reboot(args.node)
        print(f"{args.node} restarted")
    elif cmd == "unplug":
        print(f"unplugged {cluster.unplug(args.port)}")
    elif cmd == "plug":
        print(f"plugged {cluster.plug(args.a, args.b, speed=args.speed, dock=args.dock, rate=args.rate)}")
    elif cmd == "set":
        profile = cluster.set(args.node, args.assignments)
        print(json.dumps({k.split('=')[0]: profile[k.split('=')[0]] for k in args.assignments}))
    return 0


def _run_hub(args, cluster) -> int:
    from mlx_fleet.sim import host, hub

    if args.hub_command == "stop":
        stopped = hub.stop(cluster.dir)
        print(f"macsim: Hub stand-in at {stopped['endpoint']} stopped" if stopped else
              f"macsim: no Hub stand-in runs for {cluster.dir}")
        return 0
    cut = {}
    for item in args.cut:
        repo, _, count = item.partition("=")
        if not repo or not count.isdigit():
            raise host.SimError(f"--cut {item}: give ORG/NAME=BYTES, e.g. --cut acme/tiny=1048576")
        cut[repo] = int(count)
    # The cluster's bridge is the controller's address on the Macs' network: both reach it there.
    address = f"10.213.{cluster.index}.1" if cluster.state else "127.0.0.1"
    host.make_cluster_dir(cluster.dir)
    running = hub.start(cluster.dir, args.folder, address, args.port, args.gated, cut, args.lifetime)
    faults = [f"{repo} gated" for repo in running["gated"]] + [f"{r} cut after {n} bytes" for r, n in cut.items()]
    print(f"macsim: Hub stand-in serving {running['folder']} (pid {running['pid']}"
          f"{'; ' + ', '.join(faults) if faults else ''}); requests: {cluster.dir / hub.LOG}")
    print(f"HF_ENDPOINT={running['endpoint']}")
    return 0


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"mlx-fleet sim: warning: {warning}", file=sys.stderr)


def _print_status(status: dict) -> None:
    print(f"{'node':<14} {'model':<20} {'status':<9} {'address':<14} {'link':<12} {'RDMA':<9} {'macOS':<14} serial")
    for n in status["nodes"]:
        print(f"{n['name']:<14} {n['model']:<20} {n['status']:<9} {n['management_ip']:<14} {n['link']:<12} "
              f"{n['rdma']:<9} {n['macos']:<14} {n['serial']}")
    print("cables:" if status["cables"] else "cables: none")
    for cable in status["cables"]:
        print(f"  {cable}")

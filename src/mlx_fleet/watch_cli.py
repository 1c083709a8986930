"""`mlx-fleet watch -i INVENTORY`: probe every Mac each round (one ssh session each, all at once, as the
inventory reaches them), say each change once, keep status.json, metrics.prom and status.html current
(docs/watch.md). The judgement is mlx_fleet.watch; the outputs mlx_fleet.watch_page."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.mlx_env import fingerprint_path
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from mlx_fleet import watch
from mlx_fleet import watch_page
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import last_links
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.content import terminal_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding, lines
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.readiness import LEDGER_FILE, read_ledger
from mlx_fleet import jobs, watch_service
from mlx_fleet.arguments import long_seconds, seconds
from mlx_fleet.errors import EXIT_ATTENTION, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNREACHABLE, UserError
from mlx_fleet.verify import nodes
from mlx_fleet.verify.plan import VerifyError, read_inventory

HOOK_TIMEOUT = 30  # seconds an --on-change command may take per event


def add_watch_parser(sub, command) -> None:
    parser = command(
        sub, "watch", "watch the cluster between runs: cables, Macs, bridge, RDMA, reboots; say each change once",
        "Probe every Mac each round (one ssh session each, all in parallel, as the inventory reaches them): "
        "reachable, each Thunderbolt port's link, speed and peer, the bridge, RDMA (ibv_devinfo under a time "
        "limit: a hang is stale RDMA), macOS build, boot time, sleep settings, the environment's fingerprint, "
        "the MLX jobs (an orphaned rank holding memory: mlx-fleet ps, stop). "
        "Compares with the last converge's records (address and RDMA ledgers) and the round before, and prints "
        "only changes, each once, with the fix. Keeps OUT/status.json, OUT/metrics.prom (Prometheus text format, "
        "for node_exporter's textfile collector) and OUT/status.html current. Runs until Ctrl-C (exit 130); "
        "--once runs one round against the last good state and exits as audit does: 0 nothing wrong, 1 "
        "findings, 4 a Mac unreachable.",
        "  mlx-fleet watch -i inventory/mine --every 30\n"
        "  mlx-fleet watch -i inventory/mine --once\n"
        "  mlx-fleet watch -i inventory/mine --on-change 'curl -s -d @- https://chat.example/hook'\n"
        "  mlx-fleet watch -i inventory/mine --every 60 --install\n"
        "  mlx-fleet watch --uninstall")
    parser.add_argument("-i", "--inventory", action="append",
                        help="inventory file or folder (repeatable), as for ansible-playbook")
    parser.add_argument("--every", type=long_seconds, default=60, metavar="S", help="seconds between rounds (default: 60)")
    parser.add_argument("--once", action="store_true", help="one round, then exit 0, 1 or 4 (as audit)")
    parser.add_argument("--on-change", metavar="CMD", help="a shell command run for each event, the event as "
                                                             f"JSON on its stdin (at most {HOOK_TIMEOUT} s each)")
    parser.add_argument("--output-dir", help="where the last converge's records are (default: mlx_fleet_output_dir, "
                                             "else .mlx-fleet in the inventory's folder)")
    parser.add_argument("--out", help="folder for status.json, metrics.prom, status.html (default: OUTPUT_DIR/watch)")
    parser.add_argument("--connect-timeout", type=seconds, default=5, metavar="S",
                        help="seconds to wait for a Mac's ssh connection (default: 5)")
    parser.add_argument("--rdma-timeout", type=seconds, default=5, metavar="S",
                        help="seconds ibv_devinfo may take before RDMA counts as stale (default: 5)")
    service = parser.add_mutually_exclusive_group()
    service.add_argument("--install", action="store_true",
                         help="run this watch (with these options) as a service of the controller: a "
                              "LaunchAgent on macOS, a systemd unit on Linux (user unit, or system unit as root); "
                              "again to change it")
    service.add_argument("--uninstall", action="store_true", help="stop and remove that service")


def _hostfile_envs(path: Path, inventory: str) -> list[str]:
    """The environment the last converge's hostfile gives the ranks (none without a hostfile)."""
    try:
        data = json.loads(path.read_text())
        envs = data.get("envs") or []
        if not isinstance(envs, list):
            raise ValueError(f"envs is {type(envs).__name__}, not a list")
    except FileNotFoundError:
        return []
    except (OSError, ValueError, AttributeError, RecursionError) as exc:
        raise ValueError(f"{path}: not a hostfile ({str(exc)[:100]}); rewrite it: "
                         f"{fixes.run_command('hostfile', inventory, cli=True)}") from None
    return [str(e) for e in envs]


def read_records(baseline: watch.Baseline, records: Path) -> None:
    """The last converge's records in the output folder RECORDS into BASELINE: its cables, the Macs the RDMA
    ledger saw ready, the hostfile's environment (the watch, and the check before a run)."""
    try:
        baseline.cables = last_links(records)
        baseline.rdma_ready = list(read_ledger(records / LEDGER_FILE)["nodes"])
        baseline.hostfile_envs = _hostfile_envs(records / HOSTFILE, baseline.inventory)
    except ValueError as exc:
        raise UserError(str(exc)) from None


class Watch:
    def __init__(self, args):
        try:
            settings, hosts = read_inventory(args.inventory, ("mlx_fleet_model",))
        except VerifyError as exc:
            raise UserError(str(exc)) from None
        self.args, self.hosts = args, hosts
        self.records = Path(args.output_dir).resolve() if args.output_dir else settings.output_dir
        self.baseline = watch.Baseline(
            [h.name for h in hosts], models={h.name: h.values["mlx_fleet_model"] for h in hosts},
            bridge=settings.bridge, inventory=" ".join(args.inventory))
        self.read_records()
        self.out = Path(args.out).resolve() if args.out else self.records / "watch"
        self.env = str(Path(settings.python).parent.parent)
        self.script = nodes.read_script(watch.PROBE_READS, None, bounded=watch.BOUNDED_READS,
                                         limit=args.rdma_timeout, files={watch.FINGERPRINT_READ: fingerprint_path(self.env)},
                                         commands=jobs.READ, first=tuple(jobs.READ))
        self.round, self.last_good, left_out = watch_page.read_status(self.out / watch_page.STATUS_FILE)
        for line in left_out:
            print(terminal_text([f"watch: {line}"]), file=sys.stderr, flush=True)
        # --once and a new watch report what is wrong now; later rounds only what changed.
        self.findings: dict[watch.Key, Finding] = {}

    def read_records(self) -> None:
        """The last converge's records, read again each round: a converge while watching moves the baseline."""
        read_records(self.baseline, self.records)

    def probe(self) -> dict[str, dict]:
        timeout = self.args.connect_timeout + self.args.rdma_timeout + 30
        found = nodes.probe([host.ssh for host in self.hosts], self.script, self.args.connect_timeout, timeout)
        return {host: watch.observe(node.reads, self.env) if node.reachable and node.reads
                else watch.unreachable(node.error or "no output") for host, node in found.items()}

    def one_round(self) -> tuple[list[dict], dict[str, dict]]:
        self.read_records()
        macs = self.probe()
        now = time.time()
        stamp = datetime.fromtimestamp(now, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.round += 1
        findings = watch.assess(self.baseline, macs)
        events = watch.changes(self.baseline, self.last_good, macs) + watch.events(self.findings, findings)
        for event in events:
            event.update(time=stamp, round=self.round)
        self.findings = findings
        self.last_good = {**self.last_good, **{h: m for h, m in macs.items() if m.get("up")}}
        links = watch.links_found(self.baseline.hosts, macs)
        status = watch_page.status(self.baseline, macs, links, findings, events, generated=stamp,
                                   round_number=self.round, last_good=self.last_good)
        with interrupt_after():  # the three files are one round: Ctrl-C never leaves them from two rounds
            watch_page.write(self.out, self.baseline, status, links, findings, now,
                             None if self.args.once else self.args.every)
        return events, macs

    def tell(self, events: list[dict]) -> None:
        for event in events:
            print(_said(event), flush=True)
            if self.args.on_change:
                self.hook(event)

    def hook(self, event: dict) -> None:
        # The user's own command line, as a lab's chat hook is written: run by the shell, bounded.
        try:
            result = subprocess.run(self.args.on_change, shell=True, input=json.dumps(event), text=True,
                                    capture_output=True, timeout=HOOK_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"  --on-change: stopped after {HOOK_TIMEOUT} s", file=sys.stderr, flush=True)
            return
        if result.returncode != 0:
            why = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
            print(terminal_text([f"  --on-change failed (exit {result.returncode}): {why}"]), file=sys.stderr, flush=True)


def _said(event: dict) -> str:
    """An event on the terminal: its line, and its fix below; the Macs' text in them cleaned (terminal_text)."""
    label = {"new": event["event"], "cleared": "cleared"}.get(event["state"], event["event"])
    return terminal_text([f"{event['time'][11:19]} {label}: {event['message']}",
                          *([f"  fix: {event['fix']}"] if event["fix"] else [])])


def _state(findings: dict) -> str:
    return f"{len(findings)} finding{'' if len(findings) == 1 else 's'}" if findings else "nothing wrong"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextmanager
def interrupt_after():
    """Hold a Ctrl-C (SIGINT, or SIGTERM from a service manager) until the block is done, then raise it."""
    held: list[int] = []
    previous = {signum: signal.signal(signum, lambda signum, frame: held.append(signum))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if held:
        raise KeyboardInterrupt


def run_watch(args) -> int:
    if args.uninstall:
        return watch_service.uninstall()
    if not args.inventory:
        raise UserError("watch: -i INVENTORY is needed (except with --uninstall)")
    if args.install:
        if args.once:
            raise UserError("watch --install runs the watch every --every seconds; leave out --once")
        Watch(args)  # bad input fails here, not in a service restarting in the background
        return watch_service.install(args)
    run = Watch(args)
    where = f"status: {run.out / watch_page.HTML_FILE}, metrics: {run.out / watch_page.METRICS_FILE}"
    if args.once:
        events, macs = run.one_round()
        run.tell(events)
        down = [h for h, m in macs.items() if not m.get("up")]
        status = EXIT_UNREACHABLE if down else EXIT_ATTENTION if run.findings else EXIT_OK
        print(terminal_text([f"watch: {len(macs)} Macs, {_state(run.findings)} ({where})", {
            EXIT_OK: "result: ok (exit 0)", EXIT_ATTENTION: "result: findings (exit 1)"}.get(
                status, f"result: unreachable: {', '.join(down)} (exit 4)")]))
        return status
    print(terminal_text([f"watching {len(run.hosts)} Macs every {args.every:g} s ({where}); Ctrl-C stops"]),
          flush=True)
    rounds = 0
    signal.signal(signal.SIGTERM, _interrupt)  # a service manager's stop ends it as Ctrl-C does
    try:
        while True:
            started = time.monotonic()
            events, _ = run.one_round()
            rounds += 1
            run.tell(events)
            time.sleep(max(0.0, args.every - (time.monotonic() - started)))
    except KeyboardInterrupt:
        pass
    print(terminal_text([f"watch stopped after {rounds} round{'' if rounds == 1 else 's'}: {_state(run.findings)} now",
                         *(f"  {line}" for line in lines(run.findings.values())), f"({where})"]), flush=True)
    return EXIT_INTERRUPTED

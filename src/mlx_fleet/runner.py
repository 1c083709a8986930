"""Run the collection's playbooks for the CLI through ansible-runner, follow them through the event
stream, and sum them up for a person.

The collection is found where Python imports it from (the wheel installs it as
site-packages/ansible_collections/mlx_fleet/cluster; a clone has collections/ on sys.path), and the
playbooks run by their FQCN (``mlx_fleet.cluster.hostfile``), with the ansible.cfg shipped in this
package unless the user names one in ANSIBLE_CONFIG.
"""

from __future__ import annotations

import getpass
import importlib.util
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mlx_fleet.errors import EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE, Busy, UserError

COLLECTION = "ansible_collections.mlx_fleet.cluster"
PACKAGED_CONFIG = Path(__file__).parent / "ansible.cfg"
KEPT_RUNS = 10


def collections_path() -> str:
    """The folder that holds ansible_collections/mlx_fleet/cluster, as this Python imports it."""
    spec = importlib.util.find_spec(COLLECTION)
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the mlx_fleet.cluster collection is not importable: reinstall mlx-fleet")
    return str(Path(list(spec.submodule_search_locations)[0]).parent.parent.parent)


def default_output_dir(inventory: str) -> Path:
    """Where the playbooks put their outputs by default: .mlx-fleet beside the inventory."""
    path = Path(inventory).resolve()
    return (path if path.is_dir() else path.parent) / ".mlx-fleet"


@dataclass
class RunReport:
    """What a run did, from its events: the CLI's summary is built from this alone."""

    playbook: str
    rc: int = 0
    changed: set[str] = field(default_factory=set)
    failed: dict[str, list[str]] = field(default_factory=dict)
    cluster_failed: list[str] = field(default_factory=list)  # steps run once for the whole cluster
    unreachable: dict[str, str] = field(default_factory=dict)
    results: dict[str, list[dict]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    input_errors: list[str] = field(default_factory=list)
    artifacts: Path | None = None
    seconds: float = 0.0
    check: bool = False  # --check: "changed" means "would change", and nothing was written

    def result(self, action: str) -> dict | None:
        """The last result of a task with this action (e.g. mlx_fleet.cluster.fabric)."""
        found = self.results.get(action)
        return found[-1] if found else None

    @property
    def exit_status(self) -> int:
        if self.input_errors:
            return EXIT_BAD_INPUT
        if self.unreachable:
            return EXIT_UNREACHABLE
        if self.failed or self.cluster_failed or self.rc != 0:
            return EXIT_ATTENTION
        return EXIT_OK


def _first_line(text) -> str:
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def _message(res: dict) -> str:
    msg = res.get("msg") or res.get("stderr") or res.get("module_stderr") or res.get("reason") or ""
    return str(msg).strip()


class Progress:
    """One live line per step on a terminal; plain lines otherwise."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.live = stream.isatty()
        self.task = ""
        self.started: set[str] = set()
        self.done: set[str] = set()
        self.failures = 0
        self.step = 0

    def _line(self) -> str:
        return (f"[{self.step}] {self.task}: {len(self.done)}/{len(self.started) or '?'} Macs"
                + (f", {self.failures} failed so far" if self.failures else ""))

    def _show(self) -> None:
        if self.live:
            self.stream.write("\r\033[K" + self._line()[:150])
            self.stream.flush()

    def _close_step(self) -> None:
        if not self.task:
            return
        if self.live:
            self.stream.write("\r\033[K" + self._line()[:150] + "\n")
        else:
            self.stream.write(self._line() + "\n")
        self.stream.flush()

    def task_start(self, name: str) -> None:
        self._close_step()
        self.step += 1
        self.task, self.started, self.done = name, set(), set()
        self._show()

    def host_start(self, host: str) -> None:
        self.started.add(host)
        self._show()

    def host_done(self, host: str, failed: bool) -> None:
        self.done.add(host)
        self.failures += failed
        self._show()

    def finish(self) -> None:
        self._close_step()
        self.task = ""


class _Events:
    """ansible-runner's event handler: fills the report and drives the progress line."""

    def __init__(self, report: RunReport, progress: Progress | None):
        self.report = report
        self.progress = progress

    def __call__(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host = data.get("host", "")
        action = data.get("task_action", "")
        progress = self.progress
        if kind == "playbook_on_task_start" and progress:
            progress.task_start(data.get("task", "") or action)
        elif kind == "runner_on_start" and progress:
            progress.host_start(host)
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped"):
            res = data.get("res", {}) or {}
            failed = kind == "runner_on_failed" and not data.get("ignore_errors")
            if progress:
                progress.host_done(host, failed or kind == "runner_on_unreachable")
            self._result(kind, host, action, data.get("task", ""), res, failed)
        elif kind == "warning":
            self.report.warnings.append(_first_line(data.get("warning") or event.get("stdout")))
        return True  # keep every event in the artifacts

    def _result(self, kind: str, host: str, action: str, task: str, res: dict, failed: bool) -> None:
        from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.actions import CLUSTER_STEP, INPUT_ERRORS

        report = self.report
        if kind == "runner_on_unreachable":
            report.unreachable.setdefault(host, _first_line(_message(res)) or "unreachable")
            return
        if kind == "runner_on_skipped":
            return
        if kind == "runner_on_ok" and res.get("changed") and not res.get(CLUSTER_STEP):
            report.changed.add(host)  # a Mac that changed; a cluster step changes the controller's files
        if action:
            report.results.setdefault(action, []).append(res)
        report.warnings.extend(_first_line(w) for w in res.get("warnings", []) or [])
        if failed:
            # The checks mark the lines that are bad input (plugin_utils.actions.refusal); a line two
            # Macs share (the same Mac listed twice) is said once.
            bad = res.get(INPUT_ERRORS) or []
            report.input_errors.extend(line for line in bad if line not in report.input_errors)
            message = "\n".join(line for line in _message(res).splitlines() if line not in bad).strip()
            if res.get(CLUSTER_STEP):  # the cluster's failure, not that of the Mac it ran under
                report.cluster_failed.append(f"{task}:\n{message}")
            elif message or not bad:
                report.failed.setdefault(host, []).append(f"{task}: {message}")


@dataclass
class PlaybookOptions:
    """The usual ansible-playbook flags the CLI passes through."""

    extra_vars: list[str] = field(default_factory=list)
    limit: str | None = None
    check: bool = False
    diff: bool = False
    verbosity: int = 0
    ask_become_pass: bool = False
    become_password: str | None = None  # already known (onboard asked for it): handed over, never asked
    # Extra environment for ansible-playbook (os-update: the path of the socket its password comes from)
    environment: dict[str, str] = field(default_factory=dict)


def run_playbook(playbook: str, inventories: list[str], options: PlaybookOptions | None = None, *,
                 extravars: dict | None = None, output_dir: Path | None = None,
                 progress: bool = True) -> RunReport:
    """Run mlx_fleet.cluster.<playbook> against the inventories and report what happened."""
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import runlock

    options = options or PlaybookOptions()
    for inventory in inventories:
        if not Path(inventory).exists():
            raise UserError(f"inventory {inventory} does not exist: give the inventory file or folder with -i")
    output_dir = output_dir or default_output_dir(inventories[0])
    # One run at a time on a cluster's outputs: held for the whole run, shared with its own plugins.
    token = runlock.new_token()
    try:
        with runlock.run_lock(output_dir, f"mlx-fleet running {playbook}", token=token):
            return _run(playbook, inventories, options, extravars, output_dir, progress,
                        {runlock.TOKEN_ENV: token})
    except runlock.LockBusy as exc:
        raise Busy(str(exc)) from None


def _run(playbook: str, inventories: list[str], options: PlaybookOptions, extravars: dict | None, output_dir: Path,
         progress: bool, run_env: dict) -> RunReport:
    import ansible_runner

    artifacts = output_dir / "runs"
    artifacts.mkdir(parents=True, exist_ok=True)
    # ansible-runner starts ansible-playbook by name: the one installed beside this Python.
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    envvars = run_env | options.environment | {"ANSIBLE_COLLECTIONS_PATH": collections_path() + os.pathsep + os.environ.get(
                   "ANSIBLE_COLLECTIONS_PATH", os.path.expanduser("~/.ansible/collections")),
               "PATH": bin_dir + os.pathsep + path if bin_dir not in path.split(os.pathsep) else path}
    if not os.environ.get("ANSIBLE_CONFIG"):
        envvars["ANSIBLE_CONFIG"] = str(PACKAGED_CONFIG)
    if "ANSIBLE_HOST_KEY_CHECKING" not in os.environ:
        envvars["ANSIBLE_HOST_KEY_CHECKING"] = "True"  # ansible-runner turns it off unless told
    cmdline = []
    for value in options.extra_vars:
        cmdline += ["-e", value]
    cmdline += ["--check"] * options.check + ["--diff"] * options.diff
    passwords = {}
    if options.ask_become_pass or options.become_password:
        # Asked here, once, without echo; handed to ansible-playbook's prompt, never written anywhere.
        password = options.become_password or getpass.getpass("BECOME password: ")
        cmdline.append("--ask-become-pass")
        passwords[r"^BECOME password.*:\s*$"] = password
    report = RunReport(playbook=f"mlx_fleet.cluster.{playbook}", artifacts=artifacts, check=options.check)
    watcher = Progress() if progress else None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mlx-fleet-run-") as private:
        result = ansible_runner.run(
            private_data_dir=private,
            artifact_dir=str(artifacts),
            rotate_artifacts=KEPT_RUNS,
            playbook=report.playbook,
            inventory=[str(Path(i).resolve()) for i in inventories],
            extravars=extravars or {},
            limit=options.limit,
            verbosity=options.verbosity or None,
            cmdline=shlex.join(cmdline) or None,
            passwords=passwords or None,
            envvars=envvars,
            project_dir=os.getcwd(),
            event_handler=_Events(report, watcher),
            quiet=True,
        )
    if watcher:
        watcher.finish()
    report.rc = result.rc
    report.artifacts = artifacts / result.config.ident
    report.seconds = time.monotonic() - started
    if result.rc not in (0, 2, 4) and not (report.failed or report.cluster_failed or report.unreachable
                                           or report.input_errors):
        # ansible-playbook itself refused (bad option, syntax, unreadable inventory): its own words.
        stderr = (report.artifacts / "stdout").read_text(errors="replace") if (report.artifacts / "stdout").exists() else ""
        errors = [line.strip() for line in stderr.splitlines() if line.strip().startswith(("ERROR", "[ERROR]"))]
        report.input_errors = errors or [f"ansible-playbook exited {result.rc}; its output: {report.artifacts}/stdout"]
    return report


def print_summary(report: RunReport, stream=sys.stdout, extra: list[str] | None = None) -> int:
    """The lines a person acts on: what failed and where, what changed, where the outputs are."""
    out = []
    for line in report.input_errors:
        out.append(f"error: {line}")
    for host, message in sorted(report.unreachable.items()):
        out.append(f"unreachable: {host}: {message}")
    failures = [f"{host}: {message}" for host, messages in sorted(report.failed.items()) for message in messages]
    for failure in failures + report.cluster_failed:
        first, *more = failure.splitlines()
        out += [f"failed: {first}", *(f"  {line}" for line in more)]
    out += extra or []
    for warning in dict.fromkeys(w for w in report.warnings if w):
        out.append(f"warning: {warning}")
    if report.changed:
        out.append(f"{'would change' if report.check else 'changed'}: {', '.join(sorted(report.changed))}")
    out.append(f"full output: {report.artifacts}/stdout ({report.seconds:.0f} s)")
    status = report.exit_status
    out.append({EXIT_OK: "result: ok", EXIT_ATTENTION: "result: the cluster needs attention (exit 1)",
                EXIT_BAD_INPUT: "result: fix the input above (exit 2)",
                EXIT_UNREACHABLE: "result: some Macs are unreachable (exit 4)"}[status]
               + (" (--check: nothing was changed)" if report.check else ""))
    print("\n".join(out), file=stream)
    return status


def add_playbook_options(parser, inventory_required: bool = True, read_only: bool = False) -> None:
    """The flags every playbook-driven command takes, as ansible-playbook spells them (read-only
    commands take no --check or --diff: they change nothing anyway)."""
    parser.add_argument("-i", "--inventory", action="append", required=inventory_required,
                        help="inventory file or folder (repeatable), as for ansible-playbook")
    parser.add_argument("--output-dir", help="where hostfiles, reports and run logs go "
                                             "(default: .mlx-fleet in the inventory's folder)")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], metavar="VARS",
                        help="extra variables, as for ansible-playbook (key=value, JSON or @file)")
    parser.add_argument("-K", "--ask-become-pass", action="store_true", help="ask for the sudo password once")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more Ansible output in the run log")
    if not read_only:
        parser.add_argument("--check", action="store_true", help="change nothing; say what would change")
        parser.add_argument("--diff", action="store_true", help="show the differences of what changes")
    parser.add_argument("--limit", help="only these hosts (ansible --limit pattern), where the command allows it")


def options_from(args, command: str, needs_every_mac: bool) -> PlaybookOptions:
    if args.limit and needs_every_mac:
        raise UserError(f"--limit cannot apply to `mlx-fleet {command}`: it needs every Mac's facts "
                        "(the fabric is built from all of them); run it without --limit")
    return PlaybookOptions(extra_vars=args.extra_vars, limit=args.limit, check=getattr(args, "check", False),
                           diff=getattr(args, "diff", False),
                           verbosity=args.verbose, ask_become_pass=args.ask_become_pass)


def output_dir_from(args) -> Path:
    return Path(args.output_dir).resolve() if args.output_dir else default_output_dir(args.inventory[0])


def output_extravars(args) -> dict:
    return {"mlx_fleet_output_dir": str(Path(args.output_dir).resolve())} if args.output_dir else {}

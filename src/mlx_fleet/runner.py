"""Run the collection's playbooks for the CLI through ansible-runner, follow them through the event
stream, and sum them up for a person.

The collection is found where Python imports it from (the wheel installs it as
site-packages/ansible_collections/mlx_fleet/cluster; a clone has collections/ on sys.path), and the
playbooks run by their FQCN (``mlx_fleet.cluster.hostfile``), with the ansible.cfg shipped in this
package unless the user names one in ANSIBLE_CONFIG.
"""

from __future__ import annotations

import copy
import getpass
import importlib.util
import json
import os
import re
import secrets
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import OUTPUT_DIR_NAME
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.content import terminal_text
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import json_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fixes import CLI_VAR
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.summary import (ARGUMENT_CHECK, CLUSTER_STEP, CONTROLLER,
                                                                             RunOutcome, first_line)
from mlx_fleet import interrupt
from mlx_fleet.errors import (EXIT_ATTENTION, EXIT_BAD_INPUT, EXIT_OK, EXIT_UNREACHABLE, Busy, Interrupted,
                              UserError)

COLLECTION = "ansible_collections.mlx_fleet.cluster"
PACKAGED_CONFIG = Path(__file__).parent / "ansible.cfg"
KEPT_RUNS = 10
_RUN_IDENT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # ansible-runner's uuid4
# The environment variables mlx-fleet sets for ansible-playbook that runs/<id>/command keeps, so that a
# person can rerun the command; no other variable of the controller's environment is ever written there.
RECORDED_ENV = ("ANSIBLE_CONFIG", "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_HOST_KEY_CHECKING")
# A Mac's own sudo password (onboarding's new Mac) reaches ansible-playbook as a host variable encrypted
# with a key made for the run, which ansible-playbook asks for on its terminal: nothing readable at rest.
VAULT_ID = "mlx_fleet_run"


def ansible_config() -> str:
    """The ansible.cfg a run uses: the user's ANSIBLE_CONFIG, else the one shipped in this package."""
    return os.environ.get("ANSIBLE_CONFIG") or str(PACKAGED_CONFIG)


def collections_path() -> str:
    """The folder that holds ansible_collections/mlx_fleet/cluster, as this Python imports it."""
    spec = importlib.util.find_spec(COLLECTION)
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the mlx_fleet.cluster collection is not importable: reinstall mlx-fleet")
    return str(Path(list(spec.submodule_search_locations)[0]).parent.parent.parent)


def default_output_dir(inventory: str) -> Path:
    """Where the playbooks put their outputs by default: OUTPUT_DIR_NAME beside the inventory."""
    path = Path(inventory).resolve()
    return (path if path.is_dir() else path.parent) / OUTPUT_DIR_NAME


@dataclass
class RunReport(RunOutcome):
    """What a run did, from its events (plugin_utils.summary.RunOutcome), and what the CLI adds to it."""

    playbook: str = ""
    in_flight: set[str] = field(default_factory=set)  # Macs with a task started and not yet done
    artifacts: Path | None = None
    seconds: float = 0.0
    diff: bool = False  # --diff: each change's differences are printed as they come

    @property
    def exit_status(self) -> int:
        if self.input_errors:
            return EXIT_BAD_INPUT
        if self.unreachable:
            return EXIT_UNREACHABLE
        if not self.clean:
            return EXIT_ATTENTION
        return EXIT_OK


class Progress:
    """One live line per step on a terminal; plain lines otherwise. A step run on the controller (the
    inventory check, a step run once for the whole cluster) says so instead of counting Macs."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.live = stream.isatty()
        self.task = ""
        self.started: set[str] = set()
        self.done: set[str] = set()
        self.controller = False
        self.failures = 0
        self.step = 0

    def _line(self) -> str:
        if self.controller:
            where = "on the controller"
        elif not self.done and len(self.started) <= 1:
            where = "..."  # one host so far: a Mac, or the controller under a Mac's name
        else:
            where = f"{len(self.done)}/{len(self.started)} Macs"
        return f"[{self.step}] {self.task}: {where}" + (f", {self.failures} failed so far" if self.failures else "")

    def _show(self) -> None:
        if self.live and self.task:
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

    def task_start(self, name: str | None) -> None:
        """A new step; None: a step not shown (a role checking its variables)."""
        self._close_step()
        self.task, self.started, self.done, self.controller = name or "", set(), set(), False
        if name:
            self.step += 1
            self._show()

    def host_start(self, host: str) -> None:
        self.started.add(host)
        self.controller = self.controller or host == CONTROLLER
        self._show()

    def host_done(self, host: str, failed: bool, controller: bool = False) -> None:
        self.done.add(host)
        self.controller = self.controller or controller or host == CONTROLLER
        self.failures += failed
        self._show()

    def aside(self, text: str, stream) -> None:
        """Print TEXT on STREAM (another one, or the same) without mixing it into the live line."""
        if self.live and self.task:
            self.stream.write("\r\033[K")
            self.stream.flush()
        stream.write(text)
        stream.flush()
        self._show()

    def finish(self) -> None:
        self._close_step()
        self.task = ""


def render_diff(host: str, task: str, res: dict) -> str:
    """A changed result's differences as ansible-playbook --diff prints them, under the Mac and the step
    (a loop's items each under their label); "" when there are none."""
    from ansible.plugins.callback import CallbackBase

    items = res.get("results") if isinstance(res.get("results"), list) else [res]
    out = []
    for item in items:
        if not (isinstance(item, dict) and item.get("diff") and item.get("changed")):
            continue
        text = CallbackBase()._get_diff(copy.deepcopy(item["diff"]))  # it serializes mappings in place
        if text:
            label = item.get("_ansible_item_label", item.get("item")) if item is not res else None
            out.append(f"{host}: {task}" + (f" ({label})" if label is not None else "") + "\n" + text)
    return "".join(out)


class _Events:
    """ansible-runner's event handler: fills the report and drives the progress line."""

    def __init__(self, report: RunReport, progress: Progress | None, diff_stream=None):
        self.report = report
        self.progress = progress
        self.diff_stream = diff_stream or sys.stdout  # where --diff prints, as ansible-playbook does

    def __call__(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data", {})
        host = data.get("host", "")
        action = data.get("task_action", "")
        progress = self.progress
        if kind == "runner_on_start":
            self.report.in_flight.add(host)
        elif kind.startswith("runner_on_"):
            self.report.in_flight.discard(host)
        if kind == "playbook_on_task_start" and progress:
            progress.task_start(None if action == ARGUMENT_CHECK else data.get("task", "") or action)
        elif kind == "runner_on_start" and progress:
            progress.host_start(host)
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable", "runner_on_skipped"):
            res = data.get("res", {}) or {}
            failed = kind == "runner_on_failed" and not data.get("ignore_errors")
            if progress:
                progress.host_done(host, failed or kind == "runner_on_unreachable", bool(res.get(CLUSTER_STEP)))
            self.report.record(kind, host, action, data.get("task", ""), res, failed)
            if kind == "runner_on_ok" and self.report.diff:
                self._diff(render_diff(host, data.get("task", "") or action, res))
        elif kind == "warning":
            self.report.warn(first_line(data.get("warning") or event.get("stdout")))
        return True  # keep every event in the artifacts

    def _diff(self, text: str) -> None:
        if not text:
            return
        if self.progress:
            self.progress.aside(text, self.diff_stream)
        else:
            self.diff_stream.write(text)
            self.diff_stream.flush()

@dataclass
class PlaybookOptions:
    """The usual ansible-playbook flags the CLI passes through."""

    extra_vars: list[str] = field(default_factory=list)
    limit: str | None = None
    check: bool = False
    diff: bool = False
    verbosity: int = 0
    read_only: bool = False  # a command that changes no Mac (audit, record)
    ask_become_pass: bool = False
    become_password: str | None = None  # -K's answer when already asked (onboard asks once for its runs)
    # Per Mac, a sudo password other than -K's (onboarding's new Mac: its admin password). Memory only.
    host_become_passwords: dict[str, str] = field(default_factory=dict)
    # Extra environment for ansible-playbook (os-update: the path of the socket its password comes from)
    environment: dict[str, str] = field(default_factory=dict)


def run_playbook(playbook: str, inventories: list[str], options: PlaybookOptions | None = None, *,
                 extravars: dict | None = None, output_dir: Path | None = None,
                 progress: bool = True) -> RunReport:
    """Run mlx_fleet.cluster.<playbook> against the inventories and report what happened."""
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import runlock
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import UnsafeFolder

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
    except UnsafeFolder as exc:
        raise UserError(str(exc)) from None


def _run(playbook: str, inventories: list[str], options: PlaybookOptions, extravars: dict | None, output_dir: Path,
         progress: bool, run_env: dict) -> RunReport:
    import ansible_runner

    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import private_folder

    artifacts = private_folder(output_dir / "runs", follow=False)
    # ansible-runner starts ansible-playbook by name: the one installed beside this Python.
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    envvars = run_env | options.environment | {"ANSIBLE_COLLECTIONS_PATH": collections_path() + os.pathsep + os.environ.get(
                   "ANSIBLE_COLLECTIONS_PATH", os.path.expanduser("~/.ansible/collections")),
               "PATH": bin_dir + os.pathsep + path if bin_dir not in path.split(os.pathsep) else path}
    envvars["ANSIBLE_CONFIG"] = ansible_config()
    if "ANSIBLE_HOST_KEY_CHECKING" not in os.environ:
        envvars["ANSIBLE_HOST_KEY_CHECKING"] = "True"  # ansible-runner turns it off unless told
    cmdline = []
    for value in options.extra_vars:
        cmdline += ["-e", value]
    cmdline += ["--check"] * options.check + ["--diff"] * options.diff
    # Passwords stay in this process: ansible-runner answers ansible-playbook's prompts on its terminal
    # (suppress_env_files: it writes none of them, nor the extra variables, into its private folder).
    passwords = {}
    become = options.become_password or (getpass.getpass("BECOME password: ") if options.ask_become_pass else None)
    if become:
        cmdline.append("--ask-become-pass")
        passwords[r"^BECOME password.*:\s*$"] = become
    report = RunReport(playbook=f"mlx_fleet.cluster.{playbook}", artifacts=artifacts, check=options.check,
                       diff=options.diff)
    watcher = Progress() if progress else None
    events = _Events(report, watcher)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mlx-fleet-run-") as private:
        inventory = [str(Path(i).resolve()) for i in inventories]
        if options.host_become_passwords:
            key = secrets.token_urlsafe(32)
            inventory.append(_vaulted_inventory(Path(private), options.host_become_passwords, key))
            cmdline += ["--vault-id", f"{VAULT_ID}@prompt"]
            passwords[rf"^Vault password \({VAULT_ID}\):\s*$"] = key
        # ansible-runner asks cancel_callback whenever it stops waiting on the playbook's output: every
        # second rather than its default 5, so an interrupt is acted on at once.
        (Path(private) / "env").mkdir()
        (Path(private) / "env" / "settings").write_text(json.dumps({"pexpect_timeout": 1}))
        # Once interrupted, the terminal may be gone (SIGHUP): the progress line stops.
        with interrupt.Stopper(on_signal=lambda: setattr(events, "progress", None)) as stopper:
            try:
                result = ansible_runner.run(
                    private_data_dir=private,
                    artifact_dir=str(artifacts),
                    playbook=report.playbook,
                    inventory=inventory,
                    # The fixes the playbooks print name mlx-fleet's commands (plugin_utils.fixes).
                    extravars={CLI_VAR: True, **(extravars or {})},
                    limit=options.limit,
                    verbosity=options.verbosity or None,
                    cmdline=shlex.join(cmdline) or None,
                    passwords=passwords or None,
                    envvars=envvars,
                    project_dir=os.getcwd(),
                    event_handler=events,
                    status_handler=lambda data, runner_config: _record_command(data, runner_config, envvars, private),
                    cancel_callback=stopper.cancel,
                    suppress_env_files=True,
                    quiet=True,
                )
            except BaseException:
                stopper.stop()  # no playbook process outlives the CLI, whatever went wrong
                if stopper.signal is None:
                    raise
            if stopper.signal is not None:
                stopper.stop()
                try:
                    if watcher:
                        watcher.finish()
                except OSError:
                    pass  # the terminal is gone
                raise Interrupted(_interrupted(report, options.read_only))
    if watcher:
        watcher.finish()
    rotate_runs(artifacts)
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


def rotate_runs(artifacts: Path, keep: int = KEPT_RUNS) -> None:
    """Keep the newest `keep` runs in artifacts. Only what ansible-runner made is removed: folders named
    by a run's ident (a UUID), never a symlink, a file or a folder of another name put there."""
    runs = []
    for entry in os.scandir(artifacts):
        if _RUN_IDENT.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            runs.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
    for _, path in sorted(runs)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def _vaulted_inventory(folder: Path, host_passwords: dict[str, str], key: str) -> str:
    """An inventory source giving these Macs their ansible_become_password, encrypted with key."""
    from ansible.parsing.vault import VaultLib, VaultSecret

    secret = VaultSecret(key.encode())
    vault = VaultLib([(VAULT_ID, secret)])
    lines = ["all:", "  hosts:"]
    for host, password in host_passwords.items():
        blob = vault.encrypt(password, secret, VAULT_ID).decode()
        lines += [f"    {json.dumps(host)}:", "      ansible_become_password: !vault |",
                  *(f"        {line}" for line in blob.splitlines())]
    path = folder / "become.yml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def command_record(command: list[str], cwd: str, env: dict[str, str], private: str) -> dict:
    """What runs/<id>/command keeps: the ansible-playbook command line (its program by full path, found on
    env's PATH; without the run's own temporary inventory and vault prompt) and, of env, the variables
    RECORDED_ENV names."""
    argv, kept = list(command), []
    while argv:
        arg = argv.pop(0)
        if arg == "-i" and argv and argv[0].startswith(private + os.sep):
            argv.pop(0)
        elif arg == "--vault-id" and argv and argv[0] == f"{VAULT_ID}@prompt":
            argv.pop(0)
        else:
            kept.append(arg)
    if kept:
        kept[0] = shutil.which(kept[0], path=env.get("PATH")) or kept[0]
    return {"command": kept, "cwd": cwd, "env": {k: env[k] for k in RECORDED_ENV if k in env}}


def _record_command(data: dict, runner_config, envvars: dict, private: str) -> None:
    """ansible-runner writes the command with the controller's whole environment (it has no switch for
    that): as soon as it has, before ansible-playbook starts, replace it with the record a person needs
    to rerun it. No secret of mlx-fleet's is in that environment; the user's own stay there for
    milliseconds, in a 0600 file."""
    if data.get("status") != "running":
        return
    record = command_record(runner_config.command, runner_config.cwd, envvars, private)
    atomic_write_text(Path(runner_config.artifact_dir) / "command", json_text(record), mode=0o600)


def _interrupted(report: RunReport, read_only: bool = False) -> str:
    """The line an interrupted run ends with: which Macs may be mid-change."""
    if report.check:
        return "interrupted (--check: nothing was changed)"
    if read_only:
        return "interrupted (this command changes no Mac)"
    macs = sorted(report.changed | report.in_flight)
    if not macs:
        return "interrupted before any Mac was changed"
    return f"interrupted: {', '.join(macs)} may be mid-change; the next converge repairs them"


def print_summary(report: RunReport, stream=sys.stdout, extra: list[str] | None = None) -> int:
    """The lines a person acts on: what failed and where, what changed (plugin_utils.summary), where the
    outputs are, the exit status."""
    out = report.lines(extra)
    out.append(f"full output: {report.artifacts}/stdout ({report.seconds:.0f} s)")
    status = report.exit_status
    out.append({EXIT_OK: "result: ok", EXIT_ATTENTION: "result: the cluster needs attention (exit 1)",
                EXIT_BAD_INPUT: "result: fix the input above (exit 2)",
                EXIT_UNREACHABLE: "result: some Macs are unreachable (exit 4)"}[status]
               + (" (--check: nothing was changed)" if report.check else ""))
    print(terminal_text(out), file=stream)
    return status


def add_playbook_options(parser, inventory_required: bool = True, read_only: bool = False) -> None:
    """The flags every playbook-driven command takes, as ansible-playbook spells them (read-only
    commands take no --check or --diff: they change nothing anyway)."""
    parser.add_argument("-i", "--inventory", action="append", required=inventory_required,
                        help="inventory file or folder (repeatable), as for ansible-playbook")
    parser.add_argument("--output-dir", help="where hostfiles, reports and run logs go "
                                             f"(default: {OUTPUT_DIR_NAME} in the inventory's folder)")
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
                           verbosity=args.verbose, ask_become_pass=args.ask_become_pass,
                           read_only=not hasattr(args, "check"))


def output_dir_from(args) -> Path:
    return Path(args.output_dir).resolve() if args.output_dir else default_output_dir(args.inventory[0])


def output_extravars(args) -> dict:
    return {"mlx_fleet_output_dir": str(Path(args.output_dir).resolve())} if args.output_dir else {}

"""Running one of the collection's playbooks through ansible-runner: the run lock, the passwords on its
terminal, the interrupt, the kept runs."""

from __future__ import annotations

import getpass
import json
import os
import re
import secrets
import shlex
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import json_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.fixes import CLI_VAR

from mlx_fleet import interrupt
from mlx_fleet.errors import Busy, Interrupted, UserError
from mlx_fleet.runner.config import (
    RECORDED_ENV,
    VAULT_ID,
    PlaybookOptions,
    ansible_config,
    collections_path,
    default_output_dir,
)
from mlx_fleet.runner.events import EventHandler, RunReport
from mlx_fleet.runner.progress import Progress

KEPT_RUNS = 10
_RUN_IDENT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # ansible-runner's uuid4


def run_playbook(playbook: str, inventories: list[str], options: PlaybookOptions | None = None, *,
                 extravars: dict | None = None, output_dir: Path | None = None,
                 progress: bool | Progress = True) -> RunReport:
    """Run mlx_fleet.cluster.<playbook> against the inventories and report what happened. PROGRESS: the live line
    (a Progress the caller also feeds, True for one of its own, False for none)."""
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage import runlock
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import UnsafeFolder

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
         progress: bool | Progress, run_env: dict) -> RunReport:
    import ansible_runner
    from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import private_folder

    artifacts = private_folder(output_dir / "runs", follow=False)
    envvars = _playbook_environment(options, run_env)
    cmdline, passwords = _command_line(options)
    report = RunReport(playbook=f"mlx_fleet.cluster.{playbook}", artifacts=artifacts, check=options.check,
                       diff=options.diff)
    watcher = progress if isinstance(progress, Progress) else Progress() if progress else None
    events = EventHandler(report, watcher)
    started = time.monotonic()
    # The runs before the last KEPT_RUNS - 1 (this one makes KEPT_RUNS) are removed while the playbook runs: a
    # run's hundred event files take the disk a while, which the run's end need not wait for.
    rotation = rotate_runs(artifacts, KEPT_RUNS - 1)
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
                    # The fixes the playbooks print name mlx-fleet's commands (plugin_utils.base.fixes).
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
                raise Interrupted(interrupted_line(report, options.read_only))
    if watcher:
        watcher.finish()
    rotation.join()
    report.rc = result.rc
    report.artifacts = artifacts / result.config.ident
    report.seconds = time.monotonic() - started
    if result.rc not in (0, 2, 4) and not (report.failed or report.cluster_failed or report.unreachable
                                           or report.input_errors):
        report.input_errors = _playbook_refusal(report.artifacts, result.rc)
    return report


def _playbook_environment(options: PlaybookOptions, run_env: dict) -> dict:
    """ansible-playbook's environment: this install's collection and config, host keys checked."""
    # ansible-runner starts ansible-playbook by name: the one installed beside this Python.
    bin_dir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    envvars = run_env | options.environment | {"ANSIBLE_COLLECTIONS_PATH": collections_path() + os.pathsep + os.environ.get(
                   "ANSIBLE_COLLECTIONS_PATH", os.path.expanduser("~/.ansible/collections")),
               "PATH": bin_dir + os.pathsep + path if bin_dir not in path.split(os.pathsep) else path}
    envvars["ANSIBLE_CONFIG"] = ansible_config()
    if "ANSIBLE_HOST_KEY_CHECKING" not in os.environ:
        envvars["ANSIBLE_HOST_KEY_CHECKING"] = "True"  # ansible-runner turns it off unless told
    return envvars


def _command_line(options: PlaybookOptions) -> tuple[list[str], dict]:
    """ansible-playbook's options, and the answers to its password prompts."""
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
    return cmdline, passwords


def _playbook_refusal(artifacts: Path, rc: int) -> list[str]:
    """ansible-playbook itself refused (bad option, syntax, unreadable inventory): its own words."""
    stdout = artifacts / "stdout"
    stderr = stdout.read_text(errors="replace") if stdout.exists() else ""
    errors = [line.strip() for line in stderr.splitlines() if line.strip().startswith(("ERROR", "[ERROR]"))]
    return errors or [f"ansible-playbook exited {rc}; its output: {stdout}"]


def rotate_runs(artifacts: Path, keep: int = KEPT_RUNS) -> threading.Thread:
    """Keep the newest `keep` runs in artifacts: the older ones, listed now, are removed by the thread returned
    (started; join it). Only what ansible-runner made is removed: folders named by a run's ident (a UUID), never
    a symlink, a file or a folder of another name put there."""
    runs = []
    for entry in os.scandir(artifacts):
        if _RUN_IDENT.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
            runs.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
    old = [path for _, path in sorted(runs)[:-keep]]
    remover = threading.Thread(target=lambda: [shutil.rmtree(path, ignore_errors=True) for path in old], daemon=True)
    remover.start()
    return remover


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


def mid_change(report: RunReport, read_only: bool = False) -> list[str]:
    """The Macs an interrupted run may have left mid-change: none under --check or for a command that changes none."""
    return [] if report.check or read_only else sorted(report.changed | report.in_flight)


def interrupted_line(report: RunReport, read_only: bool = False) -> str:
    """The line an interrupted run ends with: which Macs may be mid-change."""
    if report.check:
        return "interrupted (--check: nothing was changed)"
    if read_only:
        return "interrupted (this command changes no Mac)"
    macs = mid_change(report)
    if not macs:
        return "interrupted before any Mac was changed"
    return f"interrupted: {', '.join(macs)} may be mid-change; the next converge repairs them"

"""Secrets and interrupts on the controller: what a run keeps on disk, the password file's mode, the
process tree an interrupted run leaves (none)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mlx_fleet import cli, interrupt, onboard, runner
from mlx_fleet.runner import config as runner_config, events as runner_events, run as runner_run
from mlx_fleet.errors import EXIT_BAD_INPUT, UserError

SECRET = "hunter2-at-rest-7c1f"  # the -K password of these tests
HOST_SECRET = "new-mac-admin-9b2e"  # a Mac's own sudo password (onboarding)


def test_the_command_record_keeps_only_what_reruns_it():
    env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "ANSIBLE_BECOME_PASS": SECRET, "GITHUB_TOKEN": "ghp_x",
           "AWS_SECRET_ACCESS_KEY": "k", "MLX_FLEET_RUN_TOKEN": "t0ken", "ANSIBLE_CONFIG": "/c/ansible.cfg",
           "ANSIBLE_COLLECTIONS_PATH": "/c", "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_STDOUT_CALLBACK": "awx_display"}
    command = ["sh", "-i", "/inv/hosts.yml", "-i", "/tmp/run-x/become.yml", "--ask-become-pass",
               "--vault-id", f"{runner_config.VAULT_ID}@prompt", "mlx_fleet.cluster.site"]
    record = runner_run.command_record(command, "/work", env, "/tmp/run-x")
    assert record == {"command": ["/usr/bin/sh", "-i", "/inv/hosts.yml", "--ask-become-pass", "mlx_fleet.cluster.site"],
                      "cwd": "/work", "env": {"ANSIBLE_CONFIG": "/c/ansible.cfg", "ANSIBLE_COLLECTIONS_PATH": "/c",
                                              "ANSIBLE_HOST_KEY_CHECKING": "True"}}


@pytest.fixture
def kept_private(monkeypatch, tmp_path):
    """The runs' private folders, kept after the run for inspection (they are removed otherwise)."""
    made = []

    class Kept:
        def __init__(self, prefix=None, **_):
            self.path = tmp_path / f"{prefix}{len(made)}"

        def __enter__(self):
            self.path.mkdir(mode=0o700)
            made.append(self.path)
            return str(self.path)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(runner_run.tempfile, "TemporaryDirectory", Kept)
    return made


def _files_with(secret: str, *folders: Path) -> list[str]:
    return [str(p) for folder in folders for p in folder.rglob("*")
            if p.is_file() and secret.encode() in p.read_bytes()]


def test_passwords_reach_ansible_playbook_and_no_file(tmp_path, kept_private, monkeypatch):
    """A real run: the -K password and a Mac's own sudo password are answered on ansible-playbook's
    terminal; neither, nor any foreign environment variable, is in the private folder or runs/."""
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text("all:\n  children:\n    mlx_cluster:\n      hosts: {}\n")
    monkeypatch.setenv("SOME_TOKEN", "tok-" + SECRET)
    options = runner.PlaybookOptions(become_password=SECRET, host_become_passwords={"new-mac": HOST_SECRET})
    report = runner.run_playbook("checklist", [str(inventory)], options, output_dir=tmp_path / "out", progress=False)
    stdout = (report.artifacts / "stdout").read_text()
    assert "BECOME password" in stdout  # both asked
    (private,) = kept_private
    for secret in (SECRET, HOST_SECRET):
        assert _files_with(secret, private, tmp_path / "out") == []
    record = json.loads((report.artifacts / "command").read_text())
    assert set(record["env"]) <= set(runner_config.RECORDED_ENV) and "SOME_TOKEN" not in json.dumps(record)


def test_a_password_file_others_can_read_is_refused(tmp_path, capsys):
    secret = tmp_path / "pw"
    secret.write_text("secret\n")
    secret.chmod(0o644)
    with pytest.raises(UserError, match=rf"has mode 0644, so other accounts can read it: run `chmod 600 {secret}`"):
        onboard.check_password_file(str(secret))
    secret.chmod(0o640)
    with pytest.raises(UserError, match="mode 0640"):
        onboard.check_password_file(str(secret))
    # Through the CLI: exit 2, one line, before any contact with the Mac (the address reaches nothing).
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    mlx_cluster:\n      hosts: {}\n")
    status = cli.main(["onboard", "-i", str(inventory), "new-mac", "--address", "192.0.2.1", "--password-file", str(secret)])
    err = capsys.readouterr().err
    assert status == EXIT_BAD_INPUT and err.count("\n") == 1 and "chmod 600" in err, err
    secret.chmod(0o600)
    onboard.check_password_file(str(secret))


# A stand-in for ansible-playbook: forks two workers that setsid (as ansible's do) and ignore SIGINT,
# and forwards nothing: the worst case, where only killing the workers' own groups stops them.
STUBBORN = textwrap.dedent("""
    import os, signal, sys, time
    started, told = os.pipe()
    for _ in range(2):
        if os.fork() == 0:
            os.setsid()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            os.write(told, b"x")  # in its own session now
            time.sleep(300)
            os._exit(0)
    got = b""
    while len(got) < 2:  # both workers are in their own session before "ready"
        got += os.read(started, 2 - len(got))
    print("ready", flush=True)
    signal.signal(signal.SIGINT, lambda *a: sys.exit(99))  # the playbook itself stops
    time.sleep(300)
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupt_leaves_no_process_of_the_playbooks_tree(signum):
    before = signal.getsignal(signum)
    with interrupt.Stopper(grace=1.0) as stopper:
        playbook = subprocess.Popen([sys.executable, "-c", STUBBORN], start_new_session=True, stdout=subprocess.PIPE,
                                    text=True)
        assert playbook.stdout.readline() == "ready\n"
        table = interrupt.processes()
        workers = interrupt.descendants(playbook.pid, table)
        assert len(workers) == 2 and all(group == pid for pid, group in workers.items())  # their own groups
        os.kill(os.getpid(), signum)  # as Ctrl-C, `kill` or a closing terminal would
        assert stopper.signal == signum
        assert playbook.wait(timeout=10) == 99  # it got SIGINT, as from a terminal
        stopper.stop()
    left = interrupt.processes()
    assert not [pid for pid in workers if pid in left]
    assert signal.getsignal(signum) == before  # the handlers are put back


def test_the_interrupted_line_names_the_macs_that_may_be_mid_change():
    report = runner.RunReport(playbook="mlx_fleet.cluster.site")
    assert runner_run.mid_change(report) == [] and "mini-" not in runner_run.interrupted_line(report)
    events = runner_events.EventHandler(report, None)
    for event in ({"event": "runner_on_start", "event_data": {"host": "mini-2"}},
                  {"event": "runner_on_start", "event_data": {"host": "mini-3"}},
                  {"event": "runner_on_ok", "event_data": {"host": "mini-3", "res": {}}},
                  {"event": "runner_on_ok", "event_data": {"host": "mini-1", "res": {"changed": True}}}):
        events(event)
    assert runner_run.mid_change(report) == ["mini-1", "mini-2"]  # changed, or started and not done
    assert "mini-1, mini-2" in runner_run.interrupted_line(report)
    assert runner_run.mid_change(report, read_only=True) == []
    assert "mini-" not in runner_run.interrupted_line(report, read_only=True)
    report.check = True
    assert runner_run.mid_change(report) == [] and "--check" in runner_run.interrupted_line(report)


def test_sigterm_outside_a_run_unwinds_as_ctrl_c(tmp_path):
    """SIGTERM while no playbook runs (onboarding between steps): exit 130, one line, no traceback."""
    script = ("import os, signal, sys\n"
              "from mlx_fleet import cli\n"
              "cli._dispatch = lambda args, argv: os.kill(os.getpid(), signal.SIGTERM)\n"
              "sys.exit(cli.main(['checklist', '-i', 'x']))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (130, "mlx-fleet checklist: interrupted\n")

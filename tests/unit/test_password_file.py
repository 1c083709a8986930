"""--password-file and the password's way to the Macs in mlx-fleet os-update: refused (exit 2, no Mac touched)
when another account could read it or when the run's pipelining is off."""

from __future__ import annotations

import os

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import secret_socket
from mlx_fleet import cli, onboard, runner
from mlx_fleet.errors import EXIT_BAD_INPUT, UserError

INVENTORY = """all:
  children:
    mlx_cluster:
      hosts:
        studio-1: {ansible_host: 192.0.2.1}
        studio-2: {ansible_host: 192.0.2.2%s}
"""


class Ran(Exception):
    """The playbook would have run: the Macs would have been touched."""


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """(inventory, password file, the playbook runs asked for); the playbook is never really run."""
    runs = []

    def run_playbook(playbook, inventories, options, **kwargs):
        runs.append((playbook, dict(options.environment)))
        raise Ran(playbook)

    monkeypatch.setattr(runner, "run_playbook", run_playbook)
    monkeypatch.delenv("ANSIBLE_PIPELINING", raising=False)
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(INVENTORY % "")
    secret = tmp_path / "pw"
    secret.write_text("owner-pw\n")
    secret.chmod(0o600)
    return inventory, secret, runs


def _os_update(inventory, secret, capsys) -> tuple[int, str]:
    status = cli.main(["os-update", "-i", str(inventory), "--password-file", str(secret)])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_password_file_others_can_read_is_refused_before_any_mac(setup, capsys, mode):
    inventory, secret, runs = setup
    secret.chmod(mode)
    status, err = _os_update(inventory, secret, capsys)
    assert (status, runs) == (EXIT_BAD_INPUT, [])
    assert err.count("\n") == 1 and str(secret) in err and f"{mode:04o}" in err, err


def test_a_symbolic_link_or_a_fifo_is_refused_and_the_file_itself_is_read(setup, tmp_path, capsys):
    inventory, secret, runs = setup
    link = tmp_path / "link"
    link.symlink_to(secret)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    for path in (link, fifo):
        status, err = _os_update(inventory, path, capsys)
        assert (status, runs) == (EXIT_BAD_INPUT, []) and str(path) in err, err
    with pytest.raises(Ran):
        _os_update(inventory, secret, capsys)
    (playbook, environment), = runs
    assert playbook == "os_update" and set(environment) == {secret_socket.SECRET_SOCKET_ENV}


def test_onboarding_reads_the_password_file_the_same_way(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("admin-pw\nignored\n")
    secret.chmod(0o600)
    assert onboard.read_password(str(secret), "", "the admin password") == "admin-pw"
    secret.chmod(0o644)
    with pytest.raises(UserError, match="mode 0644"):
        onboard.read_password(str(secret), "", "the admin password")


@pytest.mark.parametrize("how", ["environment", "inventory", "kept files"])
def test_pipelining_off_is_refused_before_any_mac(setup, capsys, monkeypatch, how):
    inventory, secret, runs = setup
    if how == "environment":
        monkeypatch.setenv("ANSIBLE_PIPELINING", "0")
    elif how == "kept files":  # piped, but the module's file is kept on the Mac all the same
        monkeypatch.setenv("ANSIBLE_KEEP_REMOTE_FILES", "1")
    else:
        inventory.write_text(INVENTORY % ", ansible_pipelining: false")
    status, err = _os_update(inventory, secret, capsys)
    assert (status, runs) == (EXIT_BAD_INPUT, [])
    assert err.count("\n") == 1 and "pipelining" in err, err
    named = err.split(":")[1]
    assert "studio-2" in named and ("studio-1" in named) == (how != "inventory"), err

"""plugin_utils.base.ssh_target: the one ssh argv built from the inventory, for every ssh outside Ansible."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ssh_target import SshTarget
from mlx_fleet import onboard, onboard_ssh
from mlx_fleet.errors import UserError
from mlx_fleet.verify import nodes


def test_the_inventory_s_connection_variables_become_ssh_s_options_in_ansible_s_order():
    target = SshTarget.from_inventory("studio-1", {
        "ansible_host": "10.0.0.11", "ansible_user": "admin", "ansible_port": 2222,
        "ansible_ssh_private_key_file": "~/.ssh/fleet", "ansible_host_key_checking": False,
        "ansible_ssh_common_args": "-F '/etc/my ssh/config' -o HostKeyAlias=studio-1",
        "ansible_ssh_extra_args": "-o UserKnownHostsFile=/etc/fleet_known_hosts"}.get)
    assert target.argv("-o", "BatchMode=yes", command="true") == [
        "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-l", "admin", "-p", "2222",
        "-i", "~/.ssh/fleet", "-F", "/etc/my ssh/config", "-o", "HostKeyAlias=studio-1",
        "-o", "UserKnownHostsFile=/etc/fleet_known_hosts", "--", "10.0.0.11", "true"]


def test_a_bare_name_is_plain_ssh_with_host_key_checking_left_on():
    target = SshTarget.from_inventory("studio-1", {"ansible_ssh_host_key_checking": "yes"}.get)
    assert target == SshTarget("studio-1", "studio-1")
    assert target.argv() == ["ssh", "--", "studio-1"]


def test_a_port_that_is_not_a_number_is_a_value_error():
    with pytest.raises(ValueError):
        SshTarget.from_inventory("studio-1", {"ansible_port": "twenty-two"}.get)


def test_verify_and_the_watch_put_their_own_options_before_the_inventory_s():
    target = SshTarget("studio-1", "10.0.0.11", user="admin", port=2222)
    argv = nodes.ssh_argv(target, "echo hi", ("-o", "ServerAliveCountMax=2"), connect_timeout=5)
    assert argv == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "ServerAliveCountMax=2",
                    "-l", "admin", "-p", "2222", "--", "10.0.0.11", "/bin/sh -c 'echo hi'"]


def test_within_shared_connections_every_ssh_goes_over_one_connection_per_mac_in_a_private_folder():
    target = SshTarget("studio-1", "10.0.0.11", user="admin")
    with nodes.shared_connections():
        argv = nodes.ssh_argv(target, "true")
        option = {argv[i + 1].split("=", 1)[0]: argv[i + 1].split("=", 1)[1] for i, word in enumerate(argv)
                  if word == "-o"}
        folder = Path(option["ControlPath"]).parent
        assert option["ControlMaster"] == "auto" and option["ControlPath"].endswith("/%C")
        assert folder.stat().st_mode & 0o777 == 0o700 and folder.stat().st_uid == os.getuid()
    assert not folder.exists()
    assert "ControlMaster=auto" not in nodes.ssh_argv(target, "true")  # outside: a connection of its own


def test_mlx_launch_s_plain_ssh_goes_over_the_shared_connection_and_makes_none_of_its_own():
    assert nodes.launcher_env() is None  # outside: the launcher's ssh is the user's, untouched
    with nodes.shared_connections():
        env = nodes.launcher_env()
        argv = nodes.ssh_argv(SshTarget("studio-1", "10.0.0.11", user="admin"), "true")
        sockets = Path(next(w for w in argv if w.startswith("ControlPath=")).split("=", 1)[1]).parent
        ssh = shutil.which("ssh", path=env["PATH"])
        assert Path(ssh).is_relative_to(sockets) and Path(ssh).stat().st_mode & 0o777 == 0o700
        # What `ssh HOST` run by mlx.launch resolves to (-G: the configuration, no connection): a session on the
        # socket of the Mac's shared connection, never a connection left behind as another's master.
        config = subprocess.run([ssh, "-G", "studio-1"], env=env, capture_output=True, text=True, check=True).stdout
        option = dict(line.split(" ", 1) for line in config.splitlines())
        assert option["controlmaster"] == "false" and Path(option["controlpath"]).parent == sockets
    assert not Path(ssh).exists()


def test_onboarding_reaches_the_new_mac_on_the_inventory_s_port_with_its_key(tmp_path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "fleet")], check=True)
    (tmp_path / "ssh_config").write_text(f"UserKnownHostsFile {tmp_path / 'known'}\n")
    view = {"ansible_user": "ops", "ansible_port": "2222", "ansible_ssh_private_key_file": str(tmp_path / "fleet"),
            "ansible_ssh_common_args": f"-F {tmp_path / 'ssh_config'}"}
    args = onboard.inventory_ssh_args("studio-4", view)
    assert "-l" not in args  # the user is onboarding's own (--user, else the inventory's)
    target = onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args)
    assert (target.port, target.identity, target.user) == (2222, tmp_path / "fleet", "admin")
    assert target.known_hosts_names == ["[10.0.0.14]:2222", "[studio-4]:2222"]


def test_onboarding_refuses_a_port_that_is_not_a_number_in_one_line():
    with pytest.raises(UserError):
        onboard.inventory_ssh_args("studio-4", {"ansible_port": "ssh"})


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_killed_run_s_socket_folder_is_removed_by_the_next_and_no_one_else_s(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has any longer
    stale = tmp_path / f"mlx-fleet-ssh-{gone.pid}-abc"
    (stale / "bin").mkdir(parents=True, mode=0o700)
    (stale / "bin" / "ssh").write_text("#!/bin/sh\n")
    alive = tmp_path / f"mlx-fleet-ssh-{os.getppid()}-def"  # a process still running: its connections may serve it
    alive.mkdir(mode=0o700)
    others = tmp_path / f"mlx-fleet-ssh-{gone.pid}-ghi"  # not this user's
    others.mkdir(mode=0o700)
    os.chown(others, 65534, 65534)
    link = tmp_path / f"mlx-fleet-ssh-{gone.pid}-jkl"  # a link: never followed, never removed
    link.symlink_to(alive)
    with nodes.shared_connections():
        assert not stale.exists()
    assert alive.is_dir() and others.is_dir() and link.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (alive, others, link))

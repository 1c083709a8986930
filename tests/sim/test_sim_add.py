"""sim add: a new Mac, fresh from Setup Assistant, powered on in a running cluster."""

from __future__ import annotations

import os
import re
import stat
import subprocess

import pytest
import yaml

from simlib import Sim

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def sim():
    cluster = Sim(nodes=2, topology="line")
    yield cluster
    cluster.down()


def _password_ssh(sim, tmp_path, node: str, command: str) -> subprocess.CompletedProcess:
    """ssh as a person would the first time: the Mac's scanned host key, the admin password typed in."""
    address = sim.state()["nodes"][node]["management_ip"]
    known = tmp_path / "known_hosts"
    if not known.exists():
        known.write_text(subprocess.run(["ssh-keyscan", "-t", "ed25519", address], capture_output=True,
                                        text=True, timeout=30).stdout)
    askpass = tmp_path / "askpass"
    askpass.write_text(f"#!/bin/sh\ncat {sim.dir / 'nodes' / node / 'admin-password'}\n")
    askpass.chmod(0o700)
    env = dict(os.environ, SSH_ASKPASS=str(askpass), SSH_ASKPASS_REQUIRE="force")
    return subprocess.run(["ssh", "-F", str(sim.dir / "ssh_config"), "-o", f"UserKnownHostsFile={known}",
                           "-o", "PubkeyAuthentication=no", node, command],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def test_a_new_mac_is_unknown_to_the_controller_and_takes_only_its_password(sim, tmp_path):
    added = sim.cli("add", "mini-9")
    assert added.stderr == ""  # no warning: nothing else on this machine answers to mini-9
    out = added.stdout
    fingerprint = re.search(r"host key: (SHA256:\S+)", out).group(1)
    password_file = sim.dir / "nodes" / "mini-9" / "admin-password"
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    password = password_file.read_text().strip()
    assert password and password != (sim.dir / "admin_password").read_text().strip()

    inventory = yaml.safe_load((sim.dir / "inventory.yml").read_text())
    assert list(inventory["all"]["children"]["mlx_cluster"]["hosts"]) == ["mini-1", "mini-2"]
    address = sim.state()["nodes"]["mini-9"]["management_ip"]
    assert address not in (sim.dir / "known_hosts").read_text()
    refused = sim.ssh("mini-9", "true", check=False, own_config=True)
    assert refused.returncode == 255 and "Host key verification failed" in refused.stderr
    keyed = subprocess.run(["ssh", "-F", str(sim.dir / "ssh_config"), "-o", "BatchMode=yes",
                            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "mini-9", "true"],
                           capture_output=True, text=True)
    assert keyed.returncode == 255 and "Permission denied (publickey,password)" in keyed.stderr

    first = _password_ssh(sim, tmp_path, "mini-9", "id -un; scutil --get ComputerName; hostname; rdma_ctl status; "
                                                    "test -e ~/.ssh/authorized_keys || echo no-keys")
    assert first.stdout.split("\n")[:5] == ["admin", "admin's Mac mini", "admins-Mac-mini.local", "disabled", "no-keys"]
    scanned = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp_path / "known_hosts")], capture_output=True, text=True)
    assert fingerprint in scanned.stdout

    sudo = _password_ssh(sim, tmp_path, "mini-9", f"sudo -n true; echo {password} | sudo -S -p '' id -u")
    assert "a password is required" in sudo.stderr and sudo.stdout == "0\n"

    bridge = _password_ssh(sim, tmp_path, "mini-9", "ifconfig bridge0").stdout
    assert re.findall(r"member: (\S+)", bridge) == ["en2", "en3", "en4"] and "status: inactive" in bridge
    sim.cli("plug", "mini-9:1", "mini-1:2")
    assert "status: active" in _password_ssh(sim, tmp_path, "mini-9", "ifconfig bridge0").stdout


def test_add_refuses_a_name_the_cluster_has(sim):
    taken = sim.cli("add", "mini-1", check=False)
    assert taken.returncode == 2 and taken.stderr.count("\n") == 1 and "already a node" in taken.stderr

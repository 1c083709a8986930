"""Trust and access helpers of mlx-fleet onboard (mlx_fleet.onboard_ssh), against OpenSSH's own tools."""

from __future__ import annotations

import os
import pwd
import re
import subprocess
from pathlib import Path

import pytest

from mlx_fleet import onboard_ssh
from mlx_fleet.errors import UserError


@pytest.fixture
def keys(tmp_path):
    """A host key and a client key, as ssh-keygen makes them."""
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name)], check=True)
    return tmp_path


def _config(tmp_path, body: str) -> list[str]:
    path = tmp_path / "ssh_config"
    path.write_text(body)
    return ["-F", str(path)]


def test_the_fingerprint_is_the_one_ssh_keygen_prints(keys):
    blob = (keys / "host.pub").read_text().split()[1]
    printed = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(keys / "host.pub")],
                             capture_output=True, text=True, check=True).stdout.split()[1]
    assert onboard_ssh.fingerprint(blob) == printed


def test_a_name_the_ssh_config_sends_to_the_address_needs_no_ansible_host(keys):
    args = _config(keys, f"Host studio-4\n  HostName 10.0.0.14\n  IdentityFile {keys / 'client'}\n"
                         f"  UserKnownHostsFile {keys / 'known'}\n")
    target = onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args)
    assert (target.host, target.hostname, target.port) == ("studio-4", "10.0.0.14", 22)
    assert not target.needs_ansible_host
    assert target.known_hosts == keys / "known" and target.identity == keys / "client"
    assert target.known_hosts_names == ["10.0.0.14", "studio-4"]


def test_otherwise_the_address_is_used_and_the_defaults_are_ssh_s(keys):
    args = _config(keys, f"Port 2222\nIdentityFile {keys / 'nothing'}\nIdentityFile {keys / 'client'}\n")
    target = onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args)
    assert target.needs_ansible_host and target.host == "10.0.0.14"
    assert target.known_hosts == Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ssh" / "known_hosts"
    assert target.identity == keys / "client"  # the first key with a .pub beside it
    assert target.known_hosts_names == ["[10.0.0.14]:2222", "[studio-4]:2222"]
    assert onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args, identity=str(keys / "host")).identity == keys / "host"
    with pytest.raises(UserError, match="no public key"):
        onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args, identity=str(keys / "nothing"))


def test_no_key_at_all_is_one_line_saying_how_to_make_one(keys):
    with pytest.raises(UserError, match="ssh-keygen -t ed25519"):
        onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", _config(keys, f"IdentityFile {keys / 'nothing'}\n"))


@pytest.mark.parametrize("hashed", [False, True])
def test_a_recorded_key_is_found_by_ssh_keygen_and_the_file_keeps_its_mode(keys, hashed):
    known = keys / "known"
    known.write_text("other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBh8PVQdJ2Rt8niEfci779wpnR62ehGFNfuwKcXcgmME")
    known.chmod(0o644)
    args = _config(keys, f"Host studio-4\n  HostName 10.0.0.14\n  IdentityFile {keys / 'client'}\n"
                         f"  UserKnownHostsFile {known}\n  HashKnownHosts {'yes' if hashed else 'no'}\n")
    target = onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args)
    blob = (keys / "host.pub").read_text().split()[1]
    assert onboard_ssh.known_keys(target) == []
    onboard_ssh.record_host_key(target, blob)
    assert onboard_ssh.known_keys(target) == [f"ssh-ed25519 {blob}"]
    assert known.stat().st_mode & 0o777 == 0o644
    lines = known.read_text().splitlines()
    assert lines[0].startswith("other.example ") and len(lines) == (3 if hashed else 2)
    assert ("10.0.0.14" in known.read_text()) is not hashed


def test_a_mac_that_does_not_answer_is_one_line_within_the_scan_timeout(keys, monkeypatch):
    monkeypatch.setattr(onboard_ssh, "SCAN_TIMEOUT", 1)
    args = _config(keys, f"IdentityFile {keys / 'client'}\n")
    target = onboard_ssh.resolve("studio-4", "127.0.0.1", "admin", args + ["-p", "9"])
    with pytest.raises(UserError, match="no SSH answer from 127.0.0.1 port 9 within 1 s"):
        onboard_ssh.scan_host_key(target)


def test_a_known_hosts_that_is_not_a_file_is_refused(keys):
    args = _config(keys, f"IdentityFile {keys / 'client'}\nUserKnownHostsFile /dev/null\n")
    with pytest.raises(UserError, match="/dev/null is not a known_hosts file"):
        onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args)


def test_the_sudoers_drop_in_has_a_name_sudo_reads_for_every_user_name():
    # sudo skips a sudoers.d file whose name contains a dot or ends in ~ (sudoers(5), #includedir)
    names = ["admin", "john.doe", "john_doe", "john_2edoe", "j.d_", "a-b"]
    paths = [onboard_ssh.dropin_path(n) for n in names]
    for path in paths:
        name = Path(path).name
        assert Path(path).parent == Path(onboard_ssh.SUDOERS_DIR)
        assert "." not in name and not name.endswith("~") and "/" not in name, name
    assert len(set(paths)) == len(names)  # two users never share (and overwrite) one drop-in
    assert onboard_ssh.dropin_path("admin") == "/etc/sudoers.d/mlx-fleet-admin"  # as before: found again


def _known_target(keys, known: Path):
    args = _config(keys, f"Host studio-4\n  HostName 10.0.0.14\n  IdentityFile {keys / 'client'}\n"
                         f"  UserKnownHostsFile {known}\n")
    return onboard_ssh.resolve("studio-4", "10.0.0.14", "admin", args)


def test_the_key_is_appended_to_known_hosts_as_ssh_does_through_its_symlink(keys):
    real = keys / "dotfiles" / "known_hosts"
    real.parent.mkdir()
    real.write_text("other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBh8PVQdJ2Rt8niEfci779wpnR62ehGFNfuwKcXcgmME")
    link = keys / "known"
    link.symlink_to(real)
    inode = real.stat().st_ino
    blob = (keys / "host.pub").read_text().split()[1]
    onboard_ssh.record_host_key(_known_target(keys, link), blob)
    assert link.is_symlink() and real.stat().st_ino == inode  # appended in place, not a new file renamed over it
    assert real.read_text().splitlines()[1] == f"10.0.0.14,studio-4 ssh-ed25519 {blob}"


def test_a_key_of_another_type_known_for_the_mac_is_refused_like_a_changed_key(keys, monkeypatch, capsys):
    from mlx_fleet import onboard

    ecdsa = keys / "ecdsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", str(ecdsa)], check=True)
    known = keys / "known"
    known.write_text(f"10.0.0.14 {' '.join((keys / 'ecdsa.pub').read_text().split()[:2])}\n")
    target = _known_target(keys, known)
    blob = (keys / "host.pub").read_text().split()[1]
    monkeypatch.setattr(onboard_ssh, "scan_host_key", lambda t: blob)
    fingerprint = onboard_ssh.fingerprint(blob)
    with pytest.raises(UserError, match=rf"holds another host key for 10.0.0.14 \(ecdsa-sha2-nistp256\); the Mac "
                                        rf"now shows {re.escape(fingerprint)}"):
        onboard._trust(target, fingerprint)
    known.write_text(f"@revoked 10.0.0.14 ssh-ed25519 {blob}\n")
    with pytest.raises(UserError, match="as revoked"):
        onboard._trust(target, fingerprint)
    known.write_text(f"10.0.0.14 ssh-ed25519 {blob}\n")
    assert onboard._trust(target, None) == (blob, True)


def test_the_password_session_answers_only_the_macs_own_prompt_once(keys, monkeypatch):
    """A ProxyJump bastion's prompt (and a host-key question) gets nothing; the Mac's prompt its password, once."""
    target = onboard_ssh.Target("studio-4", "10.0.0.14", "admin", ["-J", "jump@bastion.lab"], "10.0.0.14", "10.0.0.14",
                                22, keys / "known", keys / "client", False)
    real_run = subprocess.run
    answers = {}

    def ssh(argv, env, **kwargs):
        for prompt in ("jump@bastion.lab's password: ", "Are you sure you want to continue connecting "
                       "(yes/no/[fingerprint])? ", "admin@10.0.0.14's password: ", "(admin@10.0.0.14) Password:"):
            asked = real_run([env["SSH_ASKPASS"], prompt], env=env, capture_output=True, text=True, timeout=30)
            answers[prompt] = asked.stdout
        return subprocess.CompletedProcess(argv, 0, stdout="key: added\n", stderr="")

    monkeypatch.setattr(onboard_ssh.subprocess, "run", ssh)
    access = onboard_ssh.install_access(target, "AAAA", "admin-pw", passwordless_sudo=False)
    assert access.key == "added"
    assert list(answers.values()) == ["", "", "admin-pw\n", ""]

"""The password's socket (plugin_utils.base.secret_socket): bounded answers, this account's processes only, and for
ssh's askpass only the Mac's own password prompt, once."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import secret_socket

SECRET = "owner-pw-Zq8"
OTHER_UID = 502  # the sim's student account's uid; any uid not ours will do


def test_the_socket_answers_as_many_times_as_it_was_told_then_is_gone():
    with secret_socket.serve_secret(SECRET, 2) as env:
        assert [secret_socket.fetch_secret(env) for _ in range(2)] == [SECRET, SECRET]
        with pytest.raises(secret_socket.SecretUnavailable):
            secret_socket.fetch_secret(env)
        assert not Path(env[secret_socket.SECRET_SOCKET_ENV]).exists()
    assert secret_socket.fetch_secret({}) is None  # a run without the socket: the variable's password


def _fetch_as(uid: int, env: dict) -> bytes:
    """What a forked child that dropped to UID gets from the socket ("refused" when nothing)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgid(uid)
            os.setuid(uid)
            got = secret_socket.fetch_secret(env).encode()
        except BaseException:  # noqa: BLE001 - any failure is "nothing given"
            got = b"refused"
        os.write(write, got)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        got = pipe.read()
    os.waitpid(pid, 0)
    return got


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
def test_another_accounts_process_gets_nothing_even_where_it_can_reach_the_socket():
    with secret_socket.serve_secret(SECRET, 1) as env:
        path = Path(env[secret_socket.SECRET_SOCKET_ENV])
        # As if the private folder had leaked: only the peer check stands between the other account and the secret.
        path.parent.chmod(0o711)
        path.chmod(0o777)
        assert _fetch_as(OTHER_UID, env) == b"refused"
        assert _fetch_as(os.geteuid(), env) == SECRET.encode()  # the refusal used no answer up


def _ask(env: dict, prompt: str) -> subprocess.CompletedProcess:
    """The askpass helper as ssh runs it: the prompt as its argument, its answer on stdout."""
    return subprocess.run([env["SSH_ASKPASS"], prompt], env=dict(os.environ, **env), capture_output=True, text=True,
                          timeout=30, check=False)


@pytest.mark.parametrize("prompt", ["admin@10.0.0.5's password: ", "(admin@10.0.0.5) Password:"])
def test_the_askpass_answers_the_macs_own_prompt_once(prompt):
    with secret_socket.askpass(SECRET, "admin", ["10.0.0.5"]) as env:
        first, second = _ask(env, prompt), _ask(env, prompt)
    assert (first.returncode, first.stdout) == (0, SECRET + "\n")
    assert (second.returncode, second.stdout) == (1, "")


@pytest.mark.parametrize("prompt", [
    "admin@bastion.lab's password: ",  # a ProxyJump bastion's login
    "(jump@10.0.0.5) Password:",  # another user
    "admin@10.0.0.50's password: ",  # another host
    "Are you sure you want to continue connecting (yes/no/[fingerprint])? ",  # a host-key question
    "Enter passphrase for key '/root/.ssh/id_ed25519': ",
    "",
])
def test_the_askpass_refuses_any_other_prompt_and_still_answers_the_macs(prompt):
    with secret_socket.askpass(SECRET, "admin", ["10.0.0.5"]) as env:
        other = _ask(env, prompt)
        own = _ask(env, "admin@10.0.0.5's password: ")
    assert (other.returncode, other.stdout) == (1, "")
    assert own.stdout == SECRET + "\n"


def test_the_prompt_names_the_host_the_ssh_config_resolves_to(tmp_path):
    """An inventory name the ssh config sends to an address: ssh's prompt names the address (or a HostKeyAlias)."""
    config = tmp_path / "ssh_config"
    config.write_text("Host ou-1\n  HostName 10.9.0.1\nHost ou-2\n  HostName 10.9.0.2\n  HostKeyAlias ou-2.lab\n")
    ssh = ["ssh", "-F", str(config), "-l", "admin"]
    assert secret_socket.prompt_login(ssh + ["ou-1"]) == ("admin", ["10.9.0.1"])
    assert secret_socket.prompt_login(ssh + ["ou-2"]) == ("admin", ["ou-2.lab"])

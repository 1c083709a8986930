# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""A password from the CLI to whoever needs it in the run (an action, ssh's askpass), never on disk, in argv or
in a log: a Unix socket in a private folder, open while the run lasts.

The socket answers a bounded number of times (the run's legitimate consumers, counted by its opener), only
processes of the controller's own account (the peer's uid from the kernel: SO_PEERCRED, getpeereid), and, for
ssh's askpass, only the password prompt of the expected user at the expected host."""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

SECRET_SOCKET_ENV = "MLX_FLEET_SECRET_SOCKET"
REQUEST_LIMIT = 4096  # bytes of a request (ssh's prompt) read at most


class SecretUnavailable(RuntimeError):
    """The socket gave no secret: its answers were used up, or this process may not have one; one line."""


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket, as the kernel says; None where unknown."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid_t pid; uid_t uid; gid_t gid}
        return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    if sys.platform == "darwin":  # getpeereid(3) reads LOCAL_PEERCRED: struct xucred {u_int cr_version; uid_t cr_uid; ..}
        sol_local, local_peercred = getattr(socket, "SOL_LOCAL", 0), getattr(socket, "LOCAL_PEERCRED", 1)
        return struct.unpack_from("2I", conn.getsockopt(sol_local, local_peercred, 76))[1]
    return None


def ssh_password_prompt(prompt: str, user: str, hosts: list[str]) -> bool:
    """Whether PROMPT is OpenSSH's own password prompt for USER at one of HOSTS (the HostName ssh connects to,
    or its HostKeyAlias). OpenSSH's wordings (sshconnect2.c): password authentication asks
    "%.30s@%.128s's password: " (userauth_passwd); keyboard-interactive (OpenSSH 8.4 on) shows the server's
    prompt as "(%s@%s) %s" (input_userauth_info_req), macOS's PAM prompt being "Password:". Anything else (a
    ProxyJump bastion's prompt, a host-key question "Are you sure you want to continue connecting") is not."""
    said = prompt.strip()
    return any(said in (f"{user}@{host}'s password:", f"({user}@{host}) Password:") for host in hosts)


class serve_secret:
    """While open, hand `secret` to a process of this account that connects to a Unix socket in a private (0700)
    folder, `answers` times at most; the socket's path goes to ansible-playbook in SECRET_SOCKET_ENV. A request
    is empty (fetch_secret), or with `login` (user, [host names]) ssh's prompt that must name them
    (ssh_password_prompt). Once its answers are given the socket is gone. It holds no data on disk."""

    def __init__(self, secret: str, answers: int, login: tuple[str, list[str]] | None = None):
        self.secret = secret
        self.answers = answers
        self.login = login
        self.answered = 0

    def _grants(self, conn: socket.socket) -> bool:
        if peer_uid(conn) != os.geteuid():
            return False
        conn.settimeout(10)
        request = b""
        while len(request) < REQUEST_LIMIT:
            chunk = conn.recv(REQUEST_LIMIT)
            if not chunk:
                break
            request += chunk
        if self.login is None:
            return request == b""
        return ssh_password_prompt(request.decode(errors="replace"), *self.login)

    def _serve(self) -> None:
        while self.answered < self.answers:
            try:
                conn = self._sock.accept()[0]
            except socket.timeout:
                continue  # a look every second whether the run is over (closing does not wake accept on Linux)
            except OSError:
                return
            with conn:
                try:
                    if self._grants(conn):
                        self.answered += 1
                        conn.sendall(self.secret.encode())
                except OSError:
                    pass  # the peer went away: nothing given
        self._close()

    def _close(self) -> None:
        Path(self._path).unlink(missing_ok=True)
        self._sock.close()

    def __enter__(self) -> dict:
        import tempfile

        self._dir = tempfile.TemporaryDirectory(prefix="mlx-fleet-secret-")
        self._path = str(Path(self._dir.name) / "s")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self._path)
        self._sock.listen(8)
        self._sock.settimeout(1)
        threading.Thread(target=self._serve, daemon=True).start()
        return {SECRET_SOCKET_ENV: self._path}

    def __exit__(self, *exc) -> None:
        self._sock.close()  # ends the accept of _serve
        self._dir.cleanup()


def _ask(path: str, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def fetch_secret(environ) -> str | None:
    """The secret of the run's socket (SECRET_SOCKET_ENV); None when the run has none; SecretUnavailable when
    the socket gives none (it answers each of the run's consumers once)."""
    path = environ.get(SECRET_SOCKET_ENV)
    if not path:
        return None
    why = ("mlx-fleet's password socket gave no password: it answers each Mac of the run once, and only the "
           "controller's own account; run mlx-fleet os-update again")
    try:
        secret = _ask(path, b"")
    except OSError as exc:
        raise SecretUnavailable(f"{why} ({exc.strerror or exc})") from None
    if not secret:
        raise SecretUnavailable(why)
    return secret.decode()


_ASKPASS = """#!{python}
# SSH_ASKPASS for one password login: ssh gives its prompt as argv[1]; mlx-fleet's socket answers only the
# Mac's own password prompt, once. The password is never in this file.
import os, socket, sys
data = b""
try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(os.environ["{env}"])
        sock.sendall(" ".join(sys.argv[1:]).encode())
        sock.shutdown(socket.SHUT_WR)
        while chunk := sock.recv(4096):
            data += chunk
except OSError:
    pass
if not data:
    sys.exit(1)
sys.stdout.write(data.decode() + "\\n")
"""


@contextmanager
def askpass(password: str, user: str, hosts: list[str]):
    """The environment that makes ssh ask this password of SSH_ASKPASS: answered once, and only to the password
    prompt of USER at HOSTS (ssh_password_prompt)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mlx-fleet-askpass-") as tmp, \
            serve_secret(password, 1, (user, hosts)) as secret_env:
        helper = Path(tmp) / "askpass"
        helper.write_text(_ASKPASS.format(python=sys.executable, env=SECRET_SOCKET_ENV))
        helper.chmod(0o700)
        yield dict(secret_env, SSH_ASKPASS=str(helper), SSH_ASKPASS_REQUIRE="force",
                   DISPLAY=os.environ.get("DISPLAY", ":0"))  # OpenSSH before 8.4 wants one to use askpass at all


def password_methods(message: str) -> bool:
    """An SSH refusal whose methods include a password ("Permission denied (publickey,password)"): a Mac at the
    FileVault login window that can be unlocked over SSH (macOS 26, apple_ssh_and_filevault(7))."""
    import re

    methods = re.search(r"Permission denied \(([^)]*)\)", message)
    return bool(methods and "password" in methods.group(1).split(","))


def prompt_login(ssh_argv: list[str]) -> tuple[str, list[str]]:
    """(user, [host]) as ssh's password prompt will name them for this ssh command line, as `ssh -G` resolves
    it: the HostKeyAlias, else the HostName the ssh config gives (sshconnect2.c: host_key_alias, else
    authctxt->host)."""
    import subprocess

    done = subprocess.run(ssh_argv[:1] + ["-G"] + ssh_argv[1:], capture_output=True, text=True, timeout=10,
                          stdin=subprocess.DEVNULL, check=False)
    config = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    return config.get("user", ""), [config.get("hostkeyalias") or config.get("hostname", "")]


def unlock_over_ssh(ssh_argv: list[str], password: str, timeout: float = 60) -> tuple[bool, str]:
    """One password login (no session) to unlock a FileVault-locked Mac; (it worked, ssh's last words). SSH_ARGV
    ends with the host. The password reaches ssh through SSH_ASKPASS reading a private socket: never argv, a
    file or the environment, and only for that Mac's own prompt."""
    import subprocess

    with askpass(password, *prompt_login(ssh_argv)) as secret_env:
        env = dict(os.environ, **secret_env)
        argv = ssh_argv[:1] + ["-o", "PreferredAuthentications=password,keyboard-interactive",
                               "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1",
                               "-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "BatchMode=no"] + ssh_argv[1:]
        try:
            done = subprocess.run(argv + ["true"], env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, "ssh timed out"
    last = (done.stderr.strip().splitlines() or [""])[-1]
    # The Mac drops the connection while it mounts the data volume: that is success too.
    return done.returncode == 0 or "Permission denied" not in done.stderr, last


def pipelining_off(view, config_file: str, hosts: list[str]) -> list[str]:
    """The HOSTS (of an inventory_view.InventoryView) whose effective `pipelining` is off for a run with this
    ansible.cfg and the controller's environment (ANSIBLE_PIPELINING, the inventory's ansible_pipelining): a
    module's arguments, a password among them, would sit in an AnsiballZ file on the Mac."""
    from ansible import constants
    from ansible.config.manager import ConfigManager
    from ansible.plugins.loader import connection_loader

    config = ConfigManager(str(Path(config_file).resolve()))
    if config.get_config_value("DEFAULT_KEEP_REMOTE_FILES"):  # ANSIBLE_KEEP_REMOTE_FILES: the files stay, piped or not
        return list(hosts)
    off = []
    for host in hosts:
        variables = view.variables(host)
        plugin = str(view.template(variables.get("ansible_connection", "ssh"), variables))
        plugin = "ssh" if plugin == "smart" else plugin
        # As ConnectionBase.is_pipelining_enabled decides; loading the plugin puts its options in ansible's config.
        pipes = getattr(connection_loader.get(plugin, class_only=True), "has_pipelining", False)
        options = constants.config.get_configuration_definitions("connection", plugin)
        config.initialize_plugin_configuration_definitions("connection", plugin, options)
        wanted = {entry["name"] for entry in options.get("pipelining", {}).get("vars", [])}
        own = {k: view.template(v, variables) for k, v in variables.items() if k in wanted}
        if not (pipes and "pipelining" in options and config.get_config_value(
                "pipelining", plugin_type="connection", plugin_name=plugin, variables=own)):
            off.append(host)
    return off

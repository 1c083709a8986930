# -*- coding: utf-8 -*-
# Copyright: mlx-fleet contributors
# Apache License 2.0
"""A password from the CLI to whoever needs it in the run (an action, ssh's askpass), never on disk, in argv or
in a log: a Unix socket in a private folder, open while the run lasts."""

from __future__ import annotations

from pathlib import Path

SECRET_SOCKET_ENV = "MLX_FLEET_SECRET_SOCKET"


class serve_secret:
    """While open, hand `secret` to whoever connects to a Unix socket in a private (0700) folder; the
    socket's path goes to ansible-playbook in SECRET_SOCKET_ENV. The socket holds no data on disk."""

    def __init__(self, secret: str):
        self.secret = secret

    def __enter__(self) -> dict:
        import socket
        import tempfile
        import threading

        self._dir = tempfile.TemporaryDirectory(prefix="mlx-fleet-secret-")
        path = str(Path(self._dir.name) / "s")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(path)
        self._sock.listen(8)

        def serve():
            while True:
                try:
                    conn = self._sock.accept()[0]
                except OSError:
                    return
                with conn:
                    conn.sendall(self.secret.encode())

        threading.Thread(target=serve, daemon=True).start()
        return {SECRET_SOCKET_ENV: path}

    def __exit__(self, *exc) -> None:
        self._sock.close()
        self._dir.cleanup()


_ASKPASS = """#!{python}
# SSH_ASKPASS for one password login: the password comes from mlx-fleet's socket, never from this file.
import os, socket, sys
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(os.environ["{env}"])
data = b""
while True:
    chunk = sock.recv(4096)
    if not chunk:
        break
    data += chunk
sys.stdout.write(data.decode() + "\\n")
"""


def password_methods(message: str) -> bool:
    """An SSH refusal whose methods include a password ("Permission denied (publickey,password)"): a Mac at the
    FileVault login window that can be unlocked over SSH (macOS 26, apple_ssh_and_filevault(7))."""
    import re

    methods = re.search(r"Permission denied \(([^)]*)\)", message)
    return bool(methods and "password" in methods.group(1).split(","))


def unlock_over_ssh(ssh_argv: list[str], password: str, timeout: float = 60) -> tuple[bool, str]:
    """One password login (no session) to unlock a FileVault-locked Mac; (it worked, ssh's last words).
    The password reaches ssh through SSH_ASKPASS reading a private socket: never argv, a file or the environment."""
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mlx-fleet-askpass-") as tmp, serve_secret(password) as secret_env:
        helper = Path(tmp) / "askpass"
        helper.write_text(_ASKPASS.format(python=sys.executable, env=SECRET_SOCKET_ENV))
        helper.chmod(0o700)
        env = dict(os.environ, **secret_env, SSH_ASKPASS=str(helper), SSH_ASKPASS_REQUIRE="force",
                   DISPLAY=os.environ.get("DISPLAY", ":0"))
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


def fetch_secret(environ) -> str | None:
    import socket

    path = environ.get(SECRET_SOCKET_ENV)
    if not path:
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                return b"".join(chunks).decode()
            chunks.append(chunk)

"""Trust and access for a new Mac, before Ansible can reach it (mlx-fleet onboard, steps 1 and 2).

Trust: the Mac's ed25519 host key is scanned, its SHA256 fingerprint confirmed (given on the command
line or typed yes to), and only then recorded in the known_hosts file the inventory's SSH uses.
Access: one SSH session with the admin password installs the controller's public key in the admin's
authorized_keys and, when asked, a sudoers drop-in checked with ``visudo -cf``; from then on only the
key is used. The password travels through a private socket to an askpass helper (OpenSSH's
SSH_ASKPASS; plugin_utils.base.secret_socket.askpass: once, to the Mac's own prompt), and to ``sudo -S`` on the
session's standard input: never in an argument, a file or a log.

Which files: ``ssh -G`` with the inventory's SSH arguments (``ansible_ssh_common_args``,
``ansible_ssh_extra_args``) says what ssh, and so Ansible, will use for the Mac: its address, port,
known_hosts file (the first ``UserKnownHostsFile``) and identity (the first ``IdentityFile`` with a
``.pub`` beside it); ``--known-hosts`` and ``--identity`` override them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import secret_socket
from mlx_fleet.errors import UserError

KEY_TYPE = "ssh-ed25519"
SCAN_TIMEOUT = 10  # seconds for ssh-keyscan to get an answer
SESSION_TIMEOUT = 60  # seconds for the password session as a whole
SUDOERS_DIR = "/etc/sudoers.d"
_USER_RE = re.compile(r"[a-z_][a-z0-9_.-]*")


@dataclass
class Target:
    """How ssh reaches the new Mac, as the inventory reaches the others."""

    name: str  # the inventory name
    address: str  # --address
    user: str
    ssh_args: list[str]  # the inventory's extra ssh arguments
    host: str  # what ssh is given: the name when the ssh config already sends it to the address
    hostname: str  # where ssh connects (ssh -G hostname)
    port: int
    known_hosts: Path
    identity: Path  # the private key; its .pub is installed
    hash_known_hosts: bool

    @property
    def needs_ansible_host(self) -> bool:
        """Whether the inventory must say ansible_host: ADDRESS (the name alone does not reach it)."""
        return self.host != self.name

    @property
    def known_hosts_names(self) -> list[str]:
        """The host names a known_hosts line gets: ssh looks up the address it connects to."""
        names = [self.hostname, self.name]
        if self.port != 22:
            names = [f"[{n}]:{self.port}" for n in names]
        return list(dict.fromkeys(names))


def _ssh_config(host: str, user: str, ssh_args: list[str]) -> dict[str, list[str]]:
    try:
        out = subprocess.run(["ssh", "-G", *ssh_args, "-l", user, host], capture_output=True, text=True,
                             timeout=10, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise UserError("ssh is not installed on this controller: install OpenSSH's client") from exc
    if out.returncode != 0:
        raise UserError(f"ssh -G {host} with the inventory's ansible_ssh_common_args failed: "
                        f"{(out.stderr.strip().splitlines() or ['no message'])[-1]}")
    config: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        config.setdefault(key.lower(), []).append(value)
    return config


def _ssh_path(text: str) -> Path:
    """A path as ssh reads it: ~ is the account's home directory (not $HOME)."""
    if text == "~" or text.startswith("~/"):
        return Path(pwd.getpwuid(os.getuid()).pw_dir) / text[2:]
    return Path(text)


def resolve(name: str, address: str, user: str, ssh_args: list[str], *, known_hosts: str | None = None,
            identity: str | None = None) -> Target:
    """Where ssh connects for the new Mac, and with which known_hosts and key (see the module doc)."""
    host = name
    config = _ssh_config(name, user, ssh_args)
    if config["hostname"][0] != address and name != address:
        host = address
        config = _ssh_config(address, user, ssh_args)
    if known_hosts:
        known = Path(known_hosts).expanduser()
    else:
        known = _ssh_path(config.get("userknownhostsfile", ["~/.ssh/known_hosts"])[0].split()[0])
    if known.exists() and not known.is_file():
        raise UserError(f"{known} is not a known_hosts file (the inventory's ssh settings name it): host-key "
                        "checking stays on; give --known-hosts FILE")
    if identity:
        key = Path(identity).expanduser()
        if not Path(f"{key}.pub").is_file():
            raise UserError(f"--identity {identity}: no public key {key}.pub beside it")
    else:
        candidates = [_ssh_path(p) for p in config.get("identityfile", [])]
        key = next((p for p in candidates if Path(f"{p}.pub").is_file()), None)
        if key is None:
            raise UserError("no SSH key for the Macs: make one with `ssh-keygen -t ed25519`, or name yours "
                            "with --identity FILE")
    return Target(name, address, user, ssh_args, host, config["hostname"][0], int(config["port"][0]), known, key,
                  config.get("hashknownhosts", ["no"])[0] == "yes")


# --- trust ----------------------------------------------------------------------------------------


def fingerprint(key_b64: str) -> str:
    """OpenSSH's SHA256 fingerprint of a public key blob (what ssh-keygen -l prints)."""
    digest = hashlib.sha256(base64.b64decode(key_b64)).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def scan_host_key(target: Target) -> str:
    """The Mac's ed25519 host key (base64), as ssh-keyscan reads it; a bounded wait."""
    try:
        out = subprocess.run(["ssh-keyscan", "-T", str(SCAN_TIMEOUT), "-t", "ed25519", "-p", str(target.port),
                              target.hostname], capture_output=True, text=True, timeout=SCAN_TIMEOUT + 5,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        out = None
    keys = [line.split()[2] for line in (out.stdout if out else "").splitlines()
            if not line.startswith("#") and len(line.split()) >= 3 and line.split()[1] == KEY_TYPE]
    if not keys:
        raise UserError(f"{target.name}: no SSH answer from {target.hostname} port {target.port} within "
                        f"{SCAN_TIMEOUT} s; check the address and that Remote Login is on (System Settings > "
                        "General > Sharing)")
    return keys[0]


def known_keys(target: Target) -> list[str]:
    """Every host key known_hosts holds for the Mac, of any type, as "TYPE BASE64" (hashed entries too),
    a key marked @revoked as "@revoked TYPE BASE64": an ECDSA or RSA key recorded for the Mac makes a
    new ed25519 key as suspect as a changed one. (@cert-authority lines name a CA, not the Mac's key.)"""
    if not target.known_hosts.is_file():
        return []
    keys = []
    for name in target.known_hosts_names:
        out = subprocess.run(["ssh-keygen", "-F", name, "-f", str(target.known_hosts)], capture_output=True,
                             text=True, stdin=subprocess.DEVNULL)
        for line in out.stdout.splitlines():
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            marker = [words.pop(0)] if words[0].startswith("@") else []
            if marker != ["@cert-authority"] and len(words) >= 3:
                keys.append(" ".join(marker + words[1:3]))
    return list(dict.fromkeys(keys))


def _hashed(name: str) -> str:
    salt = os.urandom(20)
    digest = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def known_hosts_lines(target: Target, key_b64: str) -> str:
    if target.hash_known_hosts:
        return "".join(f"{_hashed(n)} {KEY_TYPE} {key_b64}\n" for n in target.known_hosts_names)
    return f"{','.join(target.known_hosts_names)} {KEY_TYPE} {key_b64}\n"


def record_host_key(target: Target, key_b64: str) -> None:
    """Append the confirmed key to the known_hosts file, as ssh does: the file (or the one its symlink
    names) keeps its inode and mode, and a line another ssh appends meanwhile is not lost (0600 if new)."""
    path = target.known_hosts
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        size = os.fstat(fd).st_size
        unfinished = size > 0 and os.pread(fd, 1, size - 1) != b"\n"
        os.write(fd, (("\n" if unfinished else "") + known_hosts_lines(target, key_b64)).encode())
        os.fsync(fd)
    finally:
        os.close(fd)


# --- access ---------------------------------------------------------------------------------------


def key_login_works(target: Target, command: str = "true") -> bool:
    """Whether the key alone logs in (and runs command), with the inventory's ssh settings."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", *target.ssh_args, "-l", target.user,
            "-p", str(target.port), target.host, command]
    try:
        return subprocess.run(argv, capture_output=True, timeout=SESSION_TIMEOUT, stdin=subprocess.DEVNULL).returncode == 0
    except subprocess.TimeoutExpired:
        return False


_ACCESS_SCRIPT = r"""
key=$1 sudo_user=$2 dropin=$3
umask 077
dir="$HOME/.ssh" keys="$HOME/.ssh/authorized_keys"
mkdir -p "$dir" && chmod 700 "$dir" || exit 10
if [ -f "$keys" ] && grep -qxF "$key" "$keys"; then
  echo "key: present"
else
  if [ -s "$keys" ] && [ -n "$(tail -c 1 "$keys")" ]; then echo >> "$keys"; fi
  printf '%s\n' "$key" >> "$keys" || exit 11
  echo "key: added"
fi
chmod 600 "$keys" || exit 11
[ -n "$sudo_user" ] || exit 0
exec sudo -S -p '' /bin/sh -c '
user=$1 target=$2
tmp=$(mktemp "${target%/*}/.mlx-fleet.XXXXXX") || exit 20
printf "%s ALL=(ALL) NOPASSWD: ALL\n" "$user" > "$tmp"
if ! visudo -cf "$tmp" > /dev/null; then rm -f "$tmp"; echo "sudoers: invalid"; exit 21; fi
chown root:wheel "$tmp" && chmod 0440 "$tmp" || { rm -f "$tmp"; exit 22; }
if [ -f "$target" ] && cmp -s "$tmp" "$target" && [ -n "$(find "$target" -prune -user 0 -group 0 -perm 0440)" ]; then
  rm -f "$tmp"; echo "sudoers: present"; exit 0
fi
mv -f "$tmp" "$target" && echo "sudoers: added"
' sh "$sudo_user" "$dropin"
"""


@dataclass
class Access:
    key: str  # "added" | "present"
    sudoers: str | None  # "added" | "present" | None (not asked)


def dropin_path(user: str) -> str:
    """The user's drop-in. sudo skips a file of sudoers.d whose name contains a dot (or ends in ~), so a dot
    of the user name (john.doe) is written _2e, and _ as __ to keep two users' names apart."""
    return f"{SUDOERS_DIR}/mlx-fleet-{user.replace('_', '__').replace('.', '_2e')}"


def install_access(target: Target, host_key_b64: str, password: str, *, passwordless_sudo: bool) -> Access:
    """One password session: the controller's key into authorized_keys (modes 700/600, once), and with
    passwordless_sudo a validated sudoers drop-in. Raises UserError in one line; a refused password
    changes nothing."""
    if not _USER_RE.fullmatch(target.user):
        raise UserError(f"--user {target.user!r} is not a macOS short user name")
    public_key = Path(f"{target.identity}.pub").read_text().strip()
    with tempfile.TemporaryDirectory(prefix="mlx-fleet-onboard-") as private:
        folder = Path(private)
        folder.chmod(0o700)
        # The confirmed key alone: ssh checks the Mac against it, never against anything else.
        known = folder / "known_hosts"
        known.write_text(f"{','.join(target.known_hosts_names)} {KEY_TYPE} {host_key_b64}\n")
        remote = shlex.join(["/bin/sh", "-c", _ACCESS_SCRIPT, "sh", public_key,
                             target.user if passwordless_sudo else "", dropin_path(target.user)])
        argv = ["ssh", "-o", f"UserKnownHostsFile={known}", "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "StrictHostKeyChecking=yes", "-o", "PreferredAuthentications=keyboard-interactive,password",
                "-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1", "-o", "BatchMode=no",
                "-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "ConnectTimeout=10",
                *target.ssh_args, "-l", target.user, "-p", str(target.port), target.host, remote]
        try:
            with secret_socket.askpass(password, target.user, [target.hostname]) as secret_env:
                done = subprocess.run(argv, input=(password + "\n") if passwordless_sudo else "",
                                      env=dict(os.environ, **secret_env), capture_output=True, text=True,
                                      timeout=SESSION_TIMEOUT, start_new_session=True)
        except subprocess.TimeoutExpired as exc:
            raise UserError(f"{target.name}: the SSH session with {target.user}@{target.hostname} did not finish "
                            f"within {SESSION_TIMEOUT} s") from exc
    said = dict(line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    if done.returncode == 255:
        stderr = done.stderr.strip()
        if "Permission denied" in stderr:
            raise UserError(f"{target.name}: {target.user}@{target.hostname} refused the password; nothing was "
                            "changed on the Mac or in the inventory; check it and run again")
        if "Host key verification failed" in stderr or "REMOTE HOST IDENTIFICATION HAS CHANGED" in stderr:
            raise UserError(f"{target.name}: the host key changed between the scan and the login: someone may be "
                            "in the middle; nothing was sent")
        raise UserError(f"{target.name}: ssh {target.user}@{target.hostname} failed: "
                        f"{(stderr.splitlines() or ['no message'])[-1]}")
    if done.returncode != 0 or "key" not in said or (passwordless_sudo and said.get("sudoers") not in ("added", "present")):
        reason = said.get("sudoers") == "invalid" and "visudo -cf refused the drop-in (nothing was installed)"
        reason = reason or (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        step = "the sudoers drop-in" if "key" in said else "the key"
        raise UserError(f"{target.name}: installing {step} failed: {reason}")
    return Access(said["key"], said.get("sudoers"))


def which_ssh() -> None:
    for tool in ("ssh", "ssh-keyscan", "ssh-keygen"):
        if not shutil.which(tool):
            raise UserError(f"{tool} is not installed on this controller: install OpenSSH's client")

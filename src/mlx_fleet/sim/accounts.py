"""A simulated Mac's accounts and Remote Login: homes, keys, sudo, the factory password and names,
and sshd's configuration."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import time
from pathlib import Path


from mlx_fleet.sim import host
from mlx_fleet.sim.host import SimError, run
from mlx_fleet.sim.state import LIBEXEC, ClusterState
SUDO_MODES = ("nopasswd", "password", "none")
# sshd of a FileVault-locked Mac (lifecycle._LOCKED_SSHD): no login at all ("console"), or a password login
# that only unlocks the data volume ("ssh-unlock").
SSHD_LOCKED = {"console": ("", "AuthorizedKeysFile none\nPasswordAuthentication no\n"),
               "ssh-unlock": ("_ssh", "AuthorizedKeysFile none\nPasswordAuthentication yes\nForceCommand /bin/true\n")}
# Remote Login as macOS has it: every address, the account password or a key.
SSHD_CONFIG = "\n".join([
    "# Remote Login for this simulated Mac",
    "ListenAddress 0.0.0.0",
    "HostKey /usr/local/libexec/macsim/ssh/ssh_host_ed25519_key",
    "PidFile none",
    "UsePAM no",
    "PasswordAuthentication yes",
    "KbdInteractiveAuthentication no",
    "PermitRootLogin no",
    f"AllowUsers {host.ADMIN_USER}",
    "AcceptEnv LANG LC_*",
    "PrintMotd no",
    "Subsystem sftp internal-sftp",
    "",
])


class Accounts(ClusterState):
    """Who may log in to a node, and how."""

    def _make_accounts(self, name: str, profile: dict, factory_password: str | None) -> list[str]:
        """The admin's and the other account's homes: our key in the admin's, or (a factory Mac) its own
        password and Setup Assistant's names. Returns the names the Mac answers to locally."""
        fs = self.fs(name)
        uid, gid = host.admin_ids()
        home = fs / "Users" / host.ADMIN_USER
        home.mkdir(parents=True, exist_ok=True)
        owned = [(home, 0o750)]
        other = fs / "Users" / host.OTHER_USER
        other.mkdir(exist_ok=True)
        os.chown(other, *host.admin_ids(host.OTHER_USER))
        other.chmod(0o750)
        if factory_password is None:
            (home / ".ssh").mkdir(parents=True, exist_ok=True)
            (home / ".ssh" / "authorized_keys").write_text((self.dir / "id_ed25519.pub").read_text())
            owned += [(home / ".ssh", 0o700), (home / ".ssh" / "authorized_keys", 0o600)]
            local_names = [name]
        else:
            self._write_factory_account(name, factory_password)
            local_names = [name, self._write_factory_names(name, profile["model_name"])]
        for path, mode in owned:
            os.chown(path, uid, gid)
            path.chmod(mode)
        return local_names

    def _make_sshd(self, name: str) -> None:
        """Remote Login's host key and configurations (the usual one, and those of a FileVault-locked Mac)."""
        ssh_dir = self.fs(name) / LIBEXEC / "ssh"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", str(ssh_dir / "ssh_host_ed25519_key")])
        (ssh_dir / "sshd_config").write_text(SSHD_CONFIG)
        for suffix, extra in SSHD_LOCKED.values():
            (ssh_dir / f"sshd_config_locked{suffix}").write_text(SSHD_CONFIG + extra)

    def _write_client_key(self) -> None:
        """A new key for each cluster, never one found in DIR (a leftover of a failed `down`, or planted):
        its .pub becomes every node's authorized_keys, with sudo."""
        key = self.dir / "id_ed25519"
        key.unlink(missing_ok=True)
        key.with_suffix(".pub").unlink(missing_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"mlx-fleet-sim@{self.dir}", "-f", str(key)])

    def _write_sudoers(self, name: str, mode: str) -> None:
        """Sudo as on a Mac: members of `admin` may sudo with their password; `nopasswd` adds
        the drop-in users write for unattended work; `none` is a standard (non-admin) account."""
        if mode not in SUDO_MODES:
            raise SimError(f"sudo must be one of {', '.join(SUDO_MODES)}, not {mode!r}")
        fs = self.fs(name)
        # Sorted first: on a Mac this rule is in /etc/sudoers, before every drop-in.
        macos_rule = fs / "etc/sudoers.d/00-macos-admin-group"
        macos_rule.write_text("%admin ALL = (ALL) ALL\n")
        macos_rule.chmod(0o440)
        nopasswd = fs / "etc/sudoers.d/admin-nopasswd"
        if mode == "nopasswd":
            nopasswd.write_text(f"{host.ADMIN_USER} ALL=(ALL) NOPASSWD: ALL\n")
            nopasswd.chmod(0o440)
        else:
            nopasswd.unlink(missing_ok=True)
        # The node's /etc/group: the host's, plus the groups every Mac has. Written in place,
        # because the running node has this very file bind-mounted.
        members = host.ADMIN_USER if mode != "none" else ""
        groups = [line for line in Path("/etc/group").read_text().splitlines()
                  if line.split(":")[0] not in ("admin", "wheel")]
        with open(fs / "etc/group", "w") as group_file:
            group_file.write("\n".join(groups + [f"admin:x:80:{members}", "wheel:x:0:root"]) + "\n")

    def _write_factory_account(self, name: str, password: str) -> None:
        """The admin account's own password on this Mac: a node-private /etc/shadow, and a copy
        for the tests in DIR/nodes/NAME/admin-password (0600)."""
        if not shutil.which("openssl"):
            raise SimError("missing on this machine: openssl; install with: apt-get install -y openssl")
        hashed = run(["openssl", "passwd", "-6", "-stdin"], input=password + "\n").stdout.strip()
        today = int(time.time() // 86400)
        lines = [f"{entry.pw_name}:{hashed if entry.pw_name == host.ADMIN_USER else '*'}:{today}:0:99999:7:::"
                 for entry in pwd.getpwall()]
        host.write_file(self.fs(name) / "etc/shadow", "\n".join(lines) + "\n", 0o600)
        host.write_file(self.dir / "nodes" / name / "admin-password", password + "\n", 0o600)

    def _write_factory_names(self, name: str, model_name: str) -> str:
        """Setup Assistant's ComputerName and LocalHostName; returns the LocalHostName."""
        computer_name, local_host_name = factory_names(model_name)
        prefs = self.fs(name) / "Library/Preferences/SystemConfiguration/preferences.json"
        prefs.write_text(json.dumps({"System": {"ComputerName": computer_name, "LocalHostName": local_host_name}}, indent=2))
        prefs.chmod(0o644)
        return local_host_name


def factory_names(model_name: str) -> tuple[str, str]:
    """What Setup Assistant names a Mac: "admin's Mac mini", and "admins-Mac-mini" for Bonjour."""
    computer_name = f"{host.ADMIN_USER}'s {model_name}"
    return computer_name, computer_name.replace("'", "").replace(" ", "-")

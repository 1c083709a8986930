"""How ssh outside Ansible reaches a Mac: the one mapping of the inventory's connection variables to ssh's
arguments, as Ansible's ssh connection maps them (its user, port, key, host-key checking and arguments).

Used by every ssh the controller runs itself: verify, the watch, capture, onboarding and os-update's unlock.
The user's ssh config applies as it does for Ansible and mlx.launch; a known_hosts file or a HostKeyAlias
the inventory wants comes through its ssh arguments (``-o UserKnownHostsFile=...``, ``-o HostKeyAlias=...``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Callable

# The inventory's connection variables, as Ansible's ssh connection reads them (ansible-doc -t connection ssh).
USER, HOST, PORT, KEY_FILE = "ansible_user", "ansible_host", "ansible_port", "ansible_ssh_private_key_file"
HOST_KEY_CHECKING = ("ansible_ssh_host_key_checking", "ansible_host_key_checking")
ARGS = ("ansible_ssh_common_args", "ansible_ssh_extra_args")
_FALSE = ("false", "no", "off", "0", "n", "f")


@dataclass(frozen=True)
class SshTarget:
    """A Mac as ssh reaches it with the inventory's settings (None: ssh's own default, or the ssh config's)."""

    name: str  # the inventory name
    address: str  # ansible_host, else the name
    user: str | None = None  # ansible_user
    port: int | None = None  # ansible_port
    key_file: str | None = None  # ansible_ssh_private_key_file
    host_key_checking: bool = True  # off only where the inventory turns it off, as for Ansible
    args: tuple[str, ...] = ()  # ansible_ssh_common_args then ansible_ssh_extra_args, split as a shell splits them

    @classmethod
    def from_inventory(cls, name: str, value: Callable[[str], object]) -> SshTarget:
        """The target of NAME from value(variable) -> its templated value or None (inventory_view.values);
        ValueError (one line) for a port that is not a number."""
        def text(variable: str) -> str | None:
            found = value(variable)
            return None if found is None else str(found)

        checking = next((text(v) for v in HOST_KEY_CHECKING if text(v) is not None), None)
        port = text(PORT)
        if port is not None and not port.strip().isdigit():
            raise ValueError(f"{name}: ansible_port {port!r} is not a port number")
        return cls(name, text(HOST) or name, text(USER), int(port) if port else None, text(KEY_FILE),
                   checking is None or checking.strip().lower() not in _FALSE,
                   tuple(word for variable in ARGS for word in shlex.split(text(variable) or "")))

    @property
    def options(self) -> tuple[str, ...]:
        """ssh's options for this target, before the host: the inventory's arguments last, as Ansible puts them."""
        options: list[str] = []
        if not self.host_key_checking:
            options += ["-o", "StrictHostKeyChecking=no"]
        for flag, setting in (("-l", self.user), ("-p", self.port), ("-i", self.key_file)):
            if setting is not None:
                options += [flag, str(setting)]
        return tuple(options) + self.args

    def argv(self, *options: str, command: str | None = None, ssh: str = "ssh") -> list[str]:
        """`ssh OPTIONS <the target's options> -- ADDRESS [COMMAND]`: OPTIONS (the caller's: timeouts, batch mode)
        come first, and ssh keeps the first value it is given for an option."""
        return [ssh, *options, *self.options, "--", self.address, *([command] if command is not None else [])]

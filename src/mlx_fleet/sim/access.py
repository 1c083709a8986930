"""How the controller reaches a simulated cluster: DIR/ssh_config, known_hosts, inventory.yml and the
ssh drop-in."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import yaml

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from mlx_fleet.sim import host
from mlx_fleet.sim.host import DROP_IN_DIR, SimError, run
from mlx_fleet.sim.state import LIBEXEC, ClusterState
# The MLX environment the simulated Macs are given: their own Python (the sim cannot
# download uv-managed CPython builds) on Linux, from a lock committed for the sim.
SIM_ENV_LOCK = Path(__file__).with_name("mlx-env.lock.json")
# What `up` writes into DIR for the user, and `down` removes.
ACCESS_FILES = ("ssh_config", "known_hosts", "inventory.yml", "id_ed25519", "id_ed25519.pub", "admin_password")
CONTROL_PATH_DIR = "cp"  # in DIR: Ansible's persistent SSH connections to this cluster


class Access(ClusterState):
    """The files a user (and Ansible) reach the nodes with."""

    def _check_own_files(self) -> None:
        """Refuse a cluster folder where something `up` writes or trusts (the key above all) was put by another
        account: a folder root made is theirs to fill only while it was open to them, and what they left is theirs."""
        for name in (*ACCESS_FILES, "state.json", "nodes"):
            with contextlib.suppress(FileNotFoundError):
                uid = (self.dir / name).lstat().st_uid
                if uid != 0:
                    raise SimError(f"{self.dir / name} is owned by uid {uid}, not root: another account put it there; "
                                   "remove it, or give a new cluster folder")

    def _write_access_files(self) -> None:
        lines, known = [], []
        for name in self.node_names():
            lines += self._ssh_host_block(name)
            pub = (self.fs(name) / LIBEXEC / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()
            known.append(f"{','.join([name, *self._addresses(name)])} {pub[0]} {pub[1]}")
        host.write_file(self.dir / "ssh_config", "# Written by mlx-fleet sim up\n" + "\n".join(lines))
        host.write_file(self.dir / "known_hosts", "\n".join(known) + "\n")
        inventory = {"all": {"children": {"mlx_cluster": {
            "hosts": {name: inventory_host_vars(self.state["nodes"][name]["model"]) for name in self.node_names()},
            "vars": {
                "ansible_user": host.ADMIN_USER,
                "ansible_python_interpreter": "/usr/bin/python3",
                "ansible_ssh_common_args": f"-F {self.dir / 'ssh_config'}",
                # Clusters on one machine share node names: keep Ansible's persistent SSH
                # connections apart, or a run could reuse another cluster's connection.
                "ansible_control_path_dir": str(self.dir / CONTROL_PATH_DIR),
                **environment_vars(),
            },
        }}}}
        host.write_file(self.dir / "inventory.yml",
                        "# Written by mlx-fleet sim up: the simulated cluster as an Ansible inventory.\n"
                        + yaml.safe_dump(inventory, sort_keys=False))
        # ssh reads the drop-ins in name order and the first match wins: naming them by
        # reverse creation time makes a plain `ssh NODE` reach the newest cluster with that name.
        self.state["ssh_drop_in"] = str(DROP_IN_DIR / f"mlx-fleet-sim-{10**10 - int(time.time()):010d}-{self.index}.conf")
        self._save()
        Path(self.state["ssh_drop_in"]).write_text(
            f"# mlx-fleet sim cluster in {self.dir}\nInclude {self.dir / 'ssh_config'}\n")

    def _addresses(self, name: str) -> list[str]:
        """The addresses the controller reaches NAME at: its management address, then, for a node
        managed over Thunderbolt, its Ethernet (or Wi-Fi) address, where it still answers."""
        return list(dict.fromkeys([self.state["nodes"][name]["management_ip"], self.profile(name)["management"]["ip"]]))

    def _ssh_host_block(self, name: str) -> list[str]:
        """NAME by its management address; its other addresses too, so an inventory can point its
        ansible_host there (as a user re-points a Mac from Thunderbolt to Ethernet)."""
        login = [f"  User {host.ADMIN_USER}", f"  IdentityFile {self.dir / 'id_ed25519'}", "  IdentitiesOnly yes",
                 f"  UserKnownHostsFile {self.dir / 'known_hosts'}", "  StrictHostKeyChecking yes", ""]
        management, *others = self._addresses(name)
        return [f"Host {name}", f"  HostName {management}", *login] + [line for address in others
                                                                      for line in (f"Host {address}", *login)]

    def _remove_access_files(self) -> None:
        """The ssh drop-in and the files `up` wrote into DIR for the user."""
        for drop_in in DROP_IN_DIR.glob(f"mlx-fleet-sim-*-{self.index}.conf"):
            drop_in.unlink()
        for artefact in ACCESS_FILES:
            (self.dir / artefact).unlink(missing_ok=True)


def inventory_host_vars(model_key: str) -> dict:
    """A node's variables in the sim's inventory: its model key, when the catalogue has it (a replayed Mac the
    catalogue cannot place gets none, and the product reads its facts, as for any undeclared Mac)."""
    return {"mlx_fleet_model": model_key} if model_key in MODELS else {}


def environment_vars() -> dict:
    """The mlx_env_* variables of the sim's inventory: what its nodes can install."""
    python = run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]).stdout.strip()
    return {"mlx_env_python_interpreter": "/usr/bin/python3", "mlx_env_python_version": python,
            "mlx_env_platforms": ["linux-aarch64", "linux-x86_64"], "mlx_env_lock_file": str(SIM_ENV_LOCK)}

"""What `mlx-fleet verify` checks: the cluster as the hostfiles and the fabric's addresses describe it.

The inventory gives the folder the hostfiles are in (``mlx_fleet_output_dir``, by default
``.mlx-fleet`` beside the inventory) and the interpreter every Mac runs (``mlx_env_path``);
``hostfile.json`` gives the ranks and the backend, ``hostfile-ring.json`` the TCP fallback and
the cluster model (``cluster.json``, plugin_utils.cluster_model) every cable with both ends' ports and addresses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cluster_model import (
    MODEL_FILE, PREFIX, ClusterModel, coerce, read_model)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_backend import RDMA_BACKENDS
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.hostfile import check_hostfile
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.lock import ROLE_DEFAULTS

CLUSTER_GROUP = "mlx_cluster"
DEFAULT_SIZES = "1KiB:256MiB"
_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$", re.I)


class VerifyError(Exception):
    """Bad input (inventory, hostfiles, options); the message is one line for the user."""


# --- sizes ------------------------------------------------------------------------------------------


def parse_size(text: str) -> int:
    match = _SIZE.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise VerifyError(f"--sizes: {text!r} is not a size like 1KiB, 4MiB or 4096")
    size = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if size < 4 or size % 4:
        raise VerifyError(f"--sizes: {text!r} must be a positive multiple of 4 bytes (float32 elements)")
    return size


def parse_sizes(text: str) -> list[int]:
    """"1KiB:256MiB" (from, to, times 4 each step) or "1KiB,64KiB,4MiB" -> bytes, ascending."""
    if ":" in text:
        low, high = (parse_size(part) for part in text.split(":", 1))
        if low > high:
            raise VerifyError(f"--sizes: {text!r} goes from a larger size to a smaller one")
        sizes = [low]
        while sizes[-1] * 4 <= high:
            sizes.append(sizes[-1] * 4)
        return sizes
    return sorted({parse_size(part) for part in text.split(",") if part.strip()})


def format_size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


# --- the inventory --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    output_dir: Path  # where the hostfiles are
    python: str  # the interpreter, the same path on every Mac


@dataclass(frozen=True)
class InventoryHost:
    """A Mac of the cluster group as ssh reaches it with the inventory's settings, and the variables asked for."""

    name: str
    address: str  # ansible_host, else the name
    ssh_options: tuple[str, ...]  # ansible_user, ansible_port, the key and the ssh arguments, as ssh options
    values: dict  # name -> templated value (None when unset)


def _ssh_options(value) -> tuple[str, ...]:
    import shlex

    options: list[str] = []
    for name, flag in (("ansible_user", "-l"), ("ansible_port", "-p"), ("ansible_ssh_private_key_file", "-i")):
        if value(name) is not None:
            options += [flag, str(value(name))]
    for name in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        options += shlex.split(str(value(name) or ""))
    return tuple(options)


def read_inventory(inventories: list[str], names: tuple[str, ...] = ()) -> tuple[Settings, list[InventoryHost]]:
    """One read of the inventory: mlx_fleet_output_dir and mlx_env_path as Ansible sees them for the
    cluster's first host, and every host of the group with its ssh settings and the variables NAMES."""
    from ansible.errors import AnsibleError
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    for source in inventories:
        if not Path(source).exists():
            raise VerifyError(f"inventory {source} does not exist")
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(Path(s).resolve()) for s in inventories])
    hosts = inventory.get_hosts(CLUSTER_GROUP)
    if not hosts:
        raise VerifyError(f"inventory {', '.join(inventories)}: no hosts in group {CLUSTER_GROUP}")
    manager = VariableManager(loader=loader, inventory=inventory)
    default_env = (yaml.safe_load(ROLE_DEFAULTS.read_text()) or {})["mlx_env_path"]
    found = []
    try:
        for index, host in enumerate(hosts):
            variables = manager.get_vars(host=host)
            templar = Templar(loader=loader, variables=variables)

            def value(name: str, default=None, variables=variables, templar=templar):
                raw = variables.get(name)
                return default if raw is None else templar.template(raw)

            if index == 0:
                output_dir = str(value("mlx_fleet_output_dir", f"{variables['inventory_dir']}/.mlx-fleet"))
                env_path = str(value("mlx_env_path", default_env))
            found.append(InventoryHost(host.name, str(value("ansible_host", host.name)), _ssh_options(value),
                                       {name: value(name) for name in names}))
    except AnsibleError as exc:
        raise VerifyError(f"inventory: {exc.message}") from exc
    return Settings(Path(output_dir), f"{env_path.rstrip('/')}/bin/python"), found


def settings_from_inventory(inventories: list[str]) -> Settings:
    """mlx_fleet_output_dir and mlx_env_path as Ansible sees them for the cluster's first host."""
    return read_inventory(inventories)[0]


# --- the hostfiles and the cables -------------------------------------------------------------------


@dataclass(frozen=True)
class CableEnd:
    host: str
    port: int
    address: str  # what the fabric gave this end
    prefix: int

    @property
    def hardware_port(self) -> str:
        return f"Thunderbolt {self.port}"


@dataclass(frozen=True)
class CableLink:
    cable: str  # "a:1 -- b:2", lower end first (for the report)
    a: CableEnd
    b: CableEnd

    def ends(self) -> tuple[CableEnd, CableEnd]:
        return self.a, self.b

    def end(self, host: str) -> CableEnd:
        return self.a if self.a.host == host else self.b


@dataclass(frozen=True)
class Cluster:
    folder: Path
    hostfile: dict
    ring_hostfile: dict | None
    cables: list[CableLink]

    @property
    def hosts(self) -> list[str]:
        return [h["ssh"] for h in self.hostfile["hosts"]]

    @property
    def backend(self) -> str:
        return self.hostfile["backend"]

    @property
    def rdma(self) -> bool:
        return self.backend in RDMA_BACKENDS


def _read_json(path: Path, what: str, fix: str):
    try:
        return load_json(path.read_text())
    except FileNotFoundError:
        raise VerifyError(f"{path}: no {what}; {fix}") from None
    except (OSError, ValueError) as exc:
        raise VerifyError(f"{path}: cannot read the {what} ({exc}); {fix}") from None


def cables_from_model(model: ClusterModel | None, hosts: list[str]) -> list[CableLink]:
    """Every cable of the cluster model between two hosts of the hostfile, with both ends."""
    return [CableLink(str(link.cable), CableEnd(link.a.host, link.a.port, link.a.address, PREFIX),
                      CableEnd(link.b.host, link.b.port, link.b.address, PREFIX))
            for link in sorted((model.links if model else []), key=lambda item: str(item.cable))
            if link.a.host in hosts and link.b.host in hosts]


def cables_from_addresses(addresses: dict[str, str], hosts: list[str]) -> list[CableLink]:
    """The same from an old address ledger's cables map (cable text -> /30)."""
    return cables_from_model(coerce(addresses), hosts)


def load_cluster(folder: Path) -> Cluster:
    fix = f"write the hostfiles first: {fixes.run_command('hostfile', 'INVENTORY', cli=True)}"
    hostfile = _read_json(folder / HOSTFILE, "hostfile", fix)
    ring = folder / RING_HOSTFILE
    ring_hostfile = _read_json(ring, "ring hostfile", fix) if ring.exists() else None
    for path, data in ((folder / HOSTFILE, hostfile), (ring, ring_hostfile)):
        if data is not None or path == folder / HOSTFILE:  # a hostfile.json of "null" is no hostfile either
            try:
                check_hostfile(data)
            except ValueError as exc:
                raise VerifyError(f"{path}: {exc}; {fix}") from None
    try:
        model = read_model(folder)
    except ValueError as exc:
        raise VerifyError(f"{exc}; {fix}") from None
    if model is None:
        raise VerifyError(f"{folder / MODEL_FILE}: no cluster model; {fix}")
    hosts = [h["ssh"] for h in hostfile["hosts"]]
    return Cluster(folder, hostfile, ring_hostfile, cables_from_model(model, hosts))


def _entry(hostfile: dict, host: str) -> dict:
    return next(h for h in hostfile["hosts"] if h["ssh"] == host)


def link_hostfile(cluster: Cluster, link: CableLink, backend: str, devices: dict[str, str] | None = None) -> dict:
    """A two-rank hostfile for one cable: its two ends' addresses (ring), or its two RDMA devices
    (jaccl, devices: host -> enX of its end) with the coordinator address of the cluster hostfile."""
    a, b = link.ends()
    if backend == "ring":
        hosts = [{"ssh": end.host, "ips": [end.address], "rdma": []} for end in (a, b)]
    else:
        rdma = [f"rdma_{(devices or {})[end.host]}" for end in (a, b)]
        hosts = [{"ssh": a.host, "ips": _entry(cluster.hostfile, a.host)["ips"], "rdma": [None, rdma[0]]},
                 {"ssh": b.host, "ips": _entry(cluster.hostfile, b.host)["ips"], "rdma": [rdma[1], None]}]
    return {"backend": "jaccl" if backend.startswith("jaccl") else "ring", "envs": cluster.hostfile["envs"],
            "hosts": hosts}


def single_host_hostfile(cluster: Cluster) -> dict:
    """Rank 0's Mac alone (the single-Mac baseline), with the cluster's environment."""
    first = cluster.hostfile["hosts"][0]
    return {"backend": "ring", "envs": cluster.hostfile["envs"],
            "hosts": [{"ssh": first["ssh"], "ips": first["ips"] or ["127.0.0.1"], "rdma": []}]}


def ring_cables(cluster: Cluster, hostfile: dict) -> list[CableLink]:
    """The cables a ring hostfile's neighbours talk over (rank r listens on its own addresses)."""
    used = []
    for rank, host in enumerate(hostfile["hosts"]):
        for ip in host["ips"]:
            used += [link for link in cluster.cables
                     if host["ssh"] in (link.a.host, link.b.host) and link.end(host["ssh"]).address == ip]
    return list(dict.fromkeys(used))

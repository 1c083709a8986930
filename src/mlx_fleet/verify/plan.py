"""What `mlx-fleet verify` checks: the cluster as the hostfiles and the fabric's addresses describe it.

The inventory gives the folder the hostfiles are in (``mlx_fabric_output_dir``, the role's default:
``mlx_fleet_output_dir``, else the output folder beside the inventory) and the interpreter every Mac runs
(``mlx_env_path``);
``hostfile.json`` gives the ranks and the backend, ``hostfile-ring.json`` the TCP fallback and
the cluster model (``cluster.json``, plugin_utils.model.cluster) every cable with both ends' ports and addresses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.defaults import CLUSTER_GROUP
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import (
    MODEL_FILE, ClusterModel, read_model)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric import hostfile as hostfiles
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import RDMA_BACKENDS, pair_links
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import End, Link
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HOSTFILE, RING_HOSTFILE
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ssh_target import SshTarget

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
    bridge: str  # mlx_fabric_bridge: what the fabric does with the Thunderbolt Bridge
    # The declared models (for --model): mlx_fleet_models as written, the environment's lock (the models' lock is
    # beside it), where the Macs keep them (None: the defaults).
    models: object = None
    lock_file: str | None = None
    hf_cache: str | None = None
    models_dir: str | None = None


@dataclass(frozen=True)
class InventoryHost:
    """A Mac of the cluster group as ssh reaches it with the inventory's settings, and the variables asked for."""

    name: str
    ssh: SshTarget  # ansible_host, ansible_user, ansible_port, the key and the ssh arguments
    values: dict  # name -> templated value, the inventory's over the roles' defaults (None when neither sets it)


def read_inventory(inventories: list[str], names: tuple[str, ...] = ()) -> tuple[Settings, list[InventoryHost]]:
    """One read of the inventory (mlx_fleet.inventory_view): the output folder (mlx_fabric_output_dir:
    mlx_fleet_output_dir, else the default beside the inventory), mlx_env_path, mlx_fabric_bridge and the
    declared models (mlx_fleet_models, mlx_env_lock_file, mlx_fleet_models_hf_cache, mlx_fleet_models_dir) as a play
    running the roles sees them for the cluster's first host, and every host of the group with its ssh settings
    and the variables NAMES."""
    from mlx_fleet.inventory_view import (
        InventoryView, InventoryViewError)

    try:
        inventory = InventoryView(inventories)
        hosts = inventory.hosts(CLUSTER_GROUP)
        if not hosts:
            raise VerifyError(f"inventory {', '.join(inventories)}: no hosts in group {CLUSTER_GROUP}")
        settings, found = None, []
        for host in hosts:
            get = inventory.values(host)
            if settings is None:
                output_dir, env_path, bridge = (str(get(name)) for name in ("mlx_fabric_output_dir", "mlx_env_path",
                                                                         "mlx_fabric_bridge"))
                settings = Settings(Path(output_dir), f"{env_path.rstrip('/')}/bin/python", bridge,
                                    get("mlx_fleet_models"), get("mlx_env_lock_file"),
                                    get("mlx_fleet_models_hf_cache"), get("mlx_fleet_models_dir"))
            found.append(InventoryHost(host, SshTarget.from_inventory(host, get), {name: get(name) for name in names}))
    except (InventoryViewError, ValueError) as exc:
        raise VerifyError(str(exc)) from None
    return settings, found


def settings_from_inventory(inventories: list[str]) -> Settings:
    """The output folder, the interpreter and the bridge as Ansible sees them for the cluster's first host."""
    return read_inventory(inventories)[0]


# --- the hostfiles and the cables -------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    folder: Path
    hostfile: dict
    ring_hostfile: dict | None
    cables: list[Link]  # the model's cables between two hosts of the hostfile

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


def cables_from_model(model: ClusterModel | None, hosts: list[str]) -> list[Link]:
    """Every cable of the cluster model between two hosts of the hostfile."""
    return [link for link in sorted((model.links if model else []), key=lambda item: str(item.cable))
            if link.a.host in hosts and link.b.host in hosts]


def load_cluster(folder: Path, inventory: str = "INVENTORY") -> Cluster:
    fix = f"write the hostfiles first: {fixes.run_command('hostfile', inventory, cli=True)}"
    hostfile = _read_json(folder / HOSTFILE, "hostfile", fix)
    ring = folder / RING_HOSTFILE
    ring_hostfile = _read_json(ring, "ring hostfile", fix) if ring.exists() else None
    for path, data in ((folder / HOSTFILE, hostfile), (ring, ring_hostfile)):
        if data is not None or path == folder / HOSTFILE:  # a hostfile.json of "null" is no hostfile either
            try:
                hostfiles.Hostfile.from_json(data)
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


def link_hostfile(cluster: Cluster, link: Link, backend: str, devices: dict[str, str] | None = None) -> dict:
    """A two-rank hostfile for one cable, rendered by the fabric's hostfile code: its two ends' addresses
    (ring), or its two RDMA devices (jaccl, devices: host -> enX of its end) with the coordinator address of
    the cluster hostfile."""
    a, b = link.ends()
    devices = devices or {}
    wire = Link(End(a.port, devices.get(a.host, "")), End(b.port, devices.get(b.host, "")), 0.0)
    management = {host: next(iter(_entry(cluster.hostfile, host)["ips"]), None) for host in (a.host, b.host)}
    return hostfiles.render("jaccl" if backend.startswith("jaccl") else "ring", [a.host, b.host],
                            pair_links([a.host, b.host], [wire]), [0, 1], {wire.cable: link.network}, management,
                            cluster.hostfile["envs"]).to_json()


def single_host_hostfile(cluster: Cluster) -> dict:
    """Rank 0's Mac alone (the single-Mac baseline), with the cluster's environment."""
    first = cluster.hostfile["hosts"][0]
    return {"backend": "ring", "envs": cluster.hostfile["envs"],
            "hosts": [{"ssh": first["ssh"], "ips": first["ips"] or ["127.0.0.1"], "rdma": []}]}


def ring_cables(cluster: Cluster, hostfile: dict) -> list[Link]:
    """The cables a ring hostfile's neighbours talk over (rank r listens on its own addresses)."""
    used = []
    for rank, host in enumerate(hostfile["hosts"]):
        for ip in host["ips"]:
            used += [link for link in cluster.cables
                     if host["ssh"] in (link.a.host, link.b.host) and link.end(host["ssh"]).address == ip]
    return list(dict.fromkeys(used))

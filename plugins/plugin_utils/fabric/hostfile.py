"""The hostfiles mlx.launch reads, as mlx.distributed_config writes them (docs/fabric.md section 4).

``{"backend", "envs", "hosts": [{"ssh", "ips", "rdma"}]}``: ranks in inventory order for jaccl,
round the ring for the ring backends; written like MLX writes it (``json.dump``, indent 4, no final
newline), so for the same cables the file is byte for byte the one MLX writes. Typed as MLX types it
(``mlx/_distributed_utils``' ``Hostfile`` and ``Host``): built by render, read back by Hostfile.from_json.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.model.cluster import ends
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import HOSTFILE_BACKENDS, Pairs
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.files import HELD, json_text
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import atomic_write_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable


@dataclass(frozen=True)
class Host:
    """One rank of a hostfile: how mlx.launch reaches it (ssh), the addresses it lists, its RDMA devices per rank."""

    rank: int
    ssh: str
    ips: list[str]
    rdma: list  # per rank: its device, its devices, or None (itself, or no cable); [] in a ring hostfile


@dataclass(frozen=True)
class Hostfile:
    hosts: list[Host]
    backend: str
    envs: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The file's data, keys in MLX's order."""
        return {"backend": self.backend, "envs": list(self.envs),
                "hosts": [{"ssh": h.ssh, "ips": list(h.ips), "rdma": list(h.rdma)} for h in self.hosts]}

    def text(self) -> str:
        """The file's text, exactly as mlx.distributed_config writes it."""
        return json_text(self.to_json(), final_newline=False)

    def write(self, path: str | Path) -> bool:
        """Write it atomically, as MLX formats it, checked as read back; True when it changed."""
        return atomic_write_json(path, self.to_json(), Hostfile.from_json, final_newline=False)

    @classmethod
    def from_json(cls, data) -> Hostfile:
        """The hostfile in data, or ValueError (one line) unless it is a hostfile mlx.launch can read."""
        if not isinstance(data, dict) or data.get("backend") not in HOSTFILE_BACKENDS:
            raise ValueError(f"hostfile: backend must be {', '.join(HOSTFILE_BACKENDS[:-1])} or "
                             f"{HOSTFILE_BACKENDS[-1]}")
        if not isinstance(data.get("envs"), list) or not all(isinstance(e, str) and "=" in e for e in data["envs"]):
            raise ValueError("hostfile: envs must be a list of NAME=value")
        hosts = data.get("hosts")
        if not isinstance(hosts, list) or not hosts:
            raise ValueError("hostfile: no hosts")
        return cls([_host(data["backend"], rank, host, len(hosts)) for rank, host in enumerate(hosts)],
                   data["backend"], list(data["envs"]))


# With models declared, every rank resolves them from the Macs' cache, offline (docs/models-on-macs.md): unless set,
# a rank asks the Hub on its own and the ranks may load different revisions.
HF_HUB_CACHE, HF_HUB_OFFLINE = "HF_HUB_CACHE", "HF_HUB_OFFLINE"


def rank_envs(declared: list[str], models: list | None, hf_cache: str) -> list[str]:
    """The hostfile's envs: the inventory's (mlx_fleet_envs) and, when it declares models, HF_HUB_CACHE=HF_CACHE
    and HF_HUB_OFFLINE=1 after them, each unless the inventory sets that name itself. Without models the
    inventory's alone, so a cluster that declares none keeps its hostfiles byte for byte."""
    if not models:
        return list(declared)
    named = {entry.split("=", 1)[0] for entry in declared}
    added = [f"{name}={value}" for name, value in ((HF_HUB_CACHE, hf_cache), (HF_HUB_OFFLINE, "1"))
             if name not in named]
    return list(declared) + added


def _host(backend: str, rank: int, host, ranks: int) -> Host:
    if not isinstance(host, dict) or not isinstance(host.get("ssh"), str) or not isinstance(host.get("ips"), list):
        raise ValueError(f"hostfile: rank {rank} needs ssh and ips")
    for ip in host["ips"]:
        try:
            ipaddress.ip_address(ip if isinstance(ip, str) else None)
        except ValueError:
            raise ValueError(f"hostfile: rank {rank}: {ip!r} is not an IP address") from None
    rdma = host.get("rdma")
    if backend == "ring":
        if rdma != []:
            raise ValueError(f"hostfile: rank {rank}: a ring hostfile has no rdma devices")
        if not host["ips"]:
            raise ValueError(f"hostfile: rank {rank}: a ring hostfile needs the host's addresses")
    elif not isinstance(rdma, list) or len(rdma) != ranks or rdma[rank] is not None:
        raise ValueError(f"hostfile: rank {rank}: rdma must list one entry per rank, null for itself")
    return Host(rank, host["ssh"], list(host["ips"]), list(rdma))


def _rdma_entry(devices: list[str], count: int) -> str | list[str]:
    names = [f"rdma_{device}" for device in devices[:count]]
    return names[0] if count == 1 else names


def render(backend: str, hosts: list[str], pairs: Pairs, ring: list[int] | None, addresses: dict[Cable, str],
           management_ips: dict, envs: list[str]) -> Hostfile:
    """The hostfile for backend. management_ips: host -> the address jaccl hostfiles list (as
    mlx.distributed_config does); a ring hostfile lists each host's cable addresses instead."""
    n = len(hosts)

    def devices(i: int, j: int) -> list[str]:
        return [link.end(hosts[i]).device for link in pairs[i, j]]

    def management(host: str) -> list[str]:
        return [management_ips[host]] if management_ips.get(host) else []

    if backend == "jaccl":
        count = min((len(pairs[i, j]) for i in range(n) for j in range(n) if i != j), default=1)
        entries = [Host(i, hosts[i], management(hosts[i]),
                        [None if i == j else _rdma_entry(devices(i, j), count) for j in range(n)])
                   for i in range(n)]
    else:
        # Ring backends: ranks follow the ring, as the ring backend's neighbours are rank +-1.
        count = min(len(pairs[node, ring[k - 1]]) for k, node in enumerate(ring))
        entries = []
        for k, node in enumerate(ring):
            left, right = ring[k - 1], ring[(k + 1) % n]
            host = hosts[node]
            if backend == "jaccl-ring":
                rdma = [_rdma_entry(devices(node, other), count) if other in (left, right) else None
                        for other in ring]
                entries.append(Host(k, host, management(host), rdma))
            else:
                ips = [ends(addresses[link.cable])[0 if link.a.host == host else 1]
                       for link in pairs[node, left][:count]]
                entries.append(Host(k, host, ips, []))
    return Hostfile(entries, backend, list(envs))


def macs_to_write(texts: dict[str, str | None], on_macs: dict[str, dict | None], held: str | None = None) -> list[str]:
    """The Macs whose hostfiles differ from texts ({name: text, None for absent}), judged by the sha256
    of each file each Mac reported ({name: sha256 or None}); a Mac that reported nothing is written.
    held: the line of an unfinished macOS update's hold (HELD beside them, mlx_fleet.cluster.hostfiles'
    `held`): while held only that marker is compared, the hostfiles staying as they are; otherwise no marker."""
    texts = {HELD: held + "\n"} if held else dict(texts, **{HELD: None})
    wanted = {name: text and hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in texts.items()}
    return [mac for mac, found in on_macs.items()
            if found is None or any(found.get(name) != digest for name, digest in wanted.items())]

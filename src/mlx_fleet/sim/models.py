"""Deterministic node profiles for macsim's simulated Macs (models: plugin_utils.base.mac_models).

A profile is the simulated machine's "hardware and NVRAM" (node.json, see
docs/macsim.md). Everything random in it (serial number, UUIDs, MAC addresses)
comes from a seeded generator keyed by the node name, so the same seed and
names give the same cluster on every run.
"""

from __future__ import annotations

import random
import string
import uuid

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import Model

DEFAULT_OS = ("26.2", "25C56")


def _mac_address(rng: random.Random) -> str:
    # Locally administered unicast, like the randomised addresses macOS shows.
    first = (rng.randrange(256) | 0x02) & 0xFE
    return ":".join(f"{b:02x}" for b in [first] + [rng.randrange(256) for _ in range(5)])


def _serial(rng: random.Random) -> str:
    # Apple's randomised serials since 2021: 10 characters, no vowels that read as digits.
    alphabet = "".join(c for c in string.ascii_uppercase + string.digits if c not in "AEIOU01")
    return "".join(rng.choice(alphabet) for _ in range(10))


def make_profile(
    name: str,
    model: Model,
    *,
    seed: int,
    management_ip: str,
    management_prefix: int,
    router: str,
    rdma_enabled: bool,
    os_version: tuple[str, str] = DEFAULT_OS,
) -> dict:
    """The node.json document for one simulated Mac (cables are added later)."""
    rng = random.Random(f"{seed}:{name}")
    model_id = model.model_id or "Mac"  # a catalogue model whose identifier Apple's pages do not list yet
    uid = lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper()  # noqa: E731
    switch_base = rng.getrandbits(40)
    interfaces = [
        {"hardware_port": port, "device": device, "mac": _mac_address(rng),
         "management": device == model.management_device}
        for port, device in model.hardware_ports
    ]
    bridge_mac = _mac_address(rng)
    thunderbolt = [
        {
            "receptacle": receptacle,
            "bus": receptacle - 1,
            "device": device,
            "domain_uuid": uid(),
            "switch_uid": f"0x05AC{switch_base:010X}{receptacle - 1:02X}",
            "generation": model.tb_generation,
            "rdma_ok": receptacle not in model.rdma_broken_ports,
            "link": None,
        }
        for receptacle, device in model.thunderbolt_devices
    ]
    return {
        "name": name,
        "model": model.key,
        "model_name": model.model_name,
        "model_id": model_id,
        "chip": model.chip,
        "cpu_cores": model.cpu_cores,
        "ncpu": model.ncpu,
        "memory_gb": model.memory_gb,
        "serial": _serial(rng),
        "hardware_uuid": uid(),
        "provisioning_udid": f"0000{model_id[3:5]}00-{rng.getrandbits(64):016X}",
        "os_version": os_version[0],
        "os_build": os_version[1],
        "boot_rom": "13822.61.10",
        "clt_installed": True,
        "rdma_enabled": rdma_enabled,
        "nvram_rdma": rdma_enabled,
        "in_recovery": False,
        "sudo": "nopasswd",
        "interfaces": interfaces,
        "bridge_mac": bridge_mac,
        "management": {
            "device": model.management_device,
            "ip": management_ip,
            "prefix": management_prefix,
            "router": router,
        },
        "thunderbolt": thunderbolt,
    }

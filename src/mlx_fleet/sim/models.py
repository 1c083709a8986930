"""The Macs macsim can be: hardware catalogue and deterministic node profiles.

A profile is the simulated machine's "hardware and NVRAM" (node.json, see
docs/macsim.md). Everything random in it (serial number, UUIDs, MAC addresses)
comes from a seeded generator keyed by the node name, so the same seed and
names give the same cluster on every run.
"""

from __future__ import annotations

import random
import string
import uuid
from dataclasses import dataclass

DEFAULT_OS = ("26.2", "25C56")


@dataclass(frozen=True)
class Model:
    key: str
    model_name: str  # what system_profiler calls it ("Mac mini")
    model_id: str  # hw.model ("Mac16,11")
    chip: str
    cpu_cores: str
    ncpu: int
    memory_gb: int
    tb_generation: int  # 5: 80 Gb/s links, 4: 40 Gb/s
    # networksetup hardware ports in -listallhardwareports order: (port name, device);
    # the Thunderbolt Bridge (bridge0) every Mac has comes on top.
    hardware_ports: tuple[tuple[str, str], ...]
    management_device: str
    # Thunderbolt receptacles whose RDMA never comes up (the Mac Studio port beside Ethernet)
    rdma_broken_ports: tuple[int, ...] = ()

    @property
    def thunderbolt_devices(self) -> list[tuple[int, str]]:
        return [
            (int(port.split()[1]), device)
            for port, device in self.hardware_ports
            if port.startswith("Thunderbolt ") and port.split()[1].isdigit()
        ]

    @property
    def port_count(self) -> int:
        return len(self.thunderbolt_devices)


def _tb_ports(first_device: int, count: int) -> tuple[tuple[str, str], ...]:
    return tuple((f"Thunderbolt {n}", f"en{first_device + n - 1}") for n in range(1, count + 1))


MODELS: dict[str, Model] = {
    m.key: m
    for m in (
        Model(
            "studio-m3-ultra", "Mac Studio", "Mac15,14", "Apple M3 Ultra",
            "32 (24 performance and 8 efficiency)", 32, 512, 5,
            (("Ethernet", "en0"), ("Wi-Fi", "en1")) + _tb_ports(2, 6),
            "en0", rdma_broken_ports=(1,),
        ),
        Model(
            "mini-m4-pro", "Mac mini", "Mac16,11", "Apple M4 Pro",
            "14 (10 performance and 4 efficiency)", 14, 64, 5,
            (("Ethernet", "en0"), ("Wi-Fi", "en1")) + _tb_ports(2, 3),
            "en0",
        ),
        Model(
            "mini-m4", "Mac mini", "Mac16,10", "Apple M4",
            "10 (4 performance and 6 efficiency)", 10, 32, 4,
            (("Ethernet", "en0"), ("Wi-Fi", "en1")) + _tb_ports(2, 3),
            "en0",
        ),
        Model(
            "macbook-pro-m4-max", "MacBook Pro", "Mac16,6", "Apple M4 Max",
            "16 (12 performance and 4 efficiency)", 16, 128, 5,
            (("Wi-Fi", "en0"),) + _tb_ports(1, 3),
            "en0",
        ),
    )
}
DEFAULT_MODEL = "mini-m4-pro"


def link_speed(a: Model, b: Model) -> int:
    """Gb/s of a direct cable: TB5 only when both ends are TB5."""
    return 80 if min(a.tb_generation, b.tb_generation) >= 5 else 40


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
        "model_id": model.model_id,
        "chip": model.chip,
        "cpu_cores": model.cpu_cores,
        "ncpu": model.ncpu,
        "memory_gb": model.memory_gb,
        "serial": _serial(rng),
        "hardware_uuid": uid(),
        "provisioning_udid": f"0000{model.model_id[3:5]}00-{rng.getrandbits(64):016X}",
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

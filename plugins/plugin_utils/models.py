"""The Apple Silicon Macs mlx-fleet knows: what their Thunderbolt ports are and can do.

Inventories name a host's model by its key (``mlx_fleet_model: studio-m3-ultra``);
the inventory checks, the fabric and the RDMA readiness use the port facts.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # Where the Thunderbolt ports are on the case, for a person with a cable in hand.
    ports_where: str = ""

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
            ports_where="four Thunderbolt 5 ports on the back and two on the front; Thunderbolt 1 is the one "
                        "on the back beside Ethernet",
        ),
        Model(
            "mini-m4-pro", "Mac mini", "Mac16,11", "Apple M4 Pro",
            "14 (10 performance and 4 efficiency)", 14, 64, 5,
            (("Ethernet", "en0"), ("Wi-Fi", "en1")) + _tb_ports(2, 3),
            "en0", ports_where="three Thunderbolt 5 ports on the back (the two USB-C ports on the front are not "
                               "Thunderbolt)",
        ),
        Model(
            "mini-m4", "Mac mini", "Mac16,10", "Apple M4",
            "10 (4 performance and 6 efficiency)", 10, 32, 4,
            (("Ethernet", "en0"), ("Wi-Fi", "en1")) + _tb_ports(2, 3),
            "en0", ports_where="three Thunderbolt 4 ports on the back (the two USB-C ports on the front are not "
                               "Thunderbolt)",
        ),
        Model(
            "macbook-pro-m4-max", "MacBook Pro", "Mac16,6", "Apple M4 Max",
            "16 (12 performance and 4 efficiency)", 16, 128, 5,
            (("Wi-Fi", "en0"),) + _tb_ports(1, 3),
            "en0", ports_where="three Thunderbolt 5 ports: two on the left side, one on the right",
        ),
    )
}
DEFAULT_MODEL = "mini-m4-pro"


def link_speed(a: Model, b: Model) -> int:
    """Gb/s of a direct cable: TB5 only when both ends are TB5."""
    return 80 if min(a.tb_generation, b.tb_generation) >= 5 else 40

"""Capture folders (as `mlx-fleet capture` writes them) built from the real reference captures.

Two Macs from the real captures in tests/fixtures/macos, each replayable with `mlx-fleet sim up --replay`:
- "mbp": the M5 Max MacBook Pro (Mac17,7) whose `system_profiler SPThunderboltDataType -json`
  is system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt (REAL, verbatim);
  its sysctl.txt (hw.model only) is SYNTHESIZED from that file's note that it is a Mac17,7.
- "studio": the M3 Ultra Mac Studio (Mac15,14) whose `networksetup -listallhardwareports` is
  networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt (REAL, verbatim); its sysctl.txt
  (hw.model only) and thunderbolt.txt are SYNTHESIZED: six TB5 buses in system_profiler's format,
  Thunderbolt 2 carrying the domain UUID the MacBook Pro's capture shows for the Mac Studio at the
  other end of its cable, and showing the MacBook Pro's port 1 in return. Which Studio port the
  cable used is not recorded; port 2 is a guess (port 1 beside Ethernet cannot do RDMA).
Everything else a capture holds is left out: replay must cope with partial captures.
"""

from __future__ import annotations

import json
from pathlib import Path

FIXTURE_DIR = Path(__file__).resolve().parent / "fixtures" / "macos"


def load(path: Path) -> str:
    """A capture without its '# source:' line."""
    source, _, body = path.read_text().partition("\n")
    assert source.startswith("# source: "), path
    return body

MBP_PORT1 = "817DCFA4-B481-4100-80FC-91C7AA969F0B"  # the MacBook Pro's Thunderbolt 1 (bus 0)
STUDIO_SEEN_BY_MBP = "28CA4C30-A263-4C55-B302-953416D0B209"  # the Mac Studio port on that cable
THUNDERBOLT = ("system_profiler", "SPThunderboltDataType", "-json")
HARDWARE_PORTS = ("networksetup", "-listallhardwareports")


def write_capture(directory: Path, reads: dict[str, tuple[tuple[str, ...], bytes]]) -> Path:
    """A capture folder: {name: (argv, stdout)} with exit status 0 and no stderr."""
    directory.mkdir(parents=True, exist_ok=True)
    manifest = {"format": "mlx-fleet-capture/1", "host": directory.name, "reads": {}}
    for name, (argv, stdout) in reads.items():
        (directory / f"{name}.txt").write_bytes(stdout)
        manifest["reads"][name] = {"argv": list(argv), "file": f"{name}.txt", "rc": 0, "stderr": ""}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2))
    for path in [directory, *directory.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return directory


def reference_thunderbolt() -> bytes:
    return load(FIXTURE_DIR / "system_profiler-SPThunderboltDataType-json__jasonpaulso-omlx-plus__1.txt").encode()


def reference_hardware_ports() -> bytes:
    return load(FIXTURE_DIR / "networksetup-listallhardwareports__noahzelezny-Knurlogic__1.txt").encode()


def mbp_capture(directory: Path) -> Path:
    return write_capture(directory, {
        "thunderbolt": (THUNDERBOLT, reference_thunderbolt()),  # real
        "sysctl": (("sysctl", "hw.model"), b"hw.model: Mac17,7\n"),  # synthesized
    })


def _studio_thunderbolt() -> bytes:
    """Synthesized: six idle TB5 buses, Thunderbolt 2 cabled to the MacBook Pro's port 1."""
    buses = []
    for receptacle in range(1, 7):
        bus = receptacle - 1
        tag = {"current_speed_key": "Up to 120 Gb/s", "link_status_key": "0x100", "micro_version_key": "0.0.0",
               "receptacle_id_key": str(receptacle), "receptacle_status_key": "receptacle_no_devices_connected"}
        entry = {"_name": f"thunderboltusb4_bus_{bus}", "device_name_key": "Mac Studio",
                 "domain_uuid_key": STUDIO_SEEN_BY_MBP if receptacle == 2 else f"5D1C0F00-0000-4000-8000-00000000000{receptacle}",
                 "receptacle_1_tag": tag, "route_string_key": "0",
                 "switch_uid_key": f"0x05AC3C1F2A7B44{bus:02X}", "vendor_name_key": "Apple Inc."}
        if receptacle == 2:
            tag.update(current_speed_key="80 Gb/s", link_status_key="0x2", receptacle_status_key="receptacle_connected")
            entry["_items"] = [{"_name": "MacBook Pro", "device_id_key": "0xA", "device_name_key": "Mac17,7",
                                "domain_uuid_key": MBP_PORT1, "vendor_id_key": "0x0A27", "vendor_name_key": "Apple Inc."}]
        buses.append(entry)
    buses.reverse()  # system_profiler lists the highest bus first
    return json.dumps({"SPThunderboltDataType": buses}, indent=2, separators=(",", " : "), sort_keys=True).encode()


def studio_capture(directory: Path) -> Path:
    return write_capture(directory, {
        "hardware_ports": (HARDWARE_PORTS, reference_hardware_ports()),  # real
        "sysctl": (("sysctl", "hw.model"), b"hw.model: Mac15,14\n"),  # synthesized
        "thunderbolt": (THUNDERBOLT, _studio_thunderbolt()),  # synthesized
    })

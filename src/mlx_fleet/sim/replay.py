"""Replaying a real Mac in macsim (``mlx-fleet sim up --replay NODE=CAPTURE_DIR``).

A capture (``mlx-fleet capture``, see mlx_fleet.capture) holds what the toolkit reads from a
Mac. From it this module derives, with the collection's own parsers, the simulated Mac's
profile (model, serial, macOS version, memory, hardware ports, Thunderbolt ports with their
domain UUIDs, MAC addresses, RDMA and sudo state) and the cables its recordings imply: a
port whose recorded SPThunderboltDataType shows a Mac directly attached with the domain UUID
of another node's port is cabled to that port. The node itself answers the recorded argv
with the recorded bytes (the doubles' replay module); everything else is the normal doubles.

Any single recording may be missing or unreadable (a capture is often sent because a parser
failed on it): what cannot be derived comes from the model catalogue when the model is
known, else from conservative defaults, and is listed in ``Replay.notes``.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, CablePlanError, Port, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.storage.files import load_json
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import Model, generation_from_facts, identify
from ansible_collections.mlx_fleet.cluster.plugins.module_utils import macos_parsers as mp
from mlx_fleet.sim.host import SimError

MANIFEST = "manifest.json"
_DEVICE = re.compile(r"^[a-z]+[0-9]+$")
_THUNDERBOLT = re.compile(r"^Thunderbolt (\d+)$")


class ReplayError(SimError):
    """A capture folder that cannot be replayed."""


@dataclass
class Recording:
    """A capture folder: its manifest and the recorded stdout of each read."""

    dir: Path
    manifest: dict

    def reads(self):
        for name, read in self.manifest.get("reads", {}).items():
            yield name, read

    def stdout(self, argv0: str, *words: str, exact: tuple[str, ...] | None = None) -> str | None:
        """Recorded stdout of the first read of ``argv0`` with all ``words`` (or exactly ``exact``)."""
        for _, read in self.reads():
            argv = read.get("argv") or []
            if not argv or argv[0] != argv0:
                continue
            if exact is not None and tuple(argv[1:]) != tuple(exact):
                continue
            if not all(w in argv[1:] for w in words):
                continue
            text = (self.dir / read["file"]).read_bytes().decode("utf-8", errors="replace")
            if text.strip():
                return text
        return None

    def read(self, argv: tuple[str, ...]) -> dict | None:
        return next((r for _, r in self.reads() if tuple(r.get("argv") or ()) == tuple(argv)), None)


def load_capture(path: str | Path) -> Recording:
    directory = Path(path)
    try:
        manifest = load_json((directory / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise ReplayError(f"{directory} is not a capture folder (mlx-fleet capture): {exc}") from exc
    reads = manifest.get("reads") if isinstance(manifest, dict) else None
    if not isinstance(reads, dict) or not reads:
        raise ReplayError(f"{directory / MANIFEST}: no reads recorded")
    for name, read in reads.items():
        if not isinstance(read, dict):
            raise ReplayError(f"{directory / MANIFEST}: read {name!r} is not an object")
        argv, file = read.get("argv"), read.get("file")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ReplayError(f"{directory / MANIFEST}: read {name!r} has no argv list")
        if not isinstance(file, str) or "/" in file or not (directory / file).is_file():
            raise ReplayError(f"{directory / MANIFEST}: read {name!r}: output file {file!r} missing")
    return Recording(directory, manifest)


@dataclass
class Replay:
    """What a capture says about its Mac, in the terms of a macsim profile."""

    recording: Recording
    model: Model  # the catalogue's model when the recorded model identifier is known, else derived
    facts: dict  # profile keys taken from the recordings
    ports: dict[int, dict]  # receptacle -> {domain_uuid, bus, switch_uid, micro_version, peers}
    macs: dict[str, str]  # device -> MAC address
    notes: list[str] = field(default_factory=list)

    @property
    def rdma_enabled(self) -> bool | None:
        return self.facts.get("rdma_enabled")


def _parse(notes: list[str], label: str, parser, text, *args):
    if text is None:
        return None
    try:
        return parser(text, *args)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        notes.append(f"{label}: not used ({exc})")
        return None


def _cpu_cores(total: int, groups: list[int], known: Model | None) -> str:
    if known and known.ncpu == total:
        return known.cpu_cores
    if len(groups) >= 2:
        return f"{total} ({groups[0]} performance and {groups[-1]} efficiency)"
    return f"{total} ({total} performance and 0 efficiency)"


def _synth_hardware_ports(model_name: str, receptacles: list[int]) -> tuple[tuple[str, str], ...]:
    """Hardware ports when none were recorded: a laptop's Wi-Fi is en0 and Thunderbolt N is enN;
    a desktop has Ethernet en0, Wi-Fi en1 and Thunderbolt N as en(N+1)."""
    if "MacBook" in model_name:
        return (("Wi-Fi", "en0"),) + tuple((f"Thunderbolt {n}", f"en{n}") for n in receptacles)
    return (("Ethernet", "en0"), ("Wi-Fi", "en1")) + tuple((f"Thunderbolt {n}", f"en{n + 1}") for n in receptacles)


def derive(recording: Recording) -> Replay:
    """The replayed Mac's model, profile facts, Thunderbolt ports and MAC addresses."""
    notes: list[str] = []
    hw = _parse(notes, "SPHardwareDataType", mp.parse_hardware_json,
                recording.stdout("system_profiler", "SPHardwareDataType", "-json")) or {}
    tb_text = recording.stdout("system_profiler", "SPThunderboltDataType", "-json")
    tb = _parse(notes, "SPThunderboltDataType", mp.parse_thunderbolt_json, tb_text) or []
    raw_buses = {b.get("domain_uuid_key"): b for b in json.loads(tb_text)["SPThunderboltDataType"]} if tb else {}
    sysctl = _parse(notes, "sysctl", mp.parse_sysctl, recording.stdout("sysctl")) or {}
    sw = _parse(notes, "sw_vers", mp.parse_sw_vers, recording.stdout("sw_vers", exact=())) or {}
    hw_ports = _parse(notes, "networksetup -listallhardwareports", mp.parse_hardware_ports,
                      recording.stdout("networksetup", "-listallhardwareports")) or []
    ifconfig = _parse(notes, "ifconfig", mp.parse_ifconfig, recording.stdout("ifconfig", exact=())) or {}
    rdma = _parse(notes, "rdma_ctl status", mp.parse_rdma_ctl_status, recording.stdout("rdma_ctl", "status"))

    model_id = hw.get("model_identifier") or sysctl.get("hw.model")
    known = identify({"model_identifier": model_id, "model_name": hw.get("model_name"), "chip": hw.get("chip")})
    if not model_id:
        notes.append("model identifier: not recorded (SPHardwareDataType, sysctl hw.model); using 'Mac'")
        model_id = "Mac"
    bus_names = {b.get("device_name_key") for b in raw_buses.values() if isinstance(b.get("device_name_key"), str)}
    model_name = hw.get("model_name") or (sorted(bus_names)[0] if bus_names else None) \
        or (known.model_name if known else "Mac")
    chip = hw.get("chip") or sysctl.get("machdep.cpu.brand_string") or (known.chip if known else "Apple Silicon")
    ncpu = hw.get("cpu_cores") or _int(sysctl.get("hw.ncpu")) or (known.ncpu if known else 8)
    groups = hw.get("core_groups") or []
    memory = hw.get("memory_bytes") or _int(sysctl.get("hw.memsize"))
    memory_gb = memory >> 30 if memory else (known.memory_gb if known else 16)

    ports, management = _hardware_ports(tb, hw_ports, ifconfig, known, model_name, notes)

    if known:
        generation = known.tb_generation
    else:  # as the product reads an unknown Mac; no ports recorded: Thunderbolt 5
        generation = generation_from_facts({"ports": tb}) or (4 if tb else 5)
    model = Model(
        key=known.key if known else model_id, model_name=model_name, model_id=model_id, chip=chip,
        cpu_cores=_cpu_cores(ncpu, groups, known), ncpu=ncpu, memory_gb=memory_gb, tb_generation=generation,
        hardware_ports=ports, management_device=management,
        rdma_broken_ports=known.rdma_broken_ports if known else (),
    )

    facts = _profile_facts(recording, notes, model, hw, sysctl, sw, rdma, groups)
    tb_ports = _thunderbolt_ports(tb, raw_buses)
    macs = {p["device"]: p["ethernet_address"] for p in hw_ports if p.get("ethernet_address")}
    for device, iface in ifconfig.items():
        if iface.get("ether") and device not in macs:
            macs[device] = iface["ether"]
    return Replay(recording, model, facts, tb_ports, macs, notes)


def _hardware_ports(tb: list, hw_ports: list, ifconfig: dict, known, model_name: str, notes: list[str]) -> tuple:
    """The hardware ports in networksetup order, without the bridge (the sim adds its own bridge0), and the
    management device."""
    receptacles = [p["receptacle"] for p in tb]
    if hw_ports:
        ports = tuple((p["hardware_port"], p["device"]) for p in hw_ports
                      if _DEVICE.match(p.get("device") or "") and not p["device"].startswith("bridge"))
    elif known:
        ports = known.hardware_ports
        notes.append(f"hardware ports: not recorded; the catalogue's {known.key} ports")
    else:
        ports = _synth_hardware_ports(model_name, receptacles)
        notes.append("hardware ports: not recorded; guessed from the Thunderbolt receptacles")
    named = {int(m.group(1)) for m in (_THUNDERBOLT.match(p) for p, _ in ports) if m}
    used = {int(d[2:]) for _, d in ports if d.startswith("en") and d[2:].isdigit()}
    for n in receptacles:  # a recorded Thunderbolt bus networksetup did not list
        if n not in named:
            free = next(i for i in range(64) if i not in used)
            used.add(free)
            ports += ((f"Thunderbolt {n}", f"en{free}"),)
            notes.append(f"Thunderbolt {n}: not in the hardware ports; simulated as en{free}")
    non_tb = [(p, d) for p, d in ports if not _THUNDERBOLT.match(p)]
    if not non_tb:
        free = next(i for i in range(64) if i not in used)
        ports = (("Ethernet", f"en{free}"),) + ports
        non_tb = [("Ethernet", f"en{free}")]
        notes.append(f"no Ethernet or Wi-Fi port recorded; management port simulated as en{free}")
    return ports, _management_device(non_tb, ifconfig)


def _profile_facts(recording: Recording, notes: list[str], model: Model, hw: dict, sysctl: dict, sw: dict, rdma,
                   groups: list) -> dict:
    """The profile's facts (node.json) the recording gives: identity, macOS, RDMA, updates, sudo."""
    facts: dict = {"model_name": model.model_name, "model_id": model.model_id, "chip": model.chip,
                   "memory_gb": model.memory_gb}
    if groups:
        facts["number_processors"] = "proc " + ":".join(str(n) for n in [model.ncpu] + groups)
    for key, value in (("serial", hw.get("serial_number")), ("hardware_uuid", hw.get("platform_uuid")),
                       ("provisioning_udid", hw.get("provisioning_udid")), ("boot_rom", hw.get("boot_rom_version"))):
        if value:
            facts[key] = value
    if hw:
        facts["activation_lock_status"] = "activation_lock_enabled" if hw.get("activation_lock") else "activation_lock_disabled"
    version = sw.get("product_version") or sysctl.get("kern.osproductversion")
    build = sw.get("build_version") or sysctl.get("kern.osversion")
    if version and build:
        facts["os_version"], facts["os_build"] = version, build
    if rdma is not None:
        facts["rdma_enabled"] = facts["nvram_rdma"] = rdma
    updates = _parse(notes, "softwareupdate --list", mp.parse_softwareupdate_list,
                     recording.stdout("softwareupdate", "--list"))
    if updates and updates["updates"]:  # what Apple offered the captured Mac, offered to the replayed one
        facts["software_updates"] = [dict(u, size_kib=u["size_kib"] or 0) for u in updates["updates"]]
    sudo = _sudo_mode(recording)
    if sudo:
        facts["sudo"] = sudo
    return facts


def _thunderbolt_ports(tb: list, raw_buses: dict) -> dict:
    """Each recorded Thunderbolt receptacle's bus, switch and direct peers."""
    tb_ports = {}
    for p in tb:
        raw = raw_buses.get(p["domain_uuid"], {})
        tag = raw.get("receptacle_1_tag", {})
        bus = p["bus"].rsplit("_", 1)[-1]
        tb_ports[p["receptacle"]] = {
            "domain_uuid": p["domain_uuid"],
            "bus": int(bus) if bus.isdigit() else p["receptacle"] - 1,
            "switch_uid": raw.get("switch_uid_key"),
            "micro_version": tag.get("micro_version_key"),
            "peers": [peer["domain_uuid"] for peer in p["peers"] if peer["direct"]],
        }
    return tb_ports


def _int(value) -> int | None:
    return int(value) if value is not None and str(value).isdigit() else None


def _management_device(non_tb: list[tuple[str, str]], ifconfig: dict) -> str:
    """The port the Mac was reached on: the first with a routable IPv4 address, else Ethernet, else Wi-Fi."""
    for _, device in non_tb:
        iface = ifconfig.get(device) or {}
        if any(not a["address"].startswith("169.254.") for a in iface.get("inet", [])):
            return device
    for wanted in ("Ethernet", "Wi-Fi"):
        for port, device in non_tb:
            if port == wanted:
                return device
    return non_tb[0][1]


def _sudo_mode(recording: Recording) -> str | None:
    """nopasswd when `sudo -n true` succeeded; none when `id -Gn` shows no admin group; else password."""
    sudo = recording.read(("sudo", "-n", "true"))
    if sudo is None:
        return None
    if sudo.get("rc") == 0:
        return "nopasswd"
    groups = recording.stdout("id", "-Gn")
    if groups is not None and "admin" not in groups.split():
        return "none"
    return "password"


def apply(profile: dict, replay: Replay) -> dict:
    """Overlay what the recordings say on a generated profile (made from ``replay.model``)."""
    profile.update(replay.facts)
    for iface in profile["interfaces"]:
        if iface["device"] in replay.macs:
            iface["mac"] = replay.macs[iface["device"]]
    if "bridge0" in replay.macs:
        profile["bridge_mac"] = replay.macs["bridge0"]
    for port in profile["thunderbolt"]:
        recorded = replay.ports.get(port["receptacle"])
        if not recorded:
            continue
        port["domain_uuid"] = recorded["domain_uuid"]
        port["bus"] = recorded["bus"]
        if recorded["switch_uid"]:
            port["switch_uid"] = recorded["switch_uid"]
        port["micro_version"] = recorded["micro_version"]
    return profile


def implied_cables(replays: dict[str, Replay], profiles: dict[str, dict]) -> list[Cable]:
    """Cables the recordings show: a replayed port whose directly attached Mac has the domain
    UUID of another node's port (replayed or generated) is cabled to that port."""
    owner = {p["domain_uuid"]: Port(name, p["receptacle"]) for name, prof in profiles.items() for p in prof["thunderbolt"]}
    cables: dict[tuple[Port, Port], Cable] = {}
    for name, replay in replays.items():
        for receptacle, port in sorted(replay.ports.items()):
            for peer in port["peers"]:
                there = owner.get(peer)
                if there is not None and there.host != name:
                    cable = Cable(Port(name, receptacle), there)
                    cables.setdefault(cable.key, cable)
    return list(cables.values())


def merge_cables(planned: list[Cable], implied: list[Cable], port_counts: dict[str, int]) -> list[Cable]:
    """The plan's cables plus the implied ones it does not already have; a port used twice is an error."""
    keys = {c.key for c in planned}
    merged = planned + [c for c in implied if c.key not in keys]
    try:
        parse_cables([str(c) for c in merged], port_counts)
    except CablePlanError as exc:
        raise ReplayError(f"the recordings and the cable plan disagree: {exc}") from exc
    return merged


def install(recording: Recording, fs_root: Path, libexec: str) -> None:
    """Copy the capture into the node, where the doubles serve it (macsim/replay.py)."""
    target = Path(fs_root) / libexec / "replay"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    files = [MANIFEST] + [read["file"] for _, read in recording.reads()]
    for name in dict.fromkeys(files):
        shutil.copyfile(recording.dir / name, target / name)
        (target / name).chmod(0o644)
    target.chmod(0o755)


def forget(fs_root: Path, libexec: str, tool: str) -> None:
    """Stop serving TOOL's recordings: what it says now changed on the node (an update offered or installed)."""
    path = Path(fs_root) / libexec / "replay" / MANIFEST
    if not path.exists():
        return
    manifest = json.loads(path.read_text())
    manifest["reads"] = {k: r for k, r in manifest.get("reads", {}).items() if (r.get("argv") or [None])[0] != tool}
    path.write_text(json.dumps(manifest, indent=2))


def parse_replay_args(values: list[str] | None) -> dict[str, Replay]:
    """``["NODE=DIR", ...]`` -> {NODE: Replay}."""
    replays: dict[str, Replay] = {}
    for value in values or []:
        name, sep, directory = value.partition("=")
        if not sep or not name or not directory:
            raise ReplayError(f"--replay takes NODE=CAPTURE_DIR, not {value!r}")
        if name in replays:
            raise ReplayError(f"--replay names {name} twice")
        replays[name] = derive(load_capture(directory))
    return replays

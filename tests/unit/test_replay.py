"""Replay profiles derived from captures (mlx_fleet.sim.replay) and the capture itself (mlx_fleet.capture)."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap

import pytest

from mlx_fleet import capture as cap
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, Port, parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from mlx_fleet.sim import replay
from mlx_fleet.sim.layout import build_layout
from mlx_fleet.sim.models import make_profile
from replay_dirs import (MBP_PORT1, STUDIO_SEEN_BY_MBP, _studio_thunderbolt, mbp_capture, reference_hardware_ports,
                         studio_capture, write_capture)
from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_commands import READS, capture_name


def _profile(name, r, seed=0):
    profile = make_profile(name, r.model, seed=seed, management_ip="10.0.0.2", management_prefix=24,
                           router="10.0.0.1", rdma_enabled=True)
    return replay.apply(profile, r)


def test_mbp_reference_gives_the_catalogue_m5_max_with_its_recorded_ports(tmp_path):
    r = replay.derive(replay.load_capture(mbp_capture(tmp_path / "mbp")))
    assert r.model.key == "macbook-pro-m5-max" and r.model.key in MODELS
    assert (r.model.model_name, r.model.model_id, r.model.tb_generation) == ("MacBook Pro", "Mac17,7", 5)
    # No hardware ports recorded: the catalogue's laptop layout (Wi-Fi en0, Thunderbolt N = enN).
    assert r.model.hardware_ports == (("Wi-Fi", "en0"), ("Thunderbolt 1", "en1"), ("Thunderbolt 2", "en2"),
                                      ("Thunderbolt 3", "en3"))
    assert r.model.management_device == "en0"
    assert any("hardware ports: not recorded" in note for note in r.notes)
    assert r.ports[1] == {"domain_uuid": MBP_PORT1, "bus": 0, "switch_uid": "0x05ACBE5E06781980",
                          "micro_version": "0.0.0", "peers": [STUDIO_SEEN_BY_MBP]}
    assert r.ports[2]["micro_version"] is None and r.ports[2]["peers"] == []
    profile = _profile("mbp", r)
    assert [(p["receptacle"], p["bus"], p["domain_uuid"]) for p in profile["thunderbolt"]] == [
        (1, 0, MBP_PORT1), (2, 1, "200E23D3-C921-44E0-95F7-55144AC251CC"), (3, 2, "AD089FC0-E653-4FFE-B00A-DFF110B2F9A1")]
    assert profile["model_id"] == "Mac17,7" and profile["model"] == "macbook-pro-m5-max"


def test_a_capture_without_a_model_identifier_writes_no_model_key_in_the_inventory(tmp_path):
    from replay_dirs import THUNDERBOLT, reference_thunderbolt
    from mlx_fleet.sim.access import inventory_host_vars

    r = replay.derive(replay.load_capture(write_capture(tmp_path / "anon", {
        "thunderbolt": (THUNDERBOLT, reference_thunderbolt())})))
    assert r.model.model_id == "Mac" and r.model.key not in MODELS and r.model.tb_generation == 5
    assert inventory_host_vars(r.model.key) == {}  # never mlx_fleet_model: Mac, which the preflight refuses
    assert inventory_host_vars("studio-m4-max") == {"mlx_fleet_model": "studio-m4-max"}


def test_studio_reference_keeps_its_recorded_hardware_ports_and_the_catalogue_model(tmp_path):
    r = replay.derive(replay.load_capture(studio_capture(tmp_path / "studio")))
    assert r.model.key == "studio-m3-ultra"
    assert r.model.rdma_broken_ports == (1,)
    devices = dict(r.model.hardware_ports)
    assert devices["Ethernet"] == "en0" and devices["Ethernet Adapter (en13)"] == "en13" and devices["Wi-Fi"] == "en1"
    assert r.model.thunderbolt_devices == [(n, f"en{n + 1}") for n in range(1, 7)]
    assert r.model.management_device == "en0"
    assert r.ports[2]["peers"] == [MBP_PORT1] and r.ports[2]["domain_uuid"] == STUDIO_SEEN_BY_MBP
    assert r.notes == []


def test_full_capture_sets_identity_memory_os_rdma_sudo_and_macs(tmp_path):
    hardware = {"SPHardwareDataType": [{
        "_name": "hardware_overview", "activation_lock_status": "activation_lock_disabled",
        "boot_rom_version": "13822.41.1", "chip_type": "Apple M4 Pro", "machine_model": "Mac16,11",
        "machine_name": "Mac mini", "number_processors": "proc 14:10:4", "os_loader_version": "13822.41.1",
        "physical_memory": "48 GB", "platform_UUID": "11111111-2222-3333-4444-555555555555",
        "provisioning_UDID": "00006040-0011223344556677", "serial_number": "ABCD1234XY"}]}
    ports = reference_hardware_ports().decode().replace("Device: en0\n", "Device: en0\nEthernet Address: 3c:a6:f6:00:00:01\n")
    d = write_capture(tmp_path / "mini", {
        "sw_vers": (("sw_vers",), b"ProductName:\t\tmacOS\nProductVersion:\t\t26.3\nBuildVersion:\t\t25D100\n"),
        "hardware": (("system_profiler", "SPHardwareDataType", "-json"), json.dumps(hardware).encode()),
        "hardware_ports": (("networksetup", "-listallhardwareports"), ports.encode()),
        "rdma_ctl": (("rdma_ctl", "status"), b"disabled\n"),
        "groups": (("id", "-Gn"), b"staff everyone admin\n"),
        "sudo": (("sudo", "-n", "true"), b""),
    })
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["reads"]["sudo"].update(rc=1, stderr="sudo: a password is required\n")
    (d / "manifest.json").write_text(json.dumps(manifest))
    r = replay.derive(replay.load_capture(d))
    assert r.model.key == "mini-m4-pro"
    assert r.facts["serial"] == "ABCD1234XY" and r.facts["memory_gb"] == 48
    assert (r.facts["os_version"], r.facts["os_build"]) == ("26.3", "25D100")
    assert r.facts["rdma_enabled"] is False and r.facts["sudo"] == "password"
    assert r.facts["number_processors"] == "proc 14:10:4"
    profile = _profile("mini", r)
    assert next(i["mac"] for i in profile["interfaces"] if i["device"] == "en0") == "3c:a6:f6:00:00:01"
    assert profile["hardware_uuid"] == "11111111-2222-3333-4444-555555555555"
    layout = build_layout(None, None, "mesh", "all", replays={"mini": r})
    assert layout.rdma == {"mini": False}  # the recorded NVRAM wins over --rdma


def test_unparsable_recordings_are_noted_not_fatal(tmp_path):
    d = write_capture(tmp_path / "odd", {"sw_vers": (("sw_vers",), b"garbage\n"),
                                         "sysctl": (("sysctl", "hw.model"), b"hw.model: Mac16,10\n")})
    r = replay.derive(replay.load_capture(d))
    assert r.model.key == "mini-m4" and "os_version" not in r.facts
    assert any(note.startswith("sw_vers: not used") for note in r.notes)


def test_recordings_pointing_at_each_other_make_one_cable_and_generated_peers_count(tmp_path):
    mbp = replay.derive(replay.load_capture(mbp_capture(tmp_path / "mbp")))
    studio = replay.derive(replay.load_capture(studio_capture(tmp_path / "studio")))
    profiles = {"mbp": _profile("mbp", mbp), "studio": _profile("studio", studio)}
    cables = replay.implied_cables({"mbp": mbp, "studio": studio}, profiles)
    assert [c.key for c in cables] == [Cable(Port("mbp", 1), Port("studio", 2)).key]
    # A generated node whose port UUID a recording shows is cabled too.
    generated = make_profile("mini-1", MODELS["mini-m4-pro"], seed=0, management_ip="10.0.0.3",
                             management_prefix=24, router="10.0.0.1", rdma_enabled=True)
    generated["thunderbolt"][2]["domain_uuid"] = STUDIO_SEEN_BY_MBP
    cables = replay.implied_cables({"mbp": mbp}, {"mbp": profiles["mbp"], "mini-1": generated})
    assert [str(c) for c in cables] == ["mbp:1 -- mini-1:3"]
    counts = {"mbp": 3, "mini-1": 3}
    assert replay.merge_cables([parse_cable("mbp:1 -- mini-1:3")], cables, counts) == [parse_cable("mbp:1 -- mini-1:3")]
    with pytest.raises(replay.ReplayError, match="recordings and the cable plan disagree"):
        replay.merge_cables([parse_cable("mbp:2 -- mini-1:3")], cables, counts)


def test_layout_with_replays(tmp_path):
    mbp = replay.derive(replay.load_capture(mbp_capture(tmp_path / "mbp")))
    only = build_layout(None, None, "mesh", "plan", replays={"mbp": mbp})
    assert list(only.models) == ["mbp"] and only.cables == [] and only.replays == {"mbp": mbp}
    mixed = build_layout(2, None, "mesh", "plan", replays={"mbp": mbp})
    assert list(mixed.models) == ["mini-1", "mini-2", "mbp"] and [str(c) for c in mixed.cables] == ["mini-1:1 -- mini-2:1"]
    with pytest.raises(ValueError, match="a generated node has that name"):
        build_layout(1, None, "mesh", "plan", replays={"mini-1": mbp})
    plan = tmp_path / "plan.yml"
    plan.write_text("nodes:\n  a: {}\n  mbp: {model: studio-m3-ultra}\ncables:\n  - a:1 -- mbp:3\n")
    planned = build_layout(None, None, str(plan), "plan", replays={"mbp": mbp})
    assert planned.models["mbp"] is mbp.model and [str(c) for c in planned.cables] == ["a:1 -- mbp:3"]


@pytest.mark.parametrize("text", ["nodeonly", "=dir", "node="])
def test_replay_argument_must_be_node_equals_dir(text):
    with pytest.raises(replay.ReplayError, match="NODE=CAPTURE_DIR"):
        replay.parse_replay_args([text])


def test_a_folder_without_manifest_is_refused(tmp_path):
    with pytest.raises(replay.ReplayError, match="not a capture folder"):
        replay.load_capture(tmp_path)


# --- capture --------------------------------------------------------------------------------------

FAKE_SSH = textwrap.dedent("""\
    #!{python}
    import shlex, sys
    args = sys.argv[1:]
    with open({log!r}, "a") as log:
        log.write(repr(args) + "\\n")
    if "-f" in args or "-O" in args:
        sys.exit(0)
    argv = shlex.split(args[-1])
    assert argv[:2] == ["env", "LC_ALL=C"], argv
    sys.stdout.buffer.write(("out of " + " ".join(argv[2:]) + "\\n").encode())
    if argv[2] == "rdma_ctl":
        sys.stderr.write("rdma_ctl: command not found\\n")
        sys.exit(127)
    """)


def _fake_ssh(tmp_path):
    ssh = tmp_path / "ssh"
    ssh.write_text(FAKE_SSH.format(python=sys.executable, log=str(tmp_path / "ssh.log")))
    ssh.chmod(0o755)
    return str(ssh)


def test_capture_records_every_read_with_quoted_argv(tmp_path):
    out = tmp_path / "cap"
    manifest = cap.capture("mac-1", out, ssh=_fake_ssh(tmp_path))
    assert set(manifest["reads"]) == set(READS)
    assert manifest["host"] == "mac-1" and manifest["mlx_fleet_version"] and manifest["captured_at"].endswith("Z")
    for name, argv in READS.items():
        read = manifest["reads"][name]
        assert read["argv"] == list(argv) and read["file"] == capture_name(name)
        assert (out / read["file"]).read_bytes() == ("out of " + " ".join(argv) + "\n").encode()
    assert manifest["reads"]["rdma_ctl"]["rc"] == 127
    assert manifest["reads"]["rdma_ctl"]["stderr"] == "rdma_ctl: command not found\n"
    assert json.loads((out / "manifest.json").read_text()) == manifest
    calls = [eval(line) for line in (tmp_path / "ssh.log").read_text().splitlines()]
    reads = [c for c in calls if "-f" not in c and "-O" not in c]
    # Host-key checking is never touched; the host comes after "--"; one quoted string per read.
    assert all("StrictHostKeyChecking" not in " ".join(c) for c in calls)
    assert [c[-2:] for c in reads] == [["mac-1", shlex.join(["env", "LC_ALL=C", *argv])] for argv in READS.values()]


def test_capture_refuses_writes_and_bad_hosts(tmp_path):
    for argv in (("sysctl", "iogpu.wired_limit_mb=0"), ("rdma_ctl", "enable"), ("networksetup", "-setmanual", "x"),
                 ("launchctl", "bootout", "system/x")):
        with pytest.raises(cap.CaptureError, match="not a read"):
            cap.check_read_only(argv)
    for argv in READS.values():
        cap.check_read_only(argv)
    with pytest.raises(cap.CaptureError, match="not a host name"):
        cap.capture("-oProxyCommand=x", tmp_path / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(cap.CaptureError, match="not empty"):
        cap.capture("mac-1", tmp_path / "full", ssh=_fake_ssh(tmp_path))


def test_capture_reports_an_unreachable_mac(tmp_path):
    ssh = tmp_path / "ssh"
    ssh.write_text("#!/bin/sh\necho 'ssh: connect to host mac-1 port 22: No route to host' >&2\nexit 255\n")
    ssh.chmod(0o755)
    with pytest.raises(cap.CaptureError, match="No route to host"):
        cap.capture("mac-1", tmp_path / "cap", ssh=str(ssh))


@pytest.mark.parametrize("key", sorted(MODELS))
def test_the_sim_builds_every_catalogue_model(key):
    layout = build_layout(3, key, "mesh", "all")
    model = layout.models[next(iter(layout.models))]
    assert model.key == key and len(layout.cables) == 3
    broken = set(model.rdma_broken_ports)
    assert not {end.receptacle for c in layout.cables for end in (c.a, c.b)} & broken  # the sim cables around the quirk
    profile = make_profile("n1", model, seed=0, management_ip="10.0.0.2", management_prefix=24, router="10.0.0.1",
                           rdma_enabled=True)
    assert [(p["receptacle"], p["device"], p["generation"]) for p in profile["thunderbolt"]] == [
        (n, device, model.tb_generation) for n, device in model.thunderbolt_devices]
    assert profile["model_id"] == (model.model_id or "Mac") and profile["chip"] == model.chip


def test_a_replayed_mac_is_offered_what_its_capture_lists(tmp_path):
    from replay_dirs import FIXTURE_DIR, load

    listed = load(FIXTURE_DIR / "softwareupdate-list__topgrade-rs-topgrade-issue-2123__1.txt").encode()
    d = write_capture(tmp_path / "mini", {"softwareupdate": (READS["softwareupdate"], listed)})
    profile = _profile("mini", replay.derive(replay.load_capture(d)))
    (offer,) = profile["software_updates"]
    assert (offer["label"], offer["version"], offer["build"], offer["size_kib"]) == (
        "macOS Tahoe 26.5.2-25F84", "26.5.2", "25F84", 2630358)
    assert "software_updates" not in replay.derive(replay.load_capture(write_capture(tmp_path / "none", {
        "softwareupdate": (READS["softwareupdate"], b"")}))).facts  # nothing pending: stdout empty, exit 1


def test_a_bus_name_that_is_not_text_is_not_the_model_name(tmp_path):
    # A capture edited by hand (or mangled) may name a bus with a number: the model comes from elsewhere,
    # never a TypeError from comparing names of two kinds.
    buses = json.loads(_studio_thunderbolt())
    buses["SPThunderboltDataType"][0]["device_name_key"] = 7
    d = write_capture(tmp_path / "studio", {"thunderbolt": (READS["thunderbolt"], json.dumps(buses).encode())})
    assert replay.derive(replay.load_capture(d)).model.model_name == "Mac Studio"

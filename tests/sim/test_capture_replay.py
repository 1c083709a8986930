"""mlx-fleet capture and sim up --replay: a simulated Mac is a Mac to ssh, so capture one, replay it,
and replay the real reference captures (tests/replay_dirs.py says which parts are synthesized)."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cable
from replay_dirs import mbp_capture, reference_hardware_ports, reference_thunderbolt, studio_capture
from simlib import mlx_fleet

pytestmark = pytest.mark.sim

_CONNECT = (  # Remote Login (port 22) answers on every address, a refusal would do as well
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection((sys.argv[1], 22), timeout=3)\n"
    "except ConnectionRefusedError:\n"
    "    pass\n"
    "except OSError as e:\n"
    "    print(e); sys.exit(1)\n"
    "print('answered')  # the far end answered: the cable carries traffic\n"
)


def _ssh_bytes(node: str, argv) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-o", "BatchMode=yes", node, shlex.join(argv)], capture_output=True, timeout=60)


def _cable_keys(cables) -> set:
    return {parse_cable(c).key for c in cables}


def test_captured_nodes_replay_byte_for_byte_with_the_cables_their_recordings_imply(make_sim, tmp_path):
    # Node names of their own: a plain `ssh NAME` must not reach another cluster's node.
    plan = tmp_path / "mesh.yml"
    plan.write_text("nodes: {cap-a: {}, cap-b: {}, cap-c: {}}\n"
                    "cables: ['cap-a:1 -- cap-b:1', 'cap-a:2 -- cap-c:1', 'cap-b:2 -- cap-c:2']\n")
    first = make_sim(topology=plan)
    for node in ("cap-b", "cap-c"):
        mlx_fleet("capture", node, "--out", str(tmp_path / node))
    original_cables = first.state()["cables"]
    first.down()

    # cap-a is generated again (same seed and name: same port UUIDs); r2 and r3 replay the captures.
    only_a = tmp_path / "a.yml"
    only_a.write_text("nodes: {cap-a: {}}\n")
    replayed = make_sim(topology=only_a, replay=[f"r2={tmp_path / 'cap-b'}", f"r3={tmp_path / 'cap-c'}"])
    assert replayed.nodes == ["cap-a", "r2", "r3"]
    renamed = [c.replace("cap-b", "r2").replace("cap-c", "r3") for c in original_cables]
    assert _cable_keys(replayed.state()["cables"]) == _cable_keys(renamed)
    status = replayed.cli("status").stdout
    for cable in replayed.state()["cables"]:
        assert cable in status

    for node, original in (("r2", "cap-b"), ("r3", "cap-c")):
        manifest = json.loads((tmp_path / original / "manifest.json").read_text())
        assert len(manifest["reads"]) >= 13
        mlx_fleet("capture", node, "--out", str(tmp_path / f"{node}-again"))
        again = json.loads((tmp_path / f"{node}-again" / "manifest.json").read_text())
        for name, read in manifest["reads"].items():
            assert (tmp_path / f"{node}-again" / read["file"]).read_bytes() == \
                (tmp_path / original / read["file"]).read_bytes(), f"{node}: {name} differs"
            assert (again["reads"][name]["rc"], again["reads"][name]["stderr"]) == (read["rc"], read["stderr"]), name
    # The same, straight over ssh, for the read a replay is mostly about.
    thunderbolt = next(r for r in manifest["reads"].values() if r["argv"][:2] == ["system_profiler", "SPThunderboltDataType"])
    assert _ssh_bytes("r3", thunderbolt["argv"]).stdout == (tmp_path / "cap-c" / thunderbolt["file"]).read_bytes()

    # Traffic flows over the implied cable r2:2 -- r3:2 (writes are the normal doubles').
    for node, address in (("r2", "192.168.77.1"), ("r3", "192.168.77.2")):
        replayed.ssh(node, f"sudo ifconfig {replayed.device(node, 2)} inet {address}/30 up")
    reached = replayed.cli("exec", "r3", "--", "python3", "-c", _CONNECT, "192.168.77.1", check=False)
    assert reached.returncode == 0 and "answered" in reached.stdout, reached.stdout + reached.stderr


def test_reference_captures_replay_as_their_macs(make_sim, tmp_path):
    sim = make_sim(replay=[f"mbp={mbp_capture(tmp_path / 'mbp')}", f"studio={studio_capture(tmp_path / 'studio')}"])
    up = sim.cli("status").stdout
    assert "macbook-pro-m5-max" in up and "studio-m3-ultra" in up
    assert sim.inventory["all"]["children"]["mlx_cluster"]["hosts"] == {
        "mbp": {"mlx_fleet_model": "macbook-pro-m5-max"}, "studio": {"mlx_fleet_model": "studio-m3-ultra"}}
    assert _cable_keys(sim.state()["cables"]) == _cable_keys(["mbp:1 -- studio:2"])

    got = _ssh_bytes("mbp", ["system_profiler", "SPThunderboltDataType", "-json"])
    assert got.returncode == 0 and got.stdout == reference_thunderbolt()
    got = _ssh_bytes("studio", ["networksetup", "-listallhardwareports"])
    assert got.returncode == 0 and got.stdout == reference_hardware_ports()
    # Unrecorded calls are the doubles', from the derived profile and the sim's cables.
    assert sim.ssh("mbp", "sysctl -n hw.model").stdout == "Mac17,7\n"
    text = sim.ssh("studio", "system_profiler SPThunderboltDataType").stdout
    assert "Domain UUID: 817DCFA4-B481-4100-80FC-91C7AA969F0B" in text
    assert "en13" in sim.ssh("studio", "ifconfig -l").stdout

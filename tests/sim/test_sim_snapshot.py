"""`mlx-fleet sim snapshot` and `sim restore`: a converged cluster saved, changed on its Macs, its cables and
the controller, and restored gives back the same files, the same addresses and a converge that changes nothing."""

from __future__ import annotations

import difflib
import json
import subprocess
import time

import pytest

from simlib import MLX_FLEET, changed_per_host, converge, digests, listing, plan_file

pytestmark = pytest.mark.sim

NAMES = {"sn-1": "mini-m4-pro", "sn-2": "mini-m4-pro"}  # names of their own: other clusters may be up
CABLE = "sn-1:1 -- sn-2:1"


def test_restore_gives_back_the_converged_cluster(make_sim, tmp_path):
    sim = make_sim(topology=plan_file(tmp_path / "plan.yml", NAMES, [CABLE]))
    inventory = sim.dir / "inventory.yml"
    first = converge(inventory)
    assert first.returncode == 0, first.stdout[-4000:]
    sim.cli("snapshot", "converged")
    before, hostfiles, cables = listing(sim), digests(sim.dir / ".mlx-fleet"), sim.state()["cables"]

    # Changes a rehearsal could make: a file, a setting, a Thunderbolt address, a cable, the controller's hostfile.
    sim.cli("exec", "sn-1", "--", "sh", "-c", "echo edited >> /opt/mlx-fleet/hostfile.json; mkdir /opt/extra")
    sim.cli("exec", "sn-2", "--", "pmset", "-a", "sleep", "10")
    sim.cli("exec", "sn-2", "--", "ifconfig", sim.device("sn-2", 1), "inet", "192.168.250.1", "netmask",
            "255.255.255.252")
    sim.cli("unplug", "sn-1:1")
    (sim.dir / ".mlx-fleet" / "hostfile.json").unlink()
    changed = listing(sim)
    assert all(changed[n] != before[n] for n in NAMES)  # the listing sees each change

    for _ in range(2):  # the second restore, from the manifest the first one wrote, as exact
        sim.cli("restore", "converged")
        after = listing(sim)
        assert after == before, "".join(f"\n{n}:\n" + "\n".join(difflib.unified_diff(
            before[n].splitlines(), after[n].splitlines(), lineterm="", n=0)) for n in NAMES if after[n] != before[n])
        assert digests(sim.dir / ".mlx-fleet") == hostfiles
        assert sim.state()["cables"] == cables
        assert [n["status"] for n in sim.state()["nodes"].values()] == ["running", "running"]

    again = converge(inventory)
    assert again.returncode == 0, again.stdout[-4000:]
    changed = changed_per_host(again)
    assert set(NAMES) <= set(changed) and not any(changed.values()), changed

    # A cable held to 20 Mbit/s (plug --rate) carries 5 MiB in at least 2 s; the snapshot's cable, restored, at
    # full speed again.
    sim.cli("unplug", "sn-1:1")
    sim.cli("plug", "sn-1:1", "sn-2:1", "--rate", "20")
    assert sim.state()["cable_options"][CABLE] == {"rate_mbit": 20}
    assert seconds_to_send(sim, 5 << 20) >= (5 << 20) * 8 / 20e6
    sim.cli("restore", "converged")
    assert CABLE not in sim.state()["cable_options"]
    assert seconds_to_send(sim, 5 << 20) < (5 << 20) * 8 / 20e6


# sn-2 takes what comes on its cable address and says how many bytes; sn-1 sends BYTES there over TCP and says
# how long that took.
RECEIVE = ("import socket, sys; s = socket.create_server((sys.argv[1], 5001)); c, _ = s.accept(); n = 0\n"
           "while (b := c.recv(1 << 16)): n += len(b)\nprint(n)")
SEND = ("import socket, sys, time; c = socket.create_connection((sys.argv[1], 5001), timeout=30); "
        "t = time.monotonic(); c.sendall(bytes(int(sys.argv[2]))); c.shutdown(socket.SHUT_WR); c.recv(1); "
        "print(time.monotonic() - t)")


def seconds_to_send(sim, count: int) -> float:
    """How long sn-1 takes to send COUNT bytes to sn-2 over their cable (the converged addresses), until sn-2 has
    them all."""
    link, = json.loads((sim.dir / ".mlx-fleet" / "cluster.json").read_text())["links"]
    there = link["b"]["address"]
    receiver = subprocess.Popen([MLX_FLEET, "sim", "exec", "--dir", str(sim.dir), "sn-2", "--", "python3", "-c",
                                 RECEIVE, there], stdout=subprocess.PIPE, text=True)
    for _ in range(100):  # until sn-2 listens
        sent = sim.cli("exec", "sn-1", "--", "python3", "-c", SEND, there, str(count), check=False)
        if sent.returncode == 0:
            break
        time.sleep(0.2)
    assert int(receiver.communicate(timeout=60)[0]) == count
    return float(sent.stdout)


def test_restore_refuses_a_snapshot_it_does_not_have_and_a_changed_set_of_macs(make_sim):
    sim = make_sim(nodes=1, topology="line")
    missing = sim.cli("restore", "nothing-saved", check=False)
    assert missing.returncode == 2, missing.stderr
    sim.cli("snapshot")
    sim.cli("add", "sn-new")
    changed = sim.cli("restore", check=False)
    assert changed.returncode == 2, changed.stderr
    assert json.loads((sim.dir / "state.json").read_text())["nodes"].keys() == {"mini-1", "sn-new"}

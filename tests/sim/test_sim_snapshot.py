"""`mlx-fleet sim snapshot` and `sim restore`: a converged cluster saved, changed on its Macs, its cables and
the controller, and restored gives back the same files, the same addresses and a converge that changes nothing."""

from __future__ import annotations

import difflib
import json

import pytest

from simlib import changed_per_host, converge, digests, listing, plan_file

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


def test_restore_refuses_a_snapshot_it_does_not_have_and_a_changed_set_of_macs(make_sim):
    sim = make_sim(nodes=1, topology="line")
    missing = sim.cli("restore", "nothing-saved", check=False)
    assert missing.returncode == 2, missing.stderr
    sim.cli("snapshot")
    sim.cli("add", "sn-new")
    changed = sim.cli("restore", check=False)
    assert changed.returncode == 2, changed.stderr
    assert json.loads((sim.dir / "state.json").read_text())["nodes"].keys() == {"mini-1", "sn-new"}

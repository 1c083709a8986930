"""macsim lifecycle: up, plain ssh, reboot semantics, cables, and a down that leaves nothing."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from simlib import mlx_fleet

pytestmark = pytest.mark.sim


def _traces(prefix: str, index: int, sim_dir: Path) -> list[str]:
    """Everything of cluster `index` that could outlive it on the host."""
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"netns {line.split()[0]}" for line in netns.splitlines() if line.startswith(f"{prefix}-")]
    links = json.loads(subprocess.run(["ip", "-j", "link"], capture_output=True, text=True).stdout)
    found += [f"link {l['ifname']}" for l in links if l["ifname"] == f"{prefix}br" or l["ifname"].startswith(f"m{index}n")]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            mounts = (proc / "mountinfo").read_text()
        except OSError:
            continue
        if str(sim_dir) in cmdline or str(sim_dir) in mounts:
            found.append(f"process {proc.name}: {cmdline[:80]}")
    found += [f"ssh drop-in {p}" for p in Path("/etc/ssh/ssh_config.d").glob("mlx-fleet-sim-*")
              if str(sim_dir) in p.read_text()]
    if Path(f"/run/mlx-fleet-sim/cluster-{index}.json").exists():
        found.append("registry entry")
    if (sim_dir / "nodes").exists() or (sim_dir / "state.json").exists():
        found.append("node folders or state in the sim folder")
    return found


def test_up_gives_ssh_reachable_macs_with_host_key_checking(make_sim):
    sim = make_sim(nodes=3)
    assert sim.nodes == ["mini-1", "mini-2", "mini-3"]
    group = sim.inventory["all"]["children"]["mlx_cluster"]
    assert group["vars"]["ansible_python_interpreter"] == "/usr/bin/python3"
    for node in sim.nodes:
        out = sim.ssh(node, "sw_vers -productVersion; hostname; id -un; sudo -n id -u").stdout.split()
        assert out == ["26.2", f"{node}.local", "admin", "0"]
    # Host keys are pinned: a wrong key in known_hosts must be refused.
    known = sim.dir / "known_hosts"
    lines = known.read_text().splitlines()
    other_key = lines[1].split(" ", 1)[1]
    known.write_text("\n".join([lines[0].split(" ", 1)[0] + " " + other_key] + lines[1:]) + "\n")
    refused = sim.ssh("mini-1", "true", check=False)
    assert refused.returncode == 255
    assert "HOST IDENTIFICATION HAS CHANGED" in refused.stderr or "Host key verification failed" in refused.stderr


def test_each_mac_has_its_own_disk(make_sim):
    sim = make_sim(nodes=2)
    sim.ssh("mini-1", "sudo mkdir -p /opt/only-on-1 && touch ~/marker /tmp/mlx-fleet-only-on-1")
    # test's exit status: 0 there, 1 absent (ssh's own failure, 255, fails both); /tmp too: two Macs staging the
    # same path there (as verify does) must not meet
    made = ("/opt/only-on-1", "~/marker", "/tmp/mlx-fleet-only-on-1")
    assert [sim.ssh("mini-2", f"test -e {path}", check=False).returncode for path in made] == [1, 1, 1]
    assert [sim.ssh("mini-1", f"test -e {path}", check=False).returncode for path in made] == [0, 0, 0]
    assert sim.cli("exec", "mini-1", "--", "ls", "/tmp").stdout == "mlx-fleet-only-on-1\n"  # its console's /tmp
    assert sim.ssh("mini-1", "stat -c %a /tmp").stdout == "1777\n"
    assert not Path("/opt/only-on-1").exists() and not Path("/tmp/mlx-fleet-only-on-1").exists()


def test_reboot_keeps_networksetup_settings_and_drops_ifconfig_ones(make_sim):
    sim = make_sim(nodes=2, topology="line")
    node = "mini-1"
    sim.ssh(node, "sudo networksetup -setnetworkserviceenabled 'Thunderbolt Bridge' off")
    sim.ssh(node, "sudo networksetup -createnetworkservice 'Thunderbolt 1' 'Thunderbolt 1'", check=False)
    sim.ssh(node, "sudo networksetup -setmanual 'Thunderbolt 1' 192.168.7.1 255.255.255.252")
    sim.ssh(node, "sudo ifconfig en3 inet 192.168.8.1 netmask 255.255.255.252; touch /tmp/gone-after-reboot")
    assert "inet 192.168.7.1 " in sim.ssh(node, "ifconfig en2").stdout
    assert "inet 192.168.8.1 " in sim.ssh(node, "ifconfig en3").stdout

    sim.cli("reboot", node)

    assert "inet 192.168.7.1 " in sim.ssh(node, "ifconfig en2").stdout
    assert "192.168.8.1" not in sim.ssh(node, "ifconfig en3").stdout
    assert "status: inactive" in sim.ssh(node, "ifconfig bridge0").stdout
    assert sim.ssh(node, "ipconfig getifaddr en2").stdout.strip() == "192.168.7.1"
    assert sim.ssh(node, "ls -A /tmp").stdout == ""  # macOS empties /tmp at startup


def test_unplug_and_plug_change_what_the_macs_report(make_sim):
    sim = make_sim(nodes=2, topology="line")
    def peers(node):
        data = json.loads(sim.ssh(node, "system_profiler SPThunderboltDataType -json").stdout)
        return {
            bus["receptacle_1_tag"]["receptacle_id_key"]: [i.get("domain_uuid_key") for i in bus.get("_items", [])]
            for bus in data["SPThunderboltDataType"]
        }
    before = peers("mini-1")
    assert before["1"] and not before["2"] and not before["3"]
    sim.cli("unplug", "mini-2:1")
    assert peers("mini-1")["1"] == []
    sim.cli("plug", "mini-1:3", "mini-2:2")
    after = peers("mini-1")
    assert after["1"] == [] and len(after["3"]) == 1
    plugged_twice = sim.cli("plug", "mini-1:3", "mini-2:3", check=False)
    assert plugged_twice.returncode == 2 and "mini-1:3" in plugged_twice.stderr.split()  # the port in use
    assert len(peers("mini-1")["3"]) == 1  # still the one cable


def test_recovery_is_the_only_way_to_enable_rdma(make_sim):
    sim = make_sim(nodes=2, rdma="none")
    refused = sim.ssh("mini-1", "sudo rdma_ctl enable", check=False)
    assert refused.returncode != 0
    assert sim.ssh("mini-1", "rdma_ctl status").stdout.strip() == "disabled"
    assert sim.cli("recovery", "mini-1", "--", "rdma_ctl", "enable").returncode == 0
    assert "recovery" in sim.cli("status").stdout
    sim.cli("reboot", "mini-1")
    assert sim.ssh("mini-1", "rdma_ctl status").stdout.strip() == "enabled"
    assert "rdma_en2" in sim.ssh("mini-1", "ibv_devices").stdout
    assert sim.ssh("mini-2", "rdma_ctl status").stdout.strip() == "disabled"


def test_down_leaves_no_trace(make_sim, tmp_path):
    sim = make_sim(nodes=2)
    index = sim.state()["index"]
    # What a host reboot leaves: a drop-in in /etc whose cluster (registry under /run) is gone.
    stale = Path("/etc/ssh/ssh_config.d/mlx-fleet-sim-9999999999-249.conf")
    stale.write_text(f"# mlx-fleet sim cluster in {tmp_path}\nInclude {tmp_path / 'ssh_config'}\n")
    own = Path(sim.state()["ssh_drop_in"])
    sim.cli("status")
    assert not stale.exists() and own.exists()
    sim.cli("down")
    assert _traces(f"mfs{index}", index, sim.dir) == []
    assert subprocess.run(["ssh", "-G", "mini-1"], capture_output=True, text=True).stdout.count("mfs") == 0


@pytest.mark.alone  # it takes the next free cluster index for its own
def test_failed_up_cleans_up_after_itself():
    import tempfile

    sim_dir = Path(tempfile.mkdtemp(prefix="mlx-fleet-sim-", dir="/var/tmp"))
    registry = Path("/run/mlx-fleet-sim")
    taken = {int(p.stem.split("-")[1]) for p in registry.glob("cluster-*.json")} if registry.exists() else set()
    index = min(set(range(1, 251)) - taken)
    # Something else already holds the third Mac's namespace name: up fails half-way through.
    subprocess.run(["ip", "netns", "add", f"mfs{index}-mini-3"], check=True)
    try:
        failed = mlx_fleet("sim", "up", "--dir", str(sim_dir), "--nodes", "3", check=False)
        assert failed.returncode == 2
        assert "mfs" in failed.stderr and "mini-3" in failed.stderr
        assert _traces(f"mfs{index}", index, sim_dir) == []
    finally:
        subprocess.run(["ip", "netns", "del", f"mfs{index}-mini-3"], capture_output=True)
        sim_dir.rmdir()  # empty: the failed up removed what it made


def test_a_cluster_folder_others_could_write_is_refused():
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="mlx-fleet-sim-", dir="/var/tmp"))
    try:
        os.chown(folder, 65534, 65534)
        foreign = mlx_fleet("sim", "up", "--dir", str(folder), "--nodes", "1", check=False)
        assert foreign.returncode == 2 and foreign.stderr.count("\n") == 1
        assert str(folder) in foreign.stderr and "uid 65534" in foreign.stderr
        os.chown(folder, 0, 0)
        folder.chmod(0o777)
        open_to_all = mlx_fleet("sim", "status", "--dir", str(folder), check=False)
        assert open_to_all.returncode == 2 and str(folder) in open_to_all.stderr and "0777" in open_to_all.stderr
        assert list(folder.iterdir()) == []
    finally:
        shutil.rmtree(folder)

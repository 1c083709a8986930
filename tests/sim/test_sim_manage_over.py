"""Macs managed over a Thunderbolt cable (sim up --manage-over) and a management link going down (sim link)."""

from __future__ import annotations

import re
import subprocess

import pytest

from simlib import Sim

pytestmark = pytest.mark.sim


@pytest.fixture(scope="module")
def sim():
    # mini-1 over its Thunderbolt Bridge (the controller's cable in its free port 3), mini-2 over
    # Thunderbolt port 3 (en4) with a service of its own, mini-3 over en0 as usual.
    cluster = Sim(nodes=3, topology="line", manage_over=["mini-1=bridge0", "mini-2=tb:3"])
    yield cluster
    cluster.down()


def _reachable(sim, node: str) -> bool:
    argv = ["ssh", "-F", str(sim.dir / "ssh_config"), "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", node, "true"]
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


def test_each_mac_sees_the_controller_arrive_on_its_management_interface(sim):
    expected = {"mini-1": ("bridge0", "10.214."), "mini-2": ("en4", "10.214."), "mini-3": ("en0", "10.213.")}
    config = (sim.dir / "ssh_config").read_text()
    for node, (interface, network) in expected.items():
        address = re.search(rf"Host {node}\n  HostName (\S+)", config).group(1)
        assert address.startswith(network)
        session = sim.ssh(node, "echo $SSH_CONNECTION; route -n get $(echo $SSH_CONNECTION | cut -d' ' -f1)",
                          own_config=True).stdout
        client, _, server, _ = session.split("\n")[0].split()
        assert server == address
        assert re.search(rf"^destination: {re.escape(client)}\n  interface: {interface}\n", session, re.M), session
        assert f"\tinet {address} netmask 0xffffff00 " in sim.ssh(node, f"ifconfig {interface}", own_config=True).stdout
    # The cable's far end is the controller, a Mac that is not in the cluster.
    ports = sim.ssh("mini-1", "system_profiler SPThunderboltDataType", own_config=True).stdout
    assert ports.count("MacBook Pro:") == 1
    services = sim.ssh("mini-2", "networksetup -getinfo 'Thunderbolt 3'", own_config=True).stdout
    assert services.startswith("Manual Configuration\nIP address: 10.214.")


def test_a_mac_managed_over_thunderbolt_still_answers_on_ethernet(sim):
    # Its inventory can point ansible_host there instead: the way out the fabric's lockout check names.
    for node in ("mini-1", "mini-2"):
        ethernet = sim.profile(node)["management"]
        session = subprocess.run(
            ["ssh", "-F", str(sim.dir / "ssh_config"), "-o", "BatchMode=yes", ethernet["ip"],
             "echo $SSH_CONNECTION; route -n get $(echo $SSH_CONNECTION | cut -d' ' -f1)"],
            capture_output=True, text=True, timeout=30)
        assert session.returncode == 0, session.stderr
        client, _, server, _ = session.stdout.split("\n")[0].split()
        assert server == ethernet["ip"]
        assert re.search(rf"^destination: {re.escape(client)}\n  interface: {ethernet['device']}\n", session.stdout,
                         re.M), session.stdout


def test_the_controllers_port_takes_no_other_cable(sim):
    refused = sim.cli("plug", "mini-1:3", "mini-3:2", check=False)
    # The port, and the option that gave it to the controller.
    assert refused.returncode == 2 and "mini-1:3" in refused.stderr.split() and "(--manage-over);" in refused.stderr


def test_turning_off_the_thunderbolt_bridge_cuts_off_a_mac_managed_over_it(sim):
    sim.cli("exec", "mini-1", "--", "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "off")
    assert not _reachable(sim, "mini-1")
    assert _reachable(sim, "mini-2")  # its port has a service of its own
    sim.cli("exec", "mini-1", "--", "networksetup", "-setnetworkserviceenabled", "Thunderbolt Bridge", "on")
    assert _reachable(sim, "mini-1")


def test_a_management_link_down_leaves_the_mac_running(sim):
    sim.cli("link", "mini-3", "down")
    assert sim.state()["nodes"]["mini-3"]["link"] == "down"
    assert not _reachable(sim, "mini-3")
    status = sim.cli("status").stdout
    assert re.search(r"^mini-3 +\S+ +running +\S+ +en0 down ", status, re.M), status
    assert "status: inactive" in sim.cli("exec", "mini-3", "--", "ifconfig", "en0").stdout
    sim.cli("reboot", "mini-3")  # a Mac restarts without its network too
    sim.cli("link", "mini-3", "up")
    assert _reachable(sim, "mini-3")

    sim.cli("link", "mini-1", "down")  # the controller's Thunderbolt cable pulled
    assert "MacBook Pro:" not in sim.cli("exec", "mini-1", "--", "system_profiler", "SPThunderboltDataType").stdout
    assert not _reachable(sim, "mini-1")
    sim.cli("link", "mini-1", "up")
    assert _reachable(sim, "mini-1")

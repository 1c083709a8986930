"""mlx_fleet.cluster.thunderbolt_network against simulated Macs: both ends of a cable addressed
through networksetup, traffic over the cable, idempotence, check mode, a reboot, state=absent."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from simlib import MLX_FLEET, Sim

pytestmark = pytest.mark.sim

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
MODULE = "mlx_fleet.cluster.thunderbolt_network"
RECORD = "/Library/Application Support/mlx-fleet/thunderbolt-network.json"
ADDRESS = {"mini-1": "192.168.77.1", "mini-2": "192.168.77.2"}
PEER = {"mini-1": "mini-2", "mini-2": "mini-1"}


def run_module(sim, host: str, args: dict, *flags: str, ok: bool = True) -> dict:
    """The module on one host through `ansible` ad hoc (become), its result as a dict."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="oneline", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    argv = [str(BIN / "ansible"), "-i", str(sim.dir / "inventory.yml"), host, "-b", "-m", MODULE,
            "-a", json.dumps(args), *flags]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert (proc.returncode == 0) == ok, f"{' '.join(argv)}\n{proc.stdout}\n{proc.stderr}"
    head, _, body = proc.stdout.partition(f"{host} | ")
    status, _, text = body.partition(" => ")
    result = json.loads(text)
    result["_status"], result["_diff_text"] = status.strip(), head
    return result


def port_args(sim, host: str, **extra) -> dict:
    en = sim.device(host, 1)
    return dict({"ports": [{"device": en, "hardware_port": "Thunderbolt 1", "address": ADDRESS[host],
                            "peer": ADDRESS[PEER[host]]}]}, **extra)


def node(sim, host: str, command: str, check: bool = True) -> str:
    return sim.cli("exec", host, "--", "sh", "-c", command, check=check).stdout


def network_state(sim, host: str) -> str:
    """Everything the module could change, as the node's own tools report it."""
    return node(sim, host, "networksetup -listnetworkserviceorder; ifconfig; ls -aR /Library")


SERVER = """
import socket
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(({ip!r}, 47000))
l.listen(1)
l.settimeout(30)
c, peer = l.accept()
c.sendall(c.recv(64)[::-1])
print(peer[0])
"""
CLIENT = """
import socket, time
for _ in range(100):
    try:
        s = socket.create_connection(({ip!r}, 47000), timeout=5)
        break
    except ConnectionRefusedError:
        time.sleep(0.1)
s.sendall(b"over the cable")
print(s.getsockname()[0], s.recv(64).decode())
"""


def round_trip(sim, server: str, client: str) -> None:
    """A TCP echo from client to server's cable address: the reply comes back over the cable."""
    listen = subprocess.Popen([MLX_FLEET, "sim", "exec", "--dir", str(sim.dir), server, "--", "python3", "-c",
                               SERVER.format(ip=ADDRESS[server])], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        reply = sim.cli("exec", client, "--", "python3", "-c", CLIENT.format(ip=ADDRESS[server])).stdout.split()
        out, err = listen.communicate(timeout=60)
    finally:
        if listen.poll() is None:
            listen.kill()
    assert reply[0] == ADDRESS[client] and " ".join(reply[1:]) == "elbac eht revo", reply
    assert out.strip() == ADDRESS[client], err


def assert_configured(sim, host: str) -> None:
    en = sim.device(host, 1)
    assert f"inet {ADDRESS[host]} netmask 0xfffffffc broadcast" in node(sim, host, f"ifconfig {en}")
    assert f"interface: {en}" in node(sim, host, f"route -n get {ADDRESS[PEER[host]]}")
    bridge = node(sim, host, "ifconfig bridge0")
    assert "<UP" not in bridge.splitlines()[0] and "status: inactive" in bridge  # down: forwards nothing
    assert "(*) Thunderbolt Bridge\n" in node(sim, host, "networksetup -listnetworkserviceorder")


def test_both_ends_of_a_cable_persist_across_a_reboot_and_come_off_again(make_sim):
    sim = make_sim(nodes=2, topology="line")
    hosts = sim.nodes
    assert hosts == ["mini-1", "mini-2"]

    # Check mode on a fresh node: says what it would do, changes nothing.
    before = network_state(sim, "mini-1")
    dry = run_module(sim, "mini-1", port_args(sim, "mini-1"), "--check", "--diff")
    assert dry["changed"] is True and dry["_status"] == "CHANGED"
    assert dry["commands"] == [["-setnetworkserviceenabled", "Thunderbolt Bridge", "off"],
                               ["-createnetworkservice", "Thunderbolt 1", "Thunderbolt 1"],
                               ["-setmanual", "Thunderbolt 1", "192.168.77.1", "255.255.255.252"],
                               # the new service goes last in the order, wherever macOS put it
                               ["-ordernetworkservices", "Ethernet", "Wi-Fi", "Thunderbolt Bridge", "Thunderbolt 1"]]
    assert "+ipv4: Manual 192.168.77.1 mask 255.255.255.252 router none" in dry["_diff_text"]
    assert "-service: absent" in dry["_diff_text"]
    assert network_state(sim, "mini-1") == before

    for host in hosts:
        result = run_module(sim, host, port_args(sim, host))
        assert result["changed"] is True and result["services"][0]["created"] is True
    for host in hosts:
        assert_configured(sim, host)
    round_trip(sim, "mini-1", "mini-2")
    round_trip(sim, "mini-2", "mini-1")

    # Idempotent: a second run (in check mode too) changes nothing.
    for host in hosts:
        again = run_module(sim, host, port_args(sim, host))
        assert again["changed"] is False and again["commands"] == [], again
        assert run_module(sim, host, port_args(sim, host), "--check")["changed"] is False

    # Persistent: after a reboot of both Macs, no re-run needed.
    for host in hosts:
        sim.cli("reboot", host)
    for host in hosts:
        assert_configured(sim, host)
    round_trip(sim, "mini-2", "mini-1")
    assert run_module(sim, "mini-1", port_args(sim, "mini-1"))["changed"] is False

    # state=absent puts the network back: services removed, bridge on, record gone.
    for host in hosts:
        gone = run_module(sim, host, {"state": "absent"}, "--diff")
        assert gone["changed"] is True
        assert gone["commands"] == [["-removenetworkservice", "Thunderbolt 1"],
                                    ["-setnetworkserviceenabled", "Thunderbolt Bridge", "on"]]
        assert run_module(sim, host, {"state": "absent"})["changed"] is False
        services = node(sim, host, "networksetup -listallnetworkservices")
        assert "Thunderbolt 1" not in services and "*Thunderbolt Bridge" not in services
        assert "inet " not in node(sim, host, f"ifconfig {sim.device(host, 1)}")
        assert node(sim, host, f"test -e '{RECORD}' && echo kept || echo gone").strip() == "gone"
    sim.cli("reboot", "mini-1")
    assert "<UP" in node(sim, "mini-1", "ifconfig bridge0").splitlines()[0]


@pytest.fixture(scope="module")
def one_mac():
    """One Mac for the tests that configure a single port: each compares the Mac with itself before and after."""
    sim = Sim(nodes=1)
    yield sim
    sim.down()


def test_a_service_that_existed_before_gets_its_configuration_back(one_mac):
    sim = one_mac
    en = sim.device("mini-1", 2)
    node(sim, "mini-1", "networksetup -createnetworkservice 'Thunderbolt 2' 'Thunderbolt 2' && "
                        "networksetup -setmanual 'Thunderbolt 2' 10.9.0.1 255.255.255.0 && "
                        "networksetup -setadditionalroutes 'Thunderbolt 2' 10.10.0.0 255.255.0.0 10.9.0.254 && "
                        "networksetup -setnetworkserviceenabled 'Thunderbolt 2' off")
    original = node(sim, "mini-1", "networksetup -getinfo 'Thunderbolt 2'; networksetup -getadditionalroutes "
                                   "'Thunderbolt 2'; networksetup -listnetworkserviceorder")
    port = {"device": en, "hardware_port": "Thunderbolt 2", "address": "192.168.80.1", "peer": "192.168.80.2"}
    result = run_module(sim, "mini-1", {"ports": [port], "bridge": "unchanged"})
    assert result["commands"] == [["-setmanual", "Thunderbolt 2", "192.168.80.1", "255.255.255.252"],
                                  ["-setnetworkserviceenabled", "Thunderbolt 2", "on"]]  # 10.10/16 kept
    record = json.loads(node(sim, "mini-1", f"cat '{RECORD}'"))
    assert record["previous"]["Thunderbolt 2"]["ipv4"]["address"] == "10.9.0.1" and record["created"] == {}
    assert "inet 192.168.80.1 " in node(sim, "mini-1", f"ifconfig {en}")

    gone = run_module(sim, "mini-1", {"state": "absent", "bridge": "unchanged"})
    assert gone["changed"] is True
    assert node(sim, "mini-1", "networksetup -getinfo 'Thunderbolt 2'; networksetup -getadditionalroutes "
                               "'Thunderbolt 2'; networksetup -listnetworkserviceorder") == original
    assert "Thunderbolt Bridge" in node(sim, "mini-1", "networksetup -listallnetworkservices")


def test_a_port_the_mac_does_not_have_is_named_with_the_fix(one_mac):
    sim = one_mac
    port = {"device": "en5", "hardware_port": "Thunderbolt 4", "address": "192.168.77.1", "peer": "192.168.77.2"}
    before = network_state(sim, "mini-1")
    failed = run_module(sim, "mini-1", {"ports": [port]}, ok=False)
    assert failed["msg"] == ("Thunderbolt 4 (en5): this Mac has no hardware port 'Thunderbolt 4' (its Thunderbolt "
                             "ports: Thunderbolt 1 = en2, Thunderbolt 2 = en3, Thunderbolt 3 = en4); fix the cable "
                             "plan (mlx_fleet_cables) or the host's model so it names a port this Mac has")
    assert network_state(sim, "mini-1") == before

"""The network doubles against real iproute2 in a throwaway network namespace (root only)."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from mlx_fleet.sim import doubles

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and iproute2")
DISPATCH = str(doubles.HERE / "dispatch.py")


@pytest.fixture
def netns(tmp_path):
    name = f"dbltest-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for dev, peer in (("en0", "p0"), ("en2", "p2")):
            subprocess.run(["ip", "-n", name, "link", "add", dev, "type", "veth", "peer", "name", peer], check=True)
            subprocess.run(["ip", "-n", name, "link", "set", peer, "up"], check=True)
        subprocess.run(["ip", "-n", name, "link", "add", "bridge0", "type", "bridge"], check=True)
        node = {
            "name": "mini-9", "model": "mini-m4-pro", "model_name": "Mac mini", "model_id": "Mac16,11",
            "chip": "Apple M4 Pro", "cpu_cores": "14 (10 performance and 4 efficiency)", "memory_gb": 64,
            "serial": "S", "hardware_uuid": "U", "provisioning_udid": "P", "os_version": "26.2", "os_build": "25C56",
            "boot_rom": "1", "rdma_enabled": True, "in_recovery": False,
            "interfaces": [{"hardware_port": "Ethernet", "device": "en0", "mac": "3c:a6:f6:00:00:01", "management": True},
                           {"hardware_port": "Thunderbolt 1", "device": "en2", "mac": "36:4d:04:ea:4e:40"}],
            "management": {"device": "en0", "ip": "10.213.9.11", "prefix": 24, "router": "10.213.9.1"},
            "thunderbolt": [{"receptacle": 1, "bus": 0, "device": "en2", "domain_uuid": "D", "switch_uid": "0x1",
                             "generation": 5, "rdma_ok": True, "link": None}],
        }
        path = tmp_path / "usr/local/libexec/macsim/node.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(node))

        def run(tool, *args):
            return subprocess.run(["ip", "netns", "exec", name, sys.executable, DISPATCH, tool, *args],
                                  env=dict(os.environ, MACSIM_ROOT=str(tmp_path)), capture_output=True, text=True)

        yield run
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def test_boot_and_mlx_setup_on_real_interfaces(netns):
    assert netns("boot").returncode == 0
    assert netns("ipconfig", "getifaddr", "en0").stdout == "10.213.9.11\n"
    assert "    gateway: 10.213.9.1\n  interface: en0\n" in netns("route", "-n", "get", "8.8.8.8").stdout
    assert "\tstatus: active\n" in netns("ifconfig", "en2").stdout
    assert netns("ifconfig", "bridge0", "down").returncode == 0
    assert netns("ifconfig", "en2", "inet", "192.168.0.1", "netmask", "255.255.255.252").returncode == 0
    change = netns("route", "change", "192.168.0.2", "-interface", "en2")
    assert (change.returncode, change.stdout) == (0, "change host 192.168.0.2: gateway en2\n"), change.stderr
    shown = netns("ifconfig", "en2").stdout
    assert "\tinet 192.168.0.1 netmask 0xfffffffc broadcast 192.168.0.3\n" in shown
    assert netns("ifconfig", "bridge0").stdout.startswith("bridge0: flags=8822<BROADCAST,SMART,SIMPLEX,MULTICAST> mtu 1500\n")

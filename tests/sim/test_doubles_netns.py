"""The network doubles against real iproute2 in a throwaway network namespace (root only)."""

import os
import shutil

import pytest


pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip"), reason="needs root and iproute2")


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

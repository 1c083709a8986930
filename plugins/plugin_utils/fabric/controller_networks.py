"""What the controller (the machine running mlx-fleet) knows about itself: its own IPv4 networks,
which the Thunderbolt address pool must stay clear of."""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess

from ansible_collections.mlx_fleet.cluster.plugins.module_utils.macos_parsers import parse_ifconfig

READ_TIMEOUT = 10  # seconds; reading local interfaces never needs the network


def parse_ip_addr_json(text: str) -> list[tuple[str, ipaddress.IPv4Interface]]:
    """`ip -j -4 addr show` (iproute2, a Linux controller) -> [(interface, address/prefix)]."""
    return [(link["ifname"], ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}"))
            for link in json.loads(text or "[]") for info in link.get("addr_info", [])
            if info.get("family") == "inet"]


def parse_ifconfig_networks(text: str) -> list[tuple[str, ipaddress.IPv4Interface]]:
    """`ifconfig` (a Mac controller) -> [(interface, address/prefix)]."""
    return [(name, ipaddress.IPv4Interface(f"{inet['address']}/{inet['prefixlen']}"))
            for name, interface in parse_ifconfig(text).items() for inet in interface["inet"]]


def controller_networks() -> list[tuple[str, ipaddress.IPv4Interface]]:
    """This machine's IPv4 addresses with their prefixes, loopback left out; empty when neither
    `ip` nor `ifconfig` can say (the pool is then checked against the Macs' addresses only)."""
    for tool, argv, parse in (("ip", ["-j", "-4", "addr", "show"], parse_ip_addr_json),
                              ("ifconfig", [], parse_ifconfig_networks)):
        path = shutil.which(tool)
        if path is None:
            continue
        try:
            done = subprocess.run([path, *argv], capture_output=True, text=True, timeout=READ_TIMEOUT, check=True)
            found = parse(done.stdout)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError):
            continue
        return [(name, address) for name, address in found if not address.is_loopback]
    return []

"""The node's live network state, through iproute2 (``MACSIM_IP`` overrides the binary)."""

import ipaddress
import json
import os
import subprocess

from .state import Fail


def ip(*args: str) -> str:
    binary = os.environ.get("MACSIM_IP", "ip")
    proc = subprocess.run([binary, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetError(proc.stderr.strip())
    return proc.stdout


class NetError(Fail):
    def __init__(self, message: str):
        super().__init__(message, 1)


def _json(*args: str) -> list:
    text = ip("-j", *args)
    return json.loads(text) if text.strip() else []


def links() -> list[dict]:
    """Every interface with its addresses and link details (``ip -j -d addr show``)."""
    return _json("-d", "addr", "show")


def link(name: str) -> dict | None:
    return next((l for l in links() if l["ifname"] == name), None)


def routes() -> list[dict]:
    return _json("route", "show")


def neighbours() -> list[dict]:
    """The ARP table with each entry's age in seconds (``confirmed``)."""
    return _json("-s", "neigh", "show")


def ipv4(entry: dict) -> list[dict]:
    return [a for a in entry.get("addr_info", []) if a.get("family") == "inet"]


def is_up(entry: dict) -> bool:
    return "UP" in entry.get("flags", [])


def has_carrier(entry: dict) -> bool:
    # A veth whose peer sits in an empty patch-panel bridge, or nowhere, has no carrier.
    return is_up(entry) and "NO-CARRIER" not in entry.get("flags", []) and entry.get("operstate") != "DOWN"


def set_up(name: str, up: bool) -> None:
    ip("link", "set", name, "up" if up else "down")


def add_address(name: str, address: str, prefix: int) -> None:
    net = ipaddress.IPv4Network(f"{address}/{prefix}", strict=False)
    ip("addr", "replace", f"{address}/{prefix}", "broadcast", str(net.broadcast_address), "dev", name)


def del_address(name: str, address: str, prefix: int) -> None:
    ip("addr", "del", f"{address}/{prefix}", "dev", name)


def flush_ipv4(name: str) -> None:
    ip("-4", "addr", "flush", "dev", name)


def route_cidr(route: dict) -> ipaddress.IPv4Network | None:
    dst = route.get("dst", "")
    if dst == "default":
        return ipaddress.IPv4Network("0.0.0.0/0")
    try:
        return ipaddress.IPv4Network(dst if "/" in dst else dst + "/32")
    except ValueError:
        return None  # IPv6 or something iproute2 names (e.g. "multicast")


def lookup(dest: str) -> dict | None:
    """The route the kernel would use for ``dest``: the longest matching prefix."""
    addr = ipaddress.IPv4Address(dest)
    best = None
    for r in routes():
        cidr = route_cidr(r)
        if cidr is not None and addr in cidr and (best is None or cidr.prefixlen > best[0].prefixlen):
            best = (cidr, r)
    return best[1] if best else None

"""The node's boot: what launchd, configd and the kernel do when a Mac starts.

Run as root by the sim controller inside the node's namespaces, at first boot and
after every simulated reboot (the controller has flushed addresses and wiped the
run directory). It brings the ports up, gives the management port its DHCP lease,
applies every enabled network service, sets bridge0 from the Thunderbolt Bridge
service, names the host and starts RunAtLoad LaunchDaemons. With --resume (a restored snapshot: run/
and the addresses are as saved) it only names the host and joins bridge0's data-path ports again.
"""

import os
import socket
import sys
import time

from . import ifconfig, launchctl, names, net, services, state
from .state import Fail


def main(argv: list[str]) -> int:
    if not state.is_root():
        raise Fail("boot: must be run as root\n", 77)
    if argv[:1] == ["--resume"]:  # restored from a snapshot (sim restore): the kernel's state is as saved
        ifconfig.set_bridge_members(ifconfig.bridge_members())  # the ports that really join bridge0, as saved
        _set_hostname(names.get("LocalHostName"))
        return 0
    node = state.node()
    now = time.time()
    state.save_runtime("boottime", [int(now), int(now % 1 * 1e6)])  # kern.boottime; run/ is wiped at reboot
    for port in node["interfaces"]:
        if net.link(port["device"]) is not None:
            net.set_up(port["device"], True)
    all_services = services.load()
    bridge = next((s for s in all_services if s["device"] == "bridge0"), None)
    # configd enslaves the Thunderbolt ports only while the Thunderbolt Bridge service is on.
    ifconfig.set_bridge_members(state.thunderbolt_devices() if bridge and bridge["enabled"] else [])
    if bridge is None and net.link("bridge0") is not None:
        net.set_up("bridge0", False)  # no service: nothing brings the bridge up
    for service in all_services:
        services.apply(service)
    _set_hostname(names.get("LocalHostName"))
    daemons = state.path(state.LAUNCH_DAEMONS)
    if node.get("filevault_locked"):  # at the FileVault login window: the data volume's jobs wait
        return 0
    for plist in sorted(n for n in os.listdir(daemons) if n.endswith(".plist")) if os.path.isdir(daemons) else []:
        try:
            launchctl.load("/" + os.path.relpath(os.path.join(daemons, plist), state.root()))
        except Fail as e:
            sys.stderr.write(f"boot: {plist}: {e.message}")
    return 0


def _set_hostname(name: str | None) -> None:
    # The controller boots nodes in a private UTS namespace; under a test MACSIM_ROOT the
    # boot runs on the host itself, whose name must never change.
    if name and state.root() == "/":
        socket.sethostname(name)

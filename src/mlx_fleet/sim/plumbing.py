"""The simulated cluster's network plumbing: namespaces, veths and bridges.

A node is network namespace `mfs<K>-NAME`; its management interface (en0) is a veth to the bridge
`mfs<K>br`; each Thunderbolt port enX is a veth whose far end waits in the patch-panel namespace
`mfs<K>-patch`, where a cable is a bridge joining two far ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal


from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, Port
from mlx_fleet.sim.host import run
from mlx_fleet.sim.state import ClusterState


class Plumbing(ClusterState):
    """Names of the cluster's namespaces and links, and the `ip` commands that make and remove them."""

    @property
    def prefix(self) -> str:
        return f"mfs{self.index}"

    def ns(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    @property
    def patch_ns(self) -> str:
        return f"{self.prefix}-patch"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def controller_bridge(self) -> str:
        """The host's end of the Thunderbolt cables of nodes managed over Thunderbolt (10.214.K.1/24)."""
        return f"{self.prefix}tb"

    def _patch_end(self, port: Port) -> str:
        return f"m{self.index}n{self._rank(port.host)}p{port.receptacle}"

    def _cable_bridge(self, cable: Cable) -> str:
        low = cable.key[0]
        return f"c{self._rank(low.host)}p{low.receptacle}"

    def _make_links(self, name: str, profile: dict) -> None:
        """The node's namespace and interfaces: en0 on the management bridge, the other Ethernet and
        Wi-Fi connected to nothing, bridge0, and each Thunderbolt port's veth to the patch panel."""
        ns, rank = self.ns(name), self._rank(name)
        run(["ip", "netns", "add", ns])
        mgmt = profile["management"]
        host_end = f"m{self.index}n{rank}e"
        run(["ip", "link", "add", host_end, "type", "veth", "peer", "name", mgmt["device"], "netns", ns])
        run(["ip", "link", "set", host_end, "master", self.bridge, "up"])
        macs = {i["device"]: i["mac"] for i in profile["interfaces"]}
        run(["ip", "-n", ns, "link", "set", mgmt["device"], "address", macs[mgmt["device"]]])
        tb_devices = {p["device"] for p in profile["thunderbolt"]}
        for iface in profile["interfaces"]:
            device = iface["device"]
            if device == mgmt["device"] or device in tb_devices:
                continue
            # Wi-Fi or another Ethernet: present but connected to nothing, so inactive
            far = f"m{self.index}n{rank}{device}"
            run(["ip", "-n", ns, "link", "add", device, "address", iface["mac"],
                 "type", "veth", "peer", "name", far, "netns", self.patch_ns])
        run(["ip", "-n", ns, "link", "add", "bridge0", "address", profile["bridge_mac"], "type", "bridge"])
        for port in profile["thunderbolt"]:
            far = self._patch_end(Port(name, port["receptacle"]))
            run(["ip", "-n", ns, "link", "add", port["device"], "address", macs[port["device"]],
                 "type", "veth", "peer", "name", far, "netns", self.patch_ns])

    def _connect(self, cable: Cable) -> None:
        br = self._cable_bridge(cable)
        run(["ip", "-n", self.patch_ns, "link", "add", br, "type", "bridge"])
        run(["ip", "-n", self.patch_ns, "link", "set", br, "up"])
        for end in (cable.a, cable.b):
            far = self._patch_end(end)
            run(["ip", "-n", self.patch_ns, "link", "set", far, "master", br, "up"])

    def _disconnect(self, cable: Cable) -> None:
        for end in (cable.a, cable.b):
            run(["ip", "-n", self.patch_ns, "link", "set", self._patch_end(end), "nomaster", "down"])
        run(["ip", "-n", self.patch_ns, "link", "del", self._cable_bridge(cable)])
        self._limit(cable, None)

    def _limit(self, cable: Cable, mbit: int | None) -> None:
        """Hold the cable's data rate to MBIT megabits per second each way (a token bucket on both far ends), or
        lift the limit (None): a long copy rehearsed with small files, as a real copy of hundreds of GB behaves."""
        for end in (cable.a, cable.b):
            far = self._patch_end(end)
            run(["tc", "-n", self.patch_ns, "qdisc", "del", "dev", far, "root"], check=False)
            if mbit:
                run(["tc", "-n", self.patch_ns, "qdisc", "add", "dev", far, "root", "tbf", "rate", f"{mbit}mbit",
                     "burst", "64kb", "latency", "400ms"])

    def _cable_controller(self, name: str) -> None:
        """Plug the controller's Thunderbolt cable into NAME: the port's far end joins the host's bridge."""
        if not json.loads(run(["ip", "-j", "link", "show", self.controller_bridge], check=False).stdout or "[]"):
            run(["ip", "link", "add", self.controller_bridge, "type", "bridge"])
            run(["ip", "addr", "add", f"10.214.{self.index}.1/24", "dev", self.controller_bridge])
            run(["ip", "link", "set", self.controller_bridge, "up"])
        end = self._management_end(name)
        run(["ip", "-n", self.patch_ns, "link", "set", end, "netns", str(os.getpid())])
        run(["ip", "link", "set", end, "master", self.controller_bridge, "up"])

    def _management_end(self, name: str) -> str:
        """The host-side end of the link the controller manages NAME through."""
        plan = self.state["nodes"][name].get("manage_over")
        return self._patch_end(Port(name, plan["port"])) if plan else f"m{self.index}n{self._rank(name)}e"

    def _remove_network(self) -> None:
        """Every namespace and host link of the cluster, and the processes in them."""
        # Names are prefix-scanned too, so a half-built cluster leaves nothing behind.
        for ns in run(["ip", "netns", "list"]).stdout.split("\n"):
            ns = ns.split(" ")[0]
            if ns.startswith(f"{self.prefix}-"):
                self._kill_netns_processes(ns)
                run(["ip", "netns", "del", ns], check=False)
        links = json.loads(run(["ip", "-j", "link", "show"]).stdout)
        for link in links:
            if link["ifname"] in (self.bridge, self.controller_bridge) or link["ifname"].startswith(f"m{self.index}n"):
                run(["ip", "link", "del", link["ifname"]], check=False)

    def _kill_netns_processes(self, ns: str) -> None:
        for pid in run(["ip", "netns", "pids", ns], check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)

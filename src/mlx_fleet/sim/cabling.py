"""Thunderbolt cables of the simulated cluster: plug, unplug, the controller's link, and what each
node's ports then report."""

from __future__ import annotations

import uuid


from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, CablePlanError, Port, parse_cable, parse_cables, parse_port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS, link_speed
from mlx_fleet.sim.host import SimError, run
from mlx_fleet.sim.plumbing import Plumbing


class Cabling(Plumbing):
    """The cables between nodes (state "cables") and the ports' view of them."""

    def cables(self) -> list[Cable]:
        return [parse_cable(c) for c in self.state["cables"]]

    def _refresh_links(self) -> None:
        """Rewrite every node's view of its ports from the cables (what system_profiler reports)."""
        profiles = {name: self.profile(name) for name in self.state["nodes"]}
        ports = {(name, p["receptacle"]): p for name, prof in profiles.items() for p in prof["thunderbolt"]}
        for port in ports.values():
            port["link"] = None
        for cable in self.cables():
            options = self.state.get("cable_options", {}).get(str(cable), {})
            for here, there in ((cable.a, cable.b), (cable.b, cable.a)):
                peer = profiles[there.host]
                generations = (ports[(here.host, here.receptacle)]["generation"], ports[(there.host, there.receptacle)]["generation"])
                # Replayed Macs may be models the catalogue lacks: their ports' own generations decide.
                # A TB4 (or worse) cable, or a dock, holds the link at its own speed.
                speed = min(link_speed(*generations), options.get("speed", 80))
                mac = {
                    "name": peer["model_name"], "model_id": peer["model_id"],
                    "domain_uuid": ports[(there.host, there.receptacle)]["domain_uuid"],
                    "rdma_enabled": peer["rdma_enabled"],
                }
                ports[(here.host, here.receptacle)]["link"] = (
                    {"kind": "dock", "speed_gbps": min(speed, 40), "name": options["dock"],
                     "vendor": options["dock"].split()[0], "behind": mac}
                    if options.get("dock") else {"kind": "mac", "speed_gbps": speed, "peer": mac})
        for name, node in self.state["nodes"].items():
            plan = node.get("manage_over")
            if plan and node.get("link") != "down":
                port = ports[(name, plan["port"])]
                port["link"] = {"kind": "mac", "speed_gbps": link_speed(port["generation"]),
                                "peer": self._controller_peer()}
        for name, prof in profiles.items():
            self._write_profile(name, prof)

    def _controller_peer(self) -> dict:
        """The controller as a Mac at the far end of a Thunderbolt cable (a MacBook Pro)."""
        laptop = MODELS["macbook-pro-m4-max"]
        domain = uuid.uuid5(uuid.NAMESPACE_URL, f"macsim:{self.state['seed']}:controller")
        return {"name": laptop.model_name, "model_id": laptop.model_id, "domain_uuid": str(domain).upper(),
                "rdma_enabled": False}

    def _port_counts(self) -> dict[str, int]:
        return {name: port_count(self.profile(name)) for name in self.state["nodes"]}

    def unplug(self, end: str) -> Cable:
        self._require_up()
        port = _port_arg(end)
        self._require(port.host)
        self._refuse_controller_port(port)
        for cable in self.cables():
            if port in (cable.a, cable.b):
                self._disconnect(cable)
                self.state["cables"].remove(str(cable))
                self.state.get("cable_options", {}).pop(str(cable), None)
                self._save()
                self._refresh_links()
                return cable
        raise SimError(f"nothing is plugged into {port}")

    def _refuse_controller_port(self, port: Port) -> None:
        plan = self.state["nodes"].get(port.host, {}).get("manage_over")
        if plan and plan["port"] == port.receptacle:
            raise SimError(f"{port} holds the controller's cable (--manage-over); use: mlx-fleet sim link {port.host} down|up")

    def plug(self, a: str, b: str, speed: int | None = None, dock: str | None = None,
             rate: int | None = None) -> Cable:
        """Cable two ports; `speed` models a slower cable (40: a TB4 cable), `dock` a dock in between, `rate` holds
        the data the cable carries to RATE megabits per second (the sim's own: no macOS tool reports it)."""
        self._require_up()
        cable = parse_cables([f"{a} -- {b}"], self._port_counts())[0]
        for end in (cable.a, cable.b):
            self._refuse_controller_port(end)
        try:
            parse_cables(self.state["cables"] + [str(cable)])
        except CablePlanError as exc:
            raise SimError(str(exc)) from exc
        self._connect(cable)
        self._limit(cable, rate)
        self.state["cables"].append(str(cable))
        options = {k: v for k, v in (("speed", speed), ("dock", dock), ("rate_mbit", rate)) if v}
        if options:
            self.state.setdefault("cable_options", {})[str(cable)] = options
        self._save()
        self._refresh_links()
        return cable

    def set_link(self, name: str, up: bool) -> str:
        """Take the controller's link to NAME down (a pulled cable, a dead switch port) or up;
        returns what that link is."""
        self._require_up()
        node = self._require(name)
        run(["ip", "link", "set", self._management_end(name), "up" if up else "down"])
        node["link"] = "up" if up else "down"
        self._save()
        self._refresh_links()
        plan = node.get("manage_over")
        if plan:
            return f"{plan['interface']}, the controller's cable in Thunderbolt {plan['port']}"
        return self.profile(name)["management"]["device"]


def port_count(profile: dict) -> int:
    """The highest Thunderbolt receptacle number (the catalogue's port count for its models)."""
    return max((p["receptacle"] for p in profile["thunderbolt"]), default=0)


def _port_arg(text: str) -> Port:
    try:
        return parse_port(text)
    except CablePlanError as exc:
        raise SimError(str(exc)) from exc

"""Which Macs the converge's network step has anything to do on: thunderbolt_network planned on the controller
with the module's own code (module_utils.thunderbolt_services) from what each Mac's preflight read
(macos_facts' network: the fact mlx_fleet_network), so a converged Mac gets no module run. The module still
reads and compares again before it writes."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.module_utils import thunderbolt_services as services

# The network step's options besides the ports and the bridge (roles/mlx_fabric/tasks/network.yml).
STEP_OPTIONS = {"exclusive": True, "services_last": True}


def macs_that_differ(names: list[str], network: dict[str, list[dict]], read: dict[str, dict | None],
                     bridge: str) -> list[str]:
    """The Macs among NAMES whose network step (NETWORK: each Mac's ports, BRIDGE) would write anything, from
    READ: each Mac's mlx_fleet_network, None when not read (then it runs, and reads for itself)."""
    return [name for name in names if _differs(network.get(name, []), read.get(name), bridge)]


def _differs(ports: list[dict], mac: dict | None, bridge: str) -> bool:
    if mac is None:
        return True
    # A port whose service the preflight did not read (it held no address then): the module reads and decides.
    if any(s and s["name"] not in mac["configs"] for s in (services.service_for(p, mac["services"]) for p in ports)):
        return True
    try:
        plan = services.plan_state(dict(STEP_OPTIONS, ports=ports, bridge=bridge), mac)
    except services.PlanError:  # the module refuses the ports, with its own message
        return True
    return services.writes(plan, mac["record"])

"""Never leave a half-applied state: when the hostfiles may not be rewritten.

The hostfiles are the cluster's contract with mlx.launch. They are rewritten only when every Mac
of the cluster came through the run (a Mac that failed its network step, or stopped answering,
would be listed with addresses it may not have), and only when the cables are still the ones the
network step configured (a cable pulled or moved in between would be in the hostfile but not on
the Macs), and every address they name is on its port as read last. Otherwise the last good hostfiles stay, on the controller and on every Mac.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.addresses import unplaced
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable


@dataclass(frozen=True)
class Refusal:
    """Why the hostfiles are not rewritten now, as data (render.write_guard says it): the Macs that failed or
    stopped answering; else the cables gone and new since the network step was given its plan, or only the ports'
    addresses changed (``readdressed``); else the planned ports (host, port argument) not holding their address."""

    dropped: tuple[str, ...] = ()
    gone: tuple[Cable, ...] = ()
    new: tuple[Cable, ...] = ()
    readdressed: bool = False
    unplaced: tuple[tuple[str, dict], ...] = ()


def _cables(ends: list[list]) -> set[Cable]:
    return {Cable.from_ports(pair) for pair in ends}


def refusal(hosts: list[str], active: list[str] | None, plan: dict | None, cables: list[list],
            network: dict, facts: dict) -> Refusal | None:
    """Why the hostfiles must not be written now, or None.

    hosts: the cluster in inventory order; active: the hosts still in the play (Ansible's
    ansible_play_hosts: failed and unreachable ones are gone), None when unknown; plan: the fabric
    result the network step was given (its ``cable_ends`` and ``network``), None when the network was
    not configured in this run; cables / network: the fabric as read now (the cables' ends, its
    ``cable_ends``); facts: {host: mlx_fleet_thunderbolt} as last read (after the network step when it ran),
    whose ports must hold every address the hostfiles name.
    """
    if active is not None:
        dropped = tuple(h for h in hosts if h not in active)
        if dropped:
            return Refusal(dropped=dropped)
    if plan is not None:
        before, now = _cables(plan.get("cable_ends") or []), _cables(cables)
        gone = tuple(sorted(before - now, key=lambda c: c.key))
        new = tuple(sorted(now - before, key=lambda c: c.key))
        if gone or new:
            return Refusal(gone=gone, new=new)
        if (plan.get("network") or {}) != network:
            return Refusal(readdressed=True)
    missing = tuple(unplaced(network, facts))
    return Refusal(unplaced=missing) if missing else None

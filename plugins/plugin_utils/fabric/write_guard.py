"""Never leave a half-applied state: when the hostfiles may not be rewritten.

The hostfiles are the cluster's contract with mlx.launch. They are rewritten only when every Mac
of the cluster came through the run (a Mac that failed its network step, or stopped answering,
would be listed with addresses it may not have), and only when the cables are still the ones the
network step configured (a cable pulled or moved in between would be in the hostfile but not on
the Macs), and every address they name is on its port as read last. Otherwise the last good hostfiles stay, on the controller and on every Mac.
"""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.addresses import unplaced
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable

KEPT = "the last good hostfiles stay on the controller and the Macs"


def _join(items) -> str:
    items = list(items)
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def _cables(ends: list[list]) -> set[Cable]:
    return {Cable.from_ports(pair) for pair in ends}


def refusal(hosts: list[str], active: list[str] | None, plan: dict | None, cables: list[list],
            network: dict, facts: dict, inventory: str, cli: bool = False) -> str | None:
    """Why the hostfiles must not be written now (one line), or None.

    hosts: the cluster in inventory order; active: the hosts still in the play (Ansible's
    ansible_play_hosts: failed and unreachable ones are gone), None when unknown; plan: the fabric
    result the network step was given (its ``cable_ends`` and ``network``), None when the network was
    not configured in this run; cables / network: the fabric as read now (the cables' ends, its
    ``cable_ends``); facts: {host:
    mlx_fleet_thunderbolt} as last read (after the network step when it ran), whose ports must hold every
    address the hostfiles name; inventory: for the command that fixes it (mlx-fleet's, with cli).
    """
    if active is not None:
        dropped = [h for h in hosts if h not in active]
        if dropped:
            return (f"hostfiles not rewritten: {_join(dropped)} failed or did not answer earlier in this run; "
                    f"{KEPT}: fix {'it' if len(dropped) == 1 else 'them'} and run again")
    if plan is not None:
        before, now = _cables(plan.get("cable_ends") or []), _cables(cables)
        changes = ([f"{c} is gone" for c in sorted(before - now, key=lambda c: c.key)]
                   + [f"{c} is new" for c in sorted(now - before, key=lambda c: c.key)])
        if not changes and (plan.get("network") or {}) != network:
            changes = ["the ports' addresses differ from the ones configured"]
        if changes:
            return (f"hostfiles not rewritten: the cabling changed while the ports were being configured "
                    f"({'; '.join(changes)}); {KEPT}: check the cables and run again")
    missing = [f"{host} {p['hardware_port']} ({p['device']}) has no {p['address']}/{p['prefix']}"
               for host, p in unplaced(network, facts)]
    if missing:
        return (f"hostfiles not rewritten: they would name addresses no port holds ({'; '.join(missing)}); {KEPT}: "
                f"{fixes.run_command('site', inventory, cli=cli)} configures the ports")
    return None

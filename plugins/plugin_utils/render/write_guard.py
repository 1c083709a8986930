"""The write guard's refusal (plugin_utils.fabric.write_guard) in words: why the hostfiles were not rewritten,
that the last good ones stay, and what to do."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base import fixes
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import join
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.write_guard import Refusal

KEPT = "the last good hostfiles stay on the controller and the Macs"


def refusal_line(refusal: Refusal, inventory: str, cli: bool = False) -> str:
    """One line; inventory and cli for the command that configures the ports (mlx-fleet's, with cli)."""
    if refusal.dropped:
        return (f"hostfiles not rewritten: {join(refusal.dropped)} failed or did not answer earlier in this run; "
                f"{KEPT}: fix {'it' if len(refusal.dropped) == 1 else 'them'} and run again")
    if refusal.gone or refusal.new or refusal.readdressed:
        changes = ([f"{c} is gone" for c in refusal.gone] + [f"{c} is new" for c in refusal.new]
                   or ["the ports' addresses differ from the ones configured"])
        return (f"hostfiles not rewritten: the cabling changed while the ports were being configured "
                f"({'; '.join(changes)}); {KEPT}: check the cables and run again")
    missing = [f"{host} {p['hardware_port']} ({p['device']}) has no {p['address']}/{p['prefix']}"
               for host, p in refusal.unplaced]
    return (f"hostfiles not rewritten: they would name addresses no port holds ({'; '.join(missing)}); {KEPT}: "
            f"{fixes.run_command('site', inventory, cli=cli)} configures the ports")

"""The cable plan: which Thunderbolt port of which Mac is cabled to which.

The inventory's `mlx_fleet_cables` (what the user intends) is written in it. A cable is written ``host:port -- host:port`` where port
is the Thunderbolt receptacle number that macOS names ``Thunderbolt N``
(``tb3`` and ``Thunderbolt 3`` are accepted too).
"""

from __future__ import annotations

import re

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Port


class CablePlanError(ValueError):
    """A cable plan that cannot be right; the message is one line for the user."""


# Any host name is read as written (checked against the inventory's hosts afterwards), so a
# misspelt or non-ASCII name is reported as an unknown host, not as a malformed cable.
_PORT_RE = re.compile(r"^\s*([^\s:]+)\s*:\s*(?:tb|thunderbolt\s*)?(\d+)\s*$", re.I)


def parse_port(text: str) -> Port:
    match = _PORT_RE.match(str(text))
    if not match:
        raise CablePlanError(f"cable end {text!r} is not host:port (port = Thunderbolt receptacle number)")
    receptacle = int(match.group(2))
    if receptacle < 1:
        raise CablePlanError(f"cable end {text!r}: Thunderbolt ports are numbered from 1")
    return Port(match.group(1), receptacle)


def parse_cable(text: str) -> Cable:
    ends = str(text).split("--")
    if len(ends) != 2:
        raise CablePlanError(f"cable {text!r} is not 'host:port -- host:port'")
    a, b = (parse_port(end.strip()) for end in ends)
    if a.host == b.host:
        raise CablePlanError(f"cable {text!r} connects {a.host} to itself")
    return Cable(a, b)


def parse_cables(entries, port_counts: dict[str, int] | None = None) -> list[Cable]:
    """Parse cable strings (mlx_fleet_cables; a Cable passes as it is) and check them against the hosts and
    their port counts.

    ``port_counts`` maps each known host to its number of Thunderbolt ports; when
    given, a cable naming an unknown host or a port the model does not have is an
    error. A port used by two cables is always an error.
    """
    cables: list[Cable] = []
    used: dict[Port, Cable] = {}
    for entry in entries or []:
        cable = entry if isinstance(entry, Cable) else parse_cable(entry)
        for end in (cable.a, cable.b):
            if port_counts is not None:
                if end.host not in port_counts:
                    raise CablePlanError(f"cable {cable}: unknown host {end.host!r}")
                if end.receptacle > port_counts[end.host]:
                    raise CablePlanError(
                        f"cable {cable}: {end.host} has Thunderbolt ports 1-{port_counts[end.host]}, not {end.receptacle}"
                    )
            if end in used:
                raise CablePlanError(f"cable {cable}: port {end} is already used by cable {used[end]}")
            used[end] = cable
        cables.append(cable)
    return cables

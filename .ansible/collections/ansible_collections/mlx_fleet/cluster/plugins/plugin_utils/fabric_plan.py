"""The cables found against the cable plan: missing, extra, wrong port (with the move), slow."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.cableplan import Cable, parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric_discovery import (
    FULL_SPEED_GBPS, Finding, Link, gbps, model_of, port_name)


def read_plan(cables: list, hosts: list[str], facts: dict, models: dict) -> list[Cable]:
    """mlx_fleet_cables checked against the hosts and their ports; raises CablePlanError."""
    counts = {h: m.port_count if (m := model_of(models, h)) else len(facts[h]["ports"]) for h in hosts}
    return parse_cables(cables, counts)


def _move(plan: Cable, found: Cable) -> str:
    moves = []
    for host in sorted({plan.a.host, plan.b.host}):
        want = plan.a if plan.a.host == host else plan.b
        have = found.a if found.a.host == host else found.b
        if want != have:
            moves.append((host, have.number, want.number))
    first, *other = moves
    text = f"move the cable in {port_name(first[0], first[1])} to Thunderbolt {first[2]}"
    for host, have, want in other:
        text += f", and its other end in {port_name(host, have)} to Thunderbolt {want}"
    return text


def compare(plan: list[Cable], links: list[Link], models: dict) -> list[Finding]:
    """The findings, in this order: wrong ports, missing, extra, slow."""
    planned = {Cable(*c.key) for c in plan}
    found = {link.cable: link for link in links}
    missing = sorted(planned - found.keys(), key=lambda c: c.key)
    extra = sorted(found.keys() - planned, key=lambda c: c.key)
    findings = []
    # The same two hosts cabled on other ports: a wrong port, and the move that fixes it. A
    # cable sharing an end with the planned one is its likeliest match.
    for cable in list(missing):
        pair = {cable.a.host, cable.b.host}
        candidates = [f for f in extra if {f.a.host, f.b.host} == pair]
        candidates.sort(key=lambda f: not ({f.a, f.b} & {cable.a, cable.b}))
        if candidates:
            wrong = candidates[0]
            missing.remove(cable)
            extra.remove(wrong)
            findings.append(Finding("wrong port", str(cable),
                                    f"wrong port: {cable} is cabled as {wrong}; {_move(cable, wrong)}", True,
                                    link=str(wrong), note="wrong port"))
    for cable in missing:
        findings.append(Finding("missing", str(cable),
                                f"missing cable {cable}: connect {port_name(cable.a.host, cable.a.number)} to "
                                f"{port_name(cable.b.host, cable.b.number)}", True,
                                gap=(cable.a.host, cable.b.host), note=f"missing {cable}"))
    for cable in extra:
        findings.append(Finding("extra", str(cable),
                                f"extra cable {cable}: not in the cable plan (mlx_fleet_cables); "
                                "unplug it or add it to the plan", True, link=str(cable), note="extra"))
    for link in links:
        if link.speed_gbps >= FULL_SPEED_GBPS:
            continue
        ends = [(e.host, model_of(models, e.host)) for e in (link.a, link.b)]
        slow_end = next(((host, m) for host, m in ends if m and m.tb_generation < 5), None)
        if slow_end:
            # A Thunderbolt 4 Mac: as fast as it gets; the JACCL warning says what it costs.
            message = (f"slow cable {link}: {gbps(link.speed_gbps)} because {slow_end[0]} "
                       f"({slow_end[1].key}) is Thunderbolt 4")
        else:
            message = (f"slow cable {link}: {gbps(link.speed_gbps)} where both ends do {gbps(FULL_SPEED_GBPS)}; "
                       "replace it with a Thunderbolt 5 cable")
        findings.append(Finding("slow", str(link), message, not slow_end, link=str(link), note="slow"))
    return findings

"""The cables found against the cable plan: missing, extra, wrong port (with the move or the swap), slow;
and, with no plan, what changed since the cables of the last converge."""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import Finding
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.discovery import FULL_SPEED_GBPS, gbps, model_of
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Cable, Link, Port, hardware_port, port_name


def read_plan(cables: list, hosts: list[str], facts: dict, models: dict) -> list[Cable]:
    """mlx_fleet_cables checked against the hosts and their ports; raises CablePlanError."""
    counts = {h: m.port_count if (m := model_of(models, h)) else len(facts[h]["ports"]) for h in hosts}
    return parse_cables(cables, counts)


def _moved_ends(plan: Cable, found: Cable) -> list[tuple[str, int, int]]:
    """(host, port it is in, port it belongs in) for each end of a cable found on other ports."""
    moves = []
    for host in sorted({plan.a.host, plan.b.host}):
        want, have = plan.end(host), found.end(host)
        if want != have:
            moves.append((host, have.receptacle, want.receptacle))
    return moves


def _move(plan: Cable, found: Cable) -> str:
    first, *other = _moved_ends(plan, found)
    text = f"move the cable in {port_name(Port(first[0], first[1]))} to {hardware_port(first[2])}"
    for host, have, want in other:
        text += f", and its other end in {port_name(Port(host, have))} to {hardware_port(want)}"
    return text


@dataclass(frozen=True)
class Rewiring:
    """Cables of a reference (the plan, or the last converge's cables) against the cables found:
    each move a (reference cable, found cable) pair of the same two Macs; each swap two moves whose
    cables exchanged two ports of one Mac; the rest missing or extra."""

    moves: list[tuple[Cable, Cable]]
    swaps: list[tuple[str, int, int, tuple[tuple[Cable, Cable], tuple[Cable, Cable]]]]  # host, ports, moves
    missing: list[Cable]
    extra: list[Cable]


def rewiring(reference: list[Cable], found: list[Cable]) -> Rewiring:
    planned = {Cable(*c.key) for c in reference}
    cabled = {Cable(*c.key) for c in found}
    missing = sorted(planned - cabled, key=lambda c: c.key)
    extra = sorted(cabled - planned, key=lambda c: c.key)
    moves = []
    # The same two hosts cabled on other ports: a move. A cable sharing an end with the reference
    # one is its likeliest match.
    for cable in list(missing):
        pair = {cable.a.host, cable.b.host}
        candidates = [f for f in extra if {f.a.host, f.b.host} == pair]
        candidates.sort(key=lambda f: not ({f.a, f.b} & {cable.a, cable.b}))
        if candidates:
            missing.remove(cable)
            extra.remove(candidates[0])
            moves.append((cable, candidates[0]))
    # Two cables that each moved one end on the same Mac, each into the other's port: one swap.
    single = {i: ends[0] for i, (was, now) in enumerate(moves) if len(ends := _moved_ends(was, now)) == 1}
    swaps, paired = [], set()
    for i, (host, have, want) in single.items():
        j = next((j for j, other in single.items() if j != i and j not in paired and i not in paired
                  and other == (host, want, have)), None)
        if j is not None:
            paired |= {i, j}
            swaps.append((host, min(have, want), max(have, want), (moves[i], moves[j])))
    return Rewiring([m for k, m in enumerate(moves) if k not in paired], swaps, missing, extra)


def change_lines(found: Rewiring) -> list[str]:
    """What changed since the cables of the last converge, one line each (no plan: nothing to fix)."""
    lines = [f"cable {was} moved to {now}" for was, now in found.moves]
    lines += [f"cables in {port_name(Port(host, first))} and {second} swapped: "
              + ", ".join(f"{was} is now {now}" for was, now in pair) for host, first, second, pair in found.swaps]
    lines += [f"cable {cable} unplugged" for cable in found.missing]
    lines += [f"new cable {cable}" for cable in found.extra]
    return lines


def compare(plan: list[Cable], links: list[Link], models: dict) -> list[Finding]:
    """The findings, in this order: wrong ports (swaps first), missing, extra, slow."""
    found = rewiring(plan, [link.cable for link in links])
    findings = []
    for host, first, second, pair in found.swaps:
        # One fix for both cables; a finding per cable for the picture and the audit.
        what = f"{pair[0][0]} and {pair[1][0]} are cabled as {pair[0][1]} and {pair[1][1]}"
        fix = f"swap the cables in {port_name(Port(host, first))} and {second}"
        findings += [Finding("wrong-port", found=what, expected=str(was), fix=fix, ports=was.key + now.key, cable=was,
                             link=now, note="swapped") for was, now in pair]
    for cable, wrong in found.moves:
        findings.append(Finding("wrong-port", found=f"{cable} is cabled as {wrong}", expected=str(cable),
                                fix=_move(cable, wrong), ports=cable.key + wrong.key, cable=cable, link=wrong,
                                note="wrong port"))
    for cable in found.missing:
        findings.append(Finding("missing", found="missing", expected=str(cable),
                                fix=f"connect {port_name(cable.a)} to {port_name(cable.b)}", ports=cable.key,
                                cable=cable, gap=(cable.a.host, cable.b.host), note=f"missing {cable}"))
    for cable in found.extra:
        findings.append(Finding("extra", found="not in the cable plan (mlx_fleet_cables)", expected="no cable",
                                fix="unplug it or add it to the plan", ports=cable.key, cable=cable, link=cable,
                                note="extra"))
    for link in links:
        if link.speed_gbps >= FULL_SPEED_GBPS:
            continue
        ends = [(e.host, model_of(models, e.host)) for e in (link.a, link.b)]
        slow_end = next(((host, m) for host, m in ends if m and m.tb_generation < 5), None)
        if slow_end:
            # A Thunderbolt 4 Mac: as fast as it gets; the JACCL warning says what it costs.
            findings.append(Finding(
                "thunderbolt-4-cable", found=f"{gbps(link.speed_gbps)} because {slow_end[0]} ({slow_end[1].key}) is "
                "Thunderbolt 4", expected=gbps(link.speed_gbps), ports=link.cable.key, cable=link.cable,
                link=link.cable, note="slow"))
        else:
            findings.append(Finding(
                "slow-cable", found=f"{gbps(link.speed_gbps)} where both ends do {gbps(FULL_SPEED_GBPS)}",
                expected=gbps(FULL_SPEED_GBPS), fix="replace it with a Thunderbolt 5 cable", ports=link.cable.key,
                cable=link.cable, link=link.cable, note="slow"))
    return findings

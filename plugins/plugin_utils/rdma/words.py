"""RDMA readiness in words: the state, what was found and the fix of one Mac's judgment
(rdma_state.judge_node), as a person reads them. Nothing is judged here, and nothing reads these
sentences back: the data stays in the Readiness."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.state import (
    ACTIVE, ENABLED_NOT_WORKING, NEEDS_RECOVERY, NOT_CAPABLE, READY, RDMA_MIN_MACOS, PortState, Readiness,
    macos_too_old)
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import join

# Each status as a person reads it in a table.
STATUS_WORDS = {READY: "ready", NEEDS_RECOVERY: "off: Recovery step to do", NOT_CAPABLE: "not capable",
                ENABLED_NOT_WORKING: "on, not working"}
NOT_WORKING = "enabled but not working"
_RING = "use the ring backend for it (a Recovery visit cannot help)"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def describe(node: Readiness) -> tuple[str, str, str]:
    """The node's state in words, what was found, and the fix ("" when ready)."""
    found = MODELS.get(node.model)
    macos_text = f"macOS {node.product_version} ({node.build_version})"
    what = f"{node.model_name} ({found.key if found else node.model_identifier or 'model unknown'})"
    if node.status == NOT_CAPABLE:
        return ("not capable of RDMA", *_not_capable(node, what, macos_text))
    if node.status == NEEDS_RECOVERY:
        said = ("ibv_devices lists no rdma_* device (the RDMA tools printed a wording no real Mac has shown)"
                if node.rdma_status == "unknown" else "rdma_ctl status says disabled")
        return ("needs the Recovery step", f"{said} on this {what}, {macos_text}",
                "a person at the Mac enables RDMA in macOS Recovery (see the checklist)")
    if node.status == ENABLED_NOT_WORKING and not node.rdma_devices:
        return (NOT_WORKING, "rdma_ctl status says enabled but ibv_devices lists no RDMA device",
                "restart the Mac (RDMA comes up at boot), and if it stays empty do the Recovery step again")
    problems = _port_problems(node)
    if problems:
        # Each problem's fix stays beside it in the line; the last one's is the fix (the others' are in found).
        *first, (last_found, last_fix) = problems
        return NOT_WORKING, "; ".join([f"{found}; {fix}" for found, fix in first] + [last_found]), last_fix
    return "ready", _ready(node), ""


def _not_capable(node: Readiness, what: str, macos_text: str) -> tuple[str, str]:
    old_text = f"{macos_text} is older than {RDMA_MIN_MACOS}, the first macOS with RDMA over Thunderbolt"
    if node.reason == "thunderbolt 4":
        return (f"{what} has Thunderbolt 4 ports, and RDMA over Thunderbolt needs Thunderbolt 5"
                + (f" (and {macos_text} is older than {RDMA_MIN_MACOS})" if macos_too_old(node.product_version)
                   else "")), _RING
    if node.reason == "macos":
        return old_text, f"update macOS, until then {_RING}"
    return f"{macos_text} has no rdma_ctl", _RING


def _named(p: PortState) -> str:
    to = f", cabled to {p.peer}" if p.peer else ""
    return f"{p.name} ({p.rdma_device or p.device}{to})"


def _port_problems(node: Readiness) -> list[tuple[str, str]]:
    """(what was found, its fix) for each kind of port fault of a Mac with RDMA enabled."""
    problems = []
    down = [p for p in node.ports if p.outcome == "down"]
    if down:
        ends = [node.host] + sorted({p.peer for p in down if p.peer})
        peers = join(sorted({p.peer for p in down if p.peer})) or "the Mac at the other end"
        problems.append((
            f"{join([_named(p) for p in down])} {'is' if len(down) == 1 else 'are'} "
            f"{join(sorted({p.rdma_state or 'not active' for p in down}))}; likely causes: the cable, the "
            f"Thunderbolt Bridge still active, RDMA not enabled on {peers}",
            f"restarting both ends ({join(ends) if len(ends) > 1 else node.host + ' and its peer'}) is the known "
            "remedy"))
    for p in (p for p in node.ports if p.outcome == "broken port"):
        problems.append((f"{_named(p)} is {p.rdma_state or 'not active'}: it is the {node.model_name} port "
                         "beside Ethernet, where RDMA never comes up", "move the cable to another port"))
    missing = [p for p in node.ports if p.outcome == "no device"]
    if missing:
        problems.append((f"{join([_named(p) for p in missing])} {'has' if len(missing) == 1 else 'have'} no RDMA "
                         "device although RDMA is enabled", "restart the Mac"))
    return problems


def _ready(node: Readiness) -> str:
    ports = node.ports
    active = [p for p in ports if p.outcome == "active"]
    waiting = [p for p in ports if p.outcome == "waiting"]
    incapable = [p for p in ports if p.outcome == "peer not capable"]
    parts = [f"RDMA enabled, {plural(len(node.rdma_devices), 'device')}"]
    if active:
        parts.append(f"{join([p.name for p in active])} {ACTIVE}")
    elif not ports:
        parts.append("no Thunderbolt cable to another Mac yet")
    if waiting:
        peers = {p.peer for p in waiting}
        parts.append(f"{join([_named(p) for p in waiting])} come{'s' if len(waiting) == 1 else ''} up once "
                     f"{join(sorted(peers))} {'is' if len(peers) == 1 else 'are'} enabled")
    if incapable:
        parts.append(f"{join([_named(p) for p in incapable])} cannot carry RDMA (the peer cannot do RDMA)")
    return "; ".join(parts)

"""The RDMA readiness of the cluster (plugin_utils.rdma.readiness.Assessment) in words: what the cabling
supports now and once the Recovery step is done, and why an RDMA backend asked for cannot run yet."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import RDMA_BACKENDS
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import join
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.readiness import Assessment
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma.state import (
    ENABLED_NOT_WORKING, NEEDS_RECOVERY, NOT_CAPABLE)

BACKEND_TEXT = {
    "jaccl": "jaccl (full mesh)",
    "jaccl-ring": "jaccl-ring (a ring, not a full mesh)",
    "ring": "ring (no RDMA)",
    None: "no backend (the cables form neither a full mesh nor a ring)",
}


def summary(assessment: Assessment) -> str:
    """One line: who needs the Recovery step, what the cabling supports then and until then."""
    hosts, backend = list(assessment.nodes), assessment.backend
    current, projected = assessment.current, assessment.projected
    needs, cannot = assessment.hosts(NEEDS_RECOVERY), assessment.hosts(NOT_CAPABLE)
    broken = assessment.hosts(ENABLED_NOT_WORKING)
    cannot_text = (f"; {join(cannot)} cannot do RDMA, so ring is the way for "
                   f"{'it' if len(cannot) == 1 else 'them'}" if cannot else "")
    # Where the details are depends on who prints the summary: said there, not here.
    broken_text = (f"; {join(broken)} {'has' if len(broken) == 1 else 'have'} RDMA enabled but not working"
                   if broken else "")
    if len(hosts) < 2:
        ready = "ready for RDMA" if not needs and not cannot else "not ready for RDMA"
        return f"{join(hosts) or 'no Mac'}: {ready}; one Mac has no Thunderbolt fabric{cannot_text}{broken_text}"
    if not needs:
        if not cannot and not broken:
            return f"all {len(hosts)} Macs are ready for RDMA; the cabling supports {BACKEND_TEXT[current]}"
        return f"no Mac needs the Recovery step; the cabling supports {BACKEND_TEXT[current]}{cannot_text}{broken_text}"
    who = f"once {join(needs)} {'is' if len(needs) == 1 else 'are'} enabled from Recovery"
    if projected == current:
        gain = f"{who}, the cabling still supports only {BACKEND_TEXT[projected]}"
    else:
        gain = f"{who}, the cabling supports {BACKEND_TEXT[projected]}"
    if backend == "auto":
        until = f"; until then auto falls back to {BACKEND_TEXT[current]}" if projected != current else ""
    elif backend in RDMA_BACKENDS:
        until = f"; until then {backend} cannot run"
    else:
        until = f"; mlx_fleet_backend is {backend}"
    return gain + until + cannot_text + broken_text


def blocking(assessment: Assessment) -> str:
    """Why the RDMA backend asked for cannot run (for a blocked assessment)."""
    parts = []
    needs, cannot = assessment.hosts(NEEDS_RECOVERY), assessment.hosts(NOT_CAPABLE)
    if needs:
        parts.append(f"{join(needs)} {'needs' if len(needs) == 1 else 'need'} the Recovery step")
    if cannot:
        parts.append(f"{join(cannot)} cannot do RDMA (use ring for {'it' if len(cannot) == 1 else 'them'})")
    return f"mlx_fleet_backend {assessment.backend} needs RDMA on every Mac: " + "; ".join(parts)

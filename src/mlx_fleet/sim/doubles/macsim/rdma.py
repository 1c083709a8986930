"""RDMA over Thunderbolt: one rdma_enX device per Thunderbolt port once RDMA is enabled.

Node GUIDs follow the pattern of the captures (TN3205, MLX docs): the first byte counts
up with the port (receptacle N -> base + N - 1), the other seven bytes are the Mac's.
Devices are listed in node.json's "thunderbolt" order, which the controller writes in
the order the Mac enumerates its ports (the M3 Ultra capture lists en5 before en4).
"""

from . import state


def enabled() -> bool:
    return bool(state.node().get("rdma_enabled"))


def devices() -> list[dict]:
    return state.node()["thunderbolt"] if enabled() else []


def guid(tb: dict) -> str:
    node = state.node()
    base = node.get("rdma_guid")
    if base is None:  # stable per machine, from its hardware UUID
        import hashlib  # here: of the reads, only ibv_devinfo's GUIDs need it

        base = hashlib.sha256(node["hardware_uuid"].encode()).hexdigest()[:16]
    first = (int(base[:2], 16) + tb["receptacle"] - 1) & 0xFF
    return f"{first:02x}{base[2:]}"


def port_active(tb: dict) -> bool:
    """PORT_ACTIVE needs RDMA on both ends of a direct Mac-to-Mac cable, on a port that can do it."""
    link = tb.get("link") or {}
    peer = link.get("peer") or {}
    return (enabled() and tb.get("rdma_ok", True) and link.get("kind") == "mac"
            and peer.get("rdma_enabled", True) and peer.get("rdma_ok", True))

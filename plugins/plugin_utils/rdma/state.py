"""One Mac's RDMA readiness as data, and the judgment that gives it (docs/recovery/README.md).

From a Mac's ``mlx_fleet_macos`` and ``mlx_fleet_thunderbolt`` facts, its model and its cables: ready,
needing the Recovery step, not capable of RDMA (never sent to Recovery), or on but not working, and what
each cabled port does. Only the judgment: the sentences a person reads are composed in rdma_text.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.versions import version_tuple
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import Model, generation_from_facts, model_for
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.ports import Port, hardware_port

READY = "ready"
NEEDS_RECOVERY = "needs_recovery"
NOT_CAPABLE = "not_capable"
ENABLED_NOT_WORKING = "enabled_not_working"
STATUSES = (READY, NEEDS_RECOVERY, NOT_CAPABLE, ENABLED_NOT_WORKING)
RDMA_MIN_MACOS = "26.2"  # the first macOS with RDMA over Thunderbolt (rdma_ctl)
ACTIVE = "PORT_ACTIVE"


@dataclass
class PortState:
    """One cabled Thunderbolt port as RDMA sees it."""

    port: Port
    device: str | None
    rdma_device: str | None
    rdma_state: str | None
    peer: str | None  # the inventory host at the other end, None when unknown
    outcome: str  # "active" | "waiting" (peer not enabled yet) | "peer not capable" | "down" | "broken port" | "no device"

    @property
    def name(self) -> str:
        return hardware_port(self.port.receptacle)

    def to_dict(self) -> dict:
        """As the RDMA step's result keeps it: the port by its number (the Mac is the one it belongs to)."""
        return {"receptacle": self.port.receptacle, "device": self.device, "rdma_device": self.rdma_device,
                "rdma_state": self.rdma_state, "peer": self.peer, "outcome": self.outcome}


@dataclass
class Readiness:
    """One Mac's RDMA readiness as data: its status, the state in words, what was found and the fix;
    message is the line rendered from them."""

    host: str
    status: str  # one of STATUSES
    state: str  # the status in words: "ready", "needs the Recovery step", ...
    found: str  # what was found
    fix: str  # what to do ("" when ready)
    model: str | None  # plugin_utils.base.mac_models key, when known
    model_name: str
    model_identifier: str
    chip: str
    serial_number: str
    product_version: str
    build_version: str
    location: str | None = None
    reason: str | None = None  # not_capable: "thunderbolt 4" | "macos" | "no rdma_ctl"
    ports: list[PortState] = field(default_factory=list)
    regression_text: str | None = None  # set from the ledger: RDMA switched off since last seen ready
    rdma_status: str | None = None  # rdma_ctl status as read: enabled, disabled, unknown; None: no rdma_ctl
    rdma_devices: list[str] = field(default_factory=list)  # what ibv_devices lists
    unread: list[dict] = field(default_factory=list)  # outputs no real Mac has shown: {command, output}

    def text(self) -> str:
        """The line without the host: the state, what was found and the fix."""
        return f"{self.state}: {self.found}" + (f"; {self.fix}" if self.fix else "")

    @property
    def message(self) -> str:  # one line
        return f"{self.host}: {self.text()}"

    @property
    def regression(self) -> str | None:
        return f"{self.host}: {self.regression_text}" if self.regression_text else None

    def to_dict(self) -> dict:
        return {**asdict(self), "ports": [p.to_dict() for p in self.ports], "message": self.message,
                "regression": self.regression}


# --- the judgment --------------------------------------------------------------------------------------


def _tb_generation(model: Model | None, thunderbolt: dict) -> int | None:
    # A model the catalogue cannot place is judged from its own ports.
    return model.tb_generation if model else generation_from_facts(thunderbolt)


def _cabled_ports(host: str, thunderbolt: dict, cabled: dict[int, str | None] | None) -> dict[int, str | None]:
    """receptacle -> peer host: the fabric's cables when given, else every port with a Mac directly on it."""
    if cabled is not None:
        return dict(cabled)
    return {p["receptacle"]: None for p in thunderbolt.get("ports", [])
            if any(peer.get("direct") for peer in p.get("peers", []))}


def macos_too_old(product_version: str) -> bool:
    """Whether this macOS predates RDMA over Thunderbolt."""
    return version_tuple(product_version) < version_tuple(RDMA_MIN_MACOS)


def judge_node(host: str, macos: dict, thunderbolt: dict, *, model: str | None = None,
               location: str | None = None, cabled: dict[int, str | None] | None = None,
               peer_status: dict[str, str] | None = None) -> Readiness:
    """One Mac's readiness as data (status, reason, ports and their outcomes), its words left empty.

    cabled: receptacle -> the inventory host on its other end (``cables_by_host`` from the fabric);
    without it, every port with a Mac directly attached counts, peers unknown. peer_status: host ->
    its own first-pass status (READY, NEEDS_RECOVERY, ...), so that a port down only because the
    Mac at the other end has RDMA off is waiting for that Mac, not a fault of this one.
    """
    found = model_for(model, macos)
    node = Readiness(
        host=host, status=READY, state="", found="", fix="", model=found.key if found else model,
        model_name=macos.get("model_name") or (found.model_name if found else "Mac"),
        model_identifier=macos.get("model_identifier", ""), chip=macos.get("chip", ""),
        serial_number=macos.get("serial_number", ""), product_version=str(macos.get("product_version", "")),
        build_version=macos.get("build_version", ""), location=location, rdma_status=thunderbolt.get("rdma_status"),
        rdma_devices=list(thunderbolt.get("rdma_devices") or []), unread=list(thunderbolt.get("rdma_unread") or []),
    )
    # Not capable: never send anyone to Recovery for these.
    if _tb_generation(found, thunderbolt) == 4:
        node.reason = "thunderbolt 4"
    elif node.product_version and macos_too_old(node.product_version):  # an unread version is no verdict
        node.reason = "macos"
    elif thunderbolt.get("rdma_enabled") is None:
        node.reason = "no rdma_ctl"
    if node.reason:
        node.status = NOT_CAPABLE
    # rdma_ctl's wording unknown: rdma_enabled is what MLX trusts, whether ibv_devices lists rdma_* devices.
    elif not thunderbolt.get("rdma_enabled"):
        node.status = NEEDS_RECOVERY
    elif not node.rdma_devices:
        node.status = ENABLED_NOT_WORKING
    else:
        node.ports = _port_states(host, thunderbolt, cabled, found, peer_status or {})
        if any(p.outcome in ("down", "broken port", "no device") for p in node.ports):
            node.status = ENABLED_NOT_WORKING
    return node


def _port_states(host: str, thunderbolt: dict, cabled: dict[int, str | None] | None, found: Model | None,
                 peer_status: dict[str, str]) -> list[PortState]:
    """Each cabled port of a Mac with RDMA enabled, and what RDMA does there."""
    by_receptacle = {p["receptacle"]: p for p in thunderbolt.get("ports", [])}
    ports = []
    for receptacle, peer in sorted(_cabled_ports(host, thunderbolt, cabled).items()):
        port = by_receptacle.get(receptacle, {"receptacle": receptacle})
        state = port.get("rdma_state")
        if port.get("rdma_device") is None:
            outcome = "no device"
        elif state == ACTIVE:
            outcome = "active"
        elif found and receptacle in found.rdma_broken_ports:
            outcome = "broken port"
        elif peer_status.get(peer) == NEEDS_RECOVERY:
            outcome = "waiting"
        elif peer_status.get(peer) == NOT_CAPABLE:
            outcome = "peer not capable"
        else:
            outcome = "down"
        ports.append(PortState(Port(host, receptacle), port.get("device"), port.get("rdma_device"), state, peer, outcome))
    return ports

"""One vocabulary for the Thunderbolt fabric: a port, a cable, a link (docs/fabric.md section 2).

A port is a Mac's Thunderbolt receptacle (the number macOS names ``Thunderbolt N``), a cable an
unordered pair of ports, a link a cable found between two Macs with its ends' network devices and,
once the fabric has given it its /30, the addresses. Every per-port fact (addresses, RDMA state, the
model's data) is keyed by a ``Port``, every per-cable fact by a ``Cable``; a cable's text
(``host:N -- host:N``) is for people and the inventory only.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = 30  # one /30 per cable: network, the two ends, broadcast


@dataclass(frozen=True, order=True)
class Port:
    """One Thunderbolt port of one Mac."""

    host: str
    receptacle: int  # the number macOS names "Thunderbolt N" and the cable plan uses

    def __str__(self) -> str:
        return f"{self.host}:{self.receptacle}"


@dataclass(frozen=True, eq=False)
class Cable:
    """A cable between two ports: the same cable whichever end is written first (``a`` and ``b`` keep the
    order it was written or advised in, for the steps a person follows)."""

    a: Port
    b: Port

    @property
    def key(self) -> tuple[Port, Port]:
        """Its ends, lower first: the orientation-free identity equality and hashing use."""
        return (self.a, self.b) if self.a <= self.b else (self.b, self.a)

    def __eq__(self, other) -> bool:
        return isinstance(other, Cable) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return f"{self.a} -- {self.b}"

    def end(self, host: str) -> Port:
        return self.a if self.a.host == host else self.b

    @property
    def ports(self) -> list[list]:
        """Its ends as data, a then b: [[host, receptacle], [host, receptacle]] (facts, JSON)."""
        return [[self.a.host, self.a.receptacle], [self.b.host, self.b.receptacle]]

    @classmethod
    def from_ports(cls, ports) -> Cable:
        """A cable from its ends as data (Cable.ports, as facts and JSON keep it): never from its text."""
        (a_host, a_receptacle), (b_host, b_receptacle) = ports
        return cls(Port(str(a_host), int(a_receptacle)), Port(str(b_host), int(b_receptacle)))


@dataclass(frozen=True)
class End:
    """One end of a link: the port, its network device and, once addressed, its IPv4 address in the /30."""

    port: Port
    device: str | None
    address: str | None = None

    @property
    def host(self) -> str:
        return self.port.host

    @property
    def receptacle(self) -> int:
        return self.port.receptacle

    @property
    def hardware_port(self) -> str:
        return hardware_port(self.receptacle)

    @property
    def interface(self) -> str:
        return f"{self.address}/{PREFIX}"


@dataclass(frozen=True)
class Link:
    """A direct Mac-to-Mac cable: found on the ports (discovery: no network, no addresses), or with its /30
    and both ends' addresses (the cluster model: ``a`` holds .1). ``a`` is the lower end (Port order)."""

    a: End
    b: End
    speed_gbps: float | None = None
    network: str | None = None

    @property
    def cable(self) -> Cable:
        return Cable(self.a.port, self.b.port)

    def end(self, host: str) -> End:
        return self.a if self.a.host == host else self.b

    def ends(self) -> tuple[End, End]:
        return self.a, self.b

    def __str__(self) -> str:
        return str(self.cable)


def hardware_port(receptacle: int) -> str:
    """The port as networksetup and the reports name it: "Thunderbolt 3"."""
    return f"Thunderbolt {receptacle}"


def port_name(port: Port) -> str:
    """A port for a person: "mini-1 Thunderbolt 3"."""
    return f"{port.host} {hardware_port(port.receptacle)}"

"""A finding as data, and the one way it becomes a sentence.

Every check (the fabric, RDMA readiness, the preflight, the audit) says what it found as data: its kind,
the Macs (and ports) it concerns, what was found, what was expected, and the fix. Sentences for a person
are composed here only; nothing reads data back out of a sentence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


def sentence(subject: str, found: str, fix: str = "") -> str:
    """A finding's line for a person: what it is about, what was found, then the fix."""
    return f"{subject}: {found}" + (f"; {fix}" if fix else "")


@dataclass(frozen=True)
class Problem:
    """Something a check found on one or more Macs."""

    kind: str  # what the check is about: "macos", "model", "sudo", "wired limit", "pool", ...
    hosts: tuple[str, ...]
    found: str
    expected: str
    fix: str
    ports: tuple[tuple[str, int], ...] = ()

    @property
    def line(self) -> str:
        return sentence(" and ".join(self.hosts), self.found, self.fix)

    def to_dict(self) -> dict:
        return {**asdict(self), "message": self.line}

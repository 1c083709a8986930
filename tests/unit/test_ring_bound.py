"""The search for a ring through every host is bounded: a 32-Mac cabling with six cables per Mac either
gives its ring or is refused at once, never searched for minutes."""

from __future__ import annotations

import threading

import pytest

from factories import Cluster

HOSTS = [f"studio-{i}" for i in range(1, 33)]


def dense(*, cut=False) -> Cluster:
    """Every Mac cabled on all six Thunderbolt ports to its neighbours 1, 2 and 3 places round the inventory
    (cut: two halves of 16 whose only link is studio-1, so every Mac has cables yet no ring passes them all)."""
    cluster = Cluster({h: "studio-m3-ultra" for h in HOSTS})
    used = dict.fromkeys(HOSTS, 0)

    def cable(a: str, b: str) -> None:
        used[a] += 1
        used[b] += 1
        cluster.cable(f"{a}:{used[a]}", f"{b}:{used[b]}")

    if cut:
        for half in (HOSTS[1:17], HOSTS[17:]):
            for i, a in enumerate(half):
                for step in (1, 2):
                    cable(a, half[(i + step) % len(half)])
        for b in (HOSTS[1], HOSTS[2], HOSTS[17], HOSTS[18]):
            cable(HOSTS[0], b)
        return cluster
    for i, a in enumerate(HOSTS):
        for step in (1, 2, 3):
            cable(a, HOSTS[(i + step) % len(HOSTS)])
    return cluster


def unplug_cable(cluster: Cluster, end: str) -> None:
    """Both ends of the cable in end."""
    _, port = cluster.port(end)
    peer = port["peers"][0]["domain_uuid"]
    cluster.unplug(end)
    for host, fact in cluster.facts.items():
        for other in fact["ports"]:
            if other["domain_uuid"] == peer:
                cluster.unplug(f"{host}:{other['receptacle']}")


def judged(cluster: Cluster, backend: str):
    """The fabric, built in a thread that must finish: a search without a bound runs for hours, and the join's
    bound keeps this test from hanging with it (how long the search takes is `make bench`'s to measure)."""
    done = {}
    thread = threading.Thread(target=lambda: done.update(fabric=cluster.fabric(backend=backend)), daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), f"the {backend} fabric of 32 Macs was still being searched: the search is unbounded"
    return done["fabric"]


@pytest.mark.parametrize("backend", ["auto", "jaccl-ring", "ring"])
def test_a_mac_with_a_single_cable_is_refused_at_once(backend):
    cluster = dense()
    for port in range(2, 7):
        unplug_cable(cluster, f"studio-1:{port}")
    fabric = judged(cluster, backend)
    prefix = {"auto": "auto: no ring", "jaccl-ring": "jaccl-ring needs a ring", "ring": "ring needs a ring"}[backend]
    assert fabric.backend is None
    assert fabric.errors == [f"{prefix} through all 32 hosts: studio-1 and studio-32 are not cabled; connect "
                             "studio-1 Thunderbolt 2 to studio-32 Thunderbolt 4"]


def test_a_dense_cabling_gives_its_ring():
    fabric = judged(dense(), "jaccl-ring")
    assert fabric.backend == "jaccl-ring" and not fabric.errors
    assert [h.ssh for h in fabric.hostfile.hosts] == HOSTS


def test_cables_everywhere_but_no_ring_is_refused():
    fabric = judged(dense(cut=True), "ring")
    assert fabric.backend is None and fabric.errors[0].startswith("ring needs a ring through all 32 hosts: ")

"""The fabric's sentences from its data: why this backend or none (fabric.backend.Why.line), one per rule, and what
changed since the last converge's cables (fabric.against_plan.change_lines), one per kind of change."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cable
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.against_plan import Rewiring, change_lines
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.fabric.backend import Why

RING = ("mini-1", "mini-2", "mini-3", "mini-4")
SLOW = parse_cable("mini-1:1 -- mini-2:1")


def test_the_backend_asked_for():
    assert Why("requested", "ring").line == "ring as requested (mlx_fleet_backend)"
    assert Why("cannot-run", "jaccl").line == "jaccl was requested but cannot run here (see the errors)"
    assert Why("refused").line == "no backend"


def test_what_auto_chose_and_what_kept_it_from_a_better_one():
    assert Why("mesh", "jaccl", 3).line == ("auto chose jaccl: the cables form a full mesh and every host and cable "
                                            "can carry RDMA")
    assert Why("ring-not-mesh", "jaccl-ring", 4, RING, ("mini-1", "mini-3")).line == (
        "auto chose jaccl-ring: the cables form a ring (mini-1 -> mini-2 -> mini-3 -> mini-4) but not a full mesh "
        "(mini-1 and mini-3 are not cabled), and every host and cable of the ring can carry RDMA")
    assert "but not a full mesh of RDMA links (mini-1:1 -- mini-2:1 cannot carry RDMA (40 Gb/s))" in Why(
        "ring-not-mesh", "jaccl-ring", 4, RING, unable=((SLOW, "40 Gb/s"),)).line
    off = (("mini-2", "has RDMA off (x)"), ("mini-3", "has RDMA off (x)"), ("mini-4", "cannot do RDMA (y)"))
    assert Why("ring-no-rdma", "ring", 4, RING, no_rdma=off).line == (
        "auto chose ring: the cables form a ring (mini-1 -> mini-2 -> mini-3 -> mini-4) but mini-2 and mini-3 have "
        "RDMA off (x); mini-4 cannot do RDMA (y)")
    assert Why("ring-no-rdma", "ring", 4, RING, unable=((SLOW, "40 Gb/s"),)).line.endswith(
        "but mini-1:1 -- mini-2:1 cannot carry RDMA (40 Gb/s)")
    assert Why("none", None, 3).line == ("auto found no backend: the cables form neither a full mesh nor a ring "
                                         "through all 3 hosts")



def test_what_changed_since_the_last_converge():
    one, two = parse_cable("mini-1:1 -- mini-2:1"), parse_cable("mini-1:1 -- mini-2:2")
    three, four = parse_cable("mini-2:2 -- mini-3:1"), parse_cable("mini-2:1 -- mini-3:1")
    assert change_lines(Rewiring([(one, two)], [("mini-2", 1, 2, ((one, two), (three, four)))], [three], [four])) == [
        "cable mini-1:1 -- mini-2:1 moved to mini-1:1 -- mini-2:2",
        "cables in mini-2 Thunderbolt 1 and 2 swapped: mini-1:1 -- mini-2:1 is now mini-1:1 -- mini-2:2, "
        "mini-2:2 -- mini-3:1 is now mini-2:1 -- mini-3:1",
        "cable mini-2:2 -- mini-3:1 unplugged", "new cable mini-2:1 -- mini-3:1"]

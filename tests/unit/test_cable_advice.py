"""Cable advice for a Mac joining the cluster (plugin_utils.checks.cable_advice)."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.cable_advice import HostPorts, Obstacle, advise
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import parse_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS


def _hosts(models: dict[str, str], cables: list[str], plugged_elsewhere: dict[str, set[int]] | None = None):
    """HostPorts for each Mac: ports from its model, taken = ends of the cables (and other devices)."""
    parsed = parse_cables(cables)
    hosts = []
    for name, key in models.items():
        model = MODELS[key]
        taken = {e.receptacle for c in parsed for e in (c.a, c.b) if e.host == name}
        taken |= (plugged_elsewhere or {}).get(name, set())
        hosts.append(HostPorts(name, tuple(n for n, _ in model.thunderbolt_devices), frozenset(taken),
                               model.rdma_broken_ports, f"{model.model_name}, {key}"))
    return hosts, parsed


def _ends(cables) -> list[list]:
    """Each cable's ends in order, the new Mac's first: what a person plugs, as data."""
    return [cable.ports for cable in cables]


STUDIO_MESH = ["studio-1:2 -- studio-2:2", "studio-1:3 -- studio-3:2", "studio-2:3 -- studio-3:3"]


def test_a_fourth_studio_gets_one_cable_to_each_studio_on_free_rdma_ports():
    hosts, cables = _hosts({f"studio-{i}": "studio-m3-ultra" for i in range(1, 5)}, STUDIO_MESH)
    advice = advise("studio-4", hosts, cables, "jaccl")
    assert advice.possible and advice.backend == "jaccl" and not advice.unplug
    assert _ends(advice.cables) == [[["studio-4", 2], ["studio-1", 4]], [["studio-4", 3], ["studio-2", 4]],
                                    [["studio-4", 4], ["studio-3", 4]]]
    assert advice.plan_entries() == ["studio-1:4 -- studio-4:2", "studio-2:4 -- studio-4:3", "studio-3:4 -- studio-4:4"]


def test_the_studio_port_beside_ethernet_is_never_advised_for_rdma():
    # studio-2 has only Thunderbolt 1 left: no RDMA there, so the mesh cannot be finished.
    hosts, cables = _hosts({f"studio-{i}": "studio-m3-ultra" for i in range(1, 5)}, STUDIO_MESH,
                           {"studio-2": {4, 5, 6}})
    advice = advise("studio-4", hosts, cables, "jaccl")
    assert not advice.possible
    assert advice.obstacles == (Obstacle("ports-in-use", ("studio-2",), need=1, has=0, taken=(2, 3, 4, 5, 6)),)
    ring = advice.alternative
    assert ring.backend == "jaccl-ring" and ring.possible
    assert all(e.receptacle != 1 for c in ring.cables for e in (c.a, c.b))
    # The ring needs only two of the three studios; studio-2 is left on its two existing cables.
    assert _ends(ring.cables) == [[["studio-4", 2], ["studio-1", 4]], [["studio-4", 3], ["studio-3", 4]]]
    assert ring.ring == ["studio-1", "studio-2", "studio-3", "studio-4"]


def test_a_mac_mini_cannot_join_a_four_mac_mesh_and_is_told_the_ring_alternative():
    models = {f"studio-{i}": "studio-m3-ultra" for i in range(1, 5)} | {"mini-5": "mini-m4-pro"}
    mesh = STUDIO_MESH + ["studio-1:4 -- studio-4:2", "studio-2:4 -- studio-4:3", "studio-3:4 -- studio-4:4"]
    hosts, cables = _hosts(models, mesh)
    advice = advise("mini-5", hosts, cables, "jaccl")
    assert not advice.possible and not advice.cables
    assert advice.obstacles == (Obstacle("too-few-ports", ("mini-5",), need=4, has=3, label="Mac mini, mini-m4-pro",
                                         macs=5),)
    assert advice.alternative.backend == "jaccl-ring"
    assert _ends(advice.alternative.cables) == [[["mini-5", 1], ["studio-1", 5]], [["mini-5", 2], ["studio-2", 5]]]
    assert advice.alternative.ring == ["studio-1", "studio-3", "studio-4", "studio-2", "mini-5"]
    assert advice.alternative.possible and not advice.alternative.unplug


def test_a_mini_joining_a_mesh_of_minis_with_no_free_port_moves_one_cable():
    models = {f"mini-{i}": "mini-m4-pro" for i in range(1, 6)}
    mesh = ["mini-1:1 -- mini-2:1", "mini-1:2 -- mini-3:1", "mini-1:3 -- mini-4:1",
            "mini-2:2 -- mini-3:2", "mini-2:3 -- mini-4:2", "mini-3:3 -- mini-4:3"]
    hosts, cables = _hosts(models, mesh)
    advice = advise("mini-5", hosts, cables, "jaccl")
    assert advice.obstacles == (Obstacle("too-few-ports", tuple(models), need=4, has=3, label="Mac mini, mini-m4-pro",
                                         macs=5),)
    ring = advice.alternative
    assert [c.ports for c in ring.unplug] == [[["mini-1", 1], ["mini-2", 1]]]
    assert _ends(ring.cables) == [[["mini-5", 1], ["mini-1", 1]], [["mini-5", 2], ["mini-2", 1]]]
    assert ring.ring[0] == "mini-1" and ring.ring[-2:] == ["mini-2", "mini-5"]


def test_ring_backends_insert_the_new_mac_between_two_neighbours_with_free_ports():
    models = {f"mini-{i}": "mini-m4-pro" for i in range(1, 5)}
    ring = ["mini-1:1 -- mini-2:1", "mini-2:2 -- mini-3:1", "mini-3:2 -- mini-1:2"]
    hosts, cables = _hosts(models, ring)
    advice = advise("mini-4", hosts, cables, "ring")
    assert advice.backend == "ring" and advice.topology == "ring"
    assert _ends(advice.cables) == [[["mini-4", 1], ["mini-1", 3]], [["mini-4", 2], ["mini-2", 3]]]


def test_cables_already_there_are_not_advised_again():
    mesh = STUDIO_MESH + ["studio-1:4 -- studio-4:2", "studio-2:4 -- studio-4:3", "studio-3:4 -- studio-4:4"]
    hosts, cables = _hosts({f"studio-{i}": "studio-m3-ultra" for i in range(1, 5)}, mesh)
    advice = advise("studio-4", hosts, cables, "jaccl")
    assert advice.possible and advice.cables == [] and advice.steps() == []
    assert (advice.topology, advice.backend, advice.unplug) == ("full mesh", "jaccl", [])
    assert advise("studio-4", hosts, cables, "jaccl-ring").cables == []


def test_ports_the_plan_reserves_or_a_device_uses_are_not_free():
    hosts, cables = _hosts({"studio-1": "studio-m3-ultra", "studio-2": "studio-m3-ultra"}, [],
                           {"studio-1": {2, 3}, "studio-2": {2}})
    advice = advise("studio-2", hosts, cables, "jaccl")
    assert _ends(advice.cables) == [[["studio-2", 3], ["studio-1", 4]]]


def test_a_new_mac_without_enough_ports_for_a_ring_is_told_so():
    hosts, cables = _hosts({"mini-1": "mini-m4-pro", "mini-2": "mini-m4-pro", "mini-3": "mini-m4-pro"},
                           ["mini-1:1 -- mini-2:1"], {"mini-3": {1, 2}})
    advice = advise("mini-3", hosts, cables, "ring")
    assert advice.obstacles == (Obstacle("ring-ports", ("mini-3",), need=2, has=1, rdma=False),)


def test_unknown_backends_are_refused():
    hosts, cables = _hosts({"mini-1": "mini-m4-pro", "mini-2": "mini-m4-pro"}, [])
    with pytest.raises(ValueError, match="auto"):
        advise("mini-2", hosts, cables, "auto")


def test_each_obstacle_and_the_advice_in_words():
    """The sentences onboarding prints (the headline, the steps), one per obstacle."""
    assert Obstacle("too-few-ports", ("mini-5",), 4, 3, "Mac mini, mini-m4-pro", macs=5).line == (
        "mini-5 (Mac mini, mini-m4-pro) has 3 Thunderbolt ports that carry RDMA and a full mesh of 5 Macs needs 4 on "
        "every Mac")
    assert Obstacle("ports-in-use", ("studio-2",), 1, 0, taken=(2, 3, 4, 5, 6)).line == (
        "studio-2 needs 1 more cable but has no free port that carries RDMA (in use: Thunderbolt 2, 3, 4, 5, 6); free "
        "one or re-cable it")
    assert Obstacle("ring-ports", ("mini-3",), 2, 1, rdma=False).line == "mini-3 has only 1 free port and a ring needs 2"
    models = {f"mini-{i}": "mini-m4-pro" for i in range(1, 6)}
    mesh = ["mini-1:1 -- mini-2:1", "mini-1:2 -- mini-3:1", "mini-1:3 -- mini-4:1",
            "mini-2:2 -- mini-3:2", "mini-2:3 -- mini-4:2", "mini-3:3 -- mini-4:3"]
    advice = advise("mini-5", *_hosts(models, mesh), "jaccl")
    assert advice.summary() == (
        "a full mesh is impossible: mini-1, mini-2, mini-3, mini-4 and mini-5 (Mac mini, mini-m4-pro) have 3 "
        "Thunderbolt ports that carry RDMA and a full mesh of 5 Macs needs 4 on every Mac; the best alternative is "
        "jaccl-ring: 2 cables to add after unplugging 1 for a ring (mini-1 -> mini-3 -> mini-4 -> mini-2 -> mini-5 -> "
        "mini-1) (jaccl-ring): unplug the cable between mini-1 Thunderbolt 1 and mini-2 Thunderbolt 1; connect mini-5 "
        "Thunderbolt 1 to mini-1 Thunderbolt 1; connect mini-5 Thunderbolt 2 to mini-2 Thunderbolt 1")

"""A new Mac judged against the cluster (plugin_utils.checks.onboarding), on facts as the modules return them."""

from __future__ import annotations

from factories import MESH, Cluster, joining, onboarding_macos

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.onboarding import assess

def test_a_fourth_studio_gets_a_mesh_its_model_and_the_recovery_step():
    cluster, macos = joining()
    onboarding = assess("new", macos, cluster.facts, models={h: "studio-m3-ultra" for h in macos if h != "new"},
                        cables=MESH)
    assert not onboarding.errors and onboarding.model == "studio-m3-ultra"
    assert onboarding.add == ["new:2 -- studio-1:4", "new:3 -- studio-2:4", "new:4 -- studio-3:4"]
    assert onboarding.seen == [] and onboarding.unplug == []
    assert onboarding.needs_recovery and "needs the Recovery step" in onboarding.rdma


def test_a_serial_the_inventory_has_is_refused():
    cluster, macos = joining(serial_number="SERIAL1")
    onboarding = assess("new", macos, cluster.facts, cables=MESH)
    assert onboarding.errors == ["new: serial number SERIAL1 is already in the inventory as studio-2: it is the same "
                                 "Mac; onboard it under that name, or take studio-2 out of the inventory first"]


def test_cables_already_plugged_or_planned_are_the_new_mac_s_and_a_missing_plan_is_started():
    cluster, macos = joining()
    cluster.cable("new:2", "studio-1:4")
    onboarding = assess("new", macos, cluster.facts, cables=MESH + ["studio-2:4 -- new:3"])
    assert onboarding.add == ["new:3 -- studio-2:4", "new:2 -- studio-1:4", "new:4 -- studio-3:4"]
    assert onboarding.seen == ["new:2 -- studio-1:4"]
    assert onboarding.seen_steps == ["connect new Thunderbolt 2 to studio-1 Thunderbolt 4"]
    no_plan = assess("new", macos, cluster.facts, cables=None)
    assert no_plan.add == MESH + ["new:2 -- studio-1:4", "new:3 -- studio-2:4", "new:4 -- studio-3:4"]
    assert no_plan.seen == MESH + ["new:2 -- studio-1:4"]


def test_auto_takes_the_ring_when_a_mesh_is_impossible_and_jaccl_stops():
    cluster = Cluster.of("studio-m3-ultra", 4)
    joined = Cluster({**cluster.models, "mini-5": "mini-m4-pro"}, no_rdma=("mini-5",))
    joined.facts.update(cluster.facts)
    macos = onboarding_macos(joined, build_version="25D60", product_version="26.3")
    auto = assess("mini-5", macos, joined.facts, cables=None)
    assert auto.advice.backend == "jaccl-ring" and len(auto.add) == 6 + 2
    assert auto.notes[0] == ("a full mesh is impossible: mini-5 (Mac mini, mini-m4-pro) has 3 Thunderbolt ports "
                             "that carry RDMA and a full mesh of 5 Macs needs 4 on every Mac; auto goes ahead with "
                             "the best alternative, jaccl-ring")
    assert auto.notes[1] == ("mini-5 runs macOS 26.3 (25D60) and the cluster 26.2 (25C56): Macs on different builds "
                             "fail in odd ways; update them to one build")
    jaccl = assess("mini-5", macos, joined.facts, cables=None, backend="jaccl")
    assert jaccl.add == [] and len(jaccl.errors) == 1
    assert jaccl.errors[0].startswith("mini-5: a full mesh is impossible: mini-5 (Mac mini, mini-m4-pro) has 3 ")
    assert jaccl.errors[0].endswith("; to go ahead with it, set mlx_fleet_backend: jaccl-ring and run again")
    assert "the best alternative is jaccl-ring: 2 cables to add for a ring" in jaccl.errors[0]


def test_a_thunderbolt_4_mac_is_said_not_to_fit_an_rdma_backend():
    cluster, macos = joining("mini-m4", rdma_new=False)
    onboarding = assess("new", macos, cluster.facts, cables=MESH, backend="jaccl-ring")
    assert onboarding.advice.backend == "jaccl-ring" and not onboarding.needs_recovery
    assert onboarding.notes[-1].endswith("jaccl-ring cannot include it: use ring")

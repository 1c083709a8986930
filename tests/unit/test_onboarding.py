"""A new Mac judged against the cluster (plugin_utils.checks.onboarding), on facts as the modules return them."""

from __future__ import annotations

from factories import MESH, Cluster, joining, onboarding_macos

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.onboarding import assess
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma

def test_a_fourth_studio_gets_a_mesh_its_model_and_the_recovery_step():
    cluster, macos = joining()
    onboarding = assess("new", macos, cluster.facts, models={h: "studio-m3-ultra" for h in macos if h != "new"},
                        cables=MESH)
    assert not onboarding.errors and onboarding.model == "studio-m3-ultra"
    assert onboarding.add == ["new:2 -- studio-1:4", "new:3 -- studio-2:4", "new:4 -- studio-3:4"]
    assert onboarding.seen == [] and onboarding.unplug == []
    assert onboarding.needs_recovery and onboarding.rdma_status == rdma.NEEDS_RECOVERY


def test_a_serial_the_inventory_has_is_refused():
    cluster, macos = joining(serial_number="SERIAL1")
    onboarding = assess("new", macos, cluster.facts, cables=MESH)
    assert onboarding.same_mac == "studio-2" and onboarding.add == []
    [error] = onboarding.errors
    assert error.startswith("new: ") and "SERIAL1" in error and "studio-2" in error


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
    # Two notes: why auto left the mesh (the Mac's 3 RDMA ports, 4 needed), then the build it differs by.
    mesh, build = auto.notes
    assert all(word in mesh.split() for word in ("mini-5", "3", "4", "jaccl-ring"))
    assert "(25D60)" in build.split() and "(25C56):" in build.split()
    jaccl = assess("mini-5", macos, joined.facts, cables=None, backend="jaccl")
    assert jaccl.add == [] and len(jaccl.errors) == 1
    wanted = jaccl.advice  # the mesh asked for, impossible, with the ring it could be instead
    assert (wanted.backend, wanted.possible, wanted.cables) == ("jaccl", False, [])
    assert (wanted.alternative.backend, wanted.alternative.topology, len(wanted.alternative.cables)) == (
        "jaccl-ring", "ring", 2)
    assert jaccl.errors[0].startswith("mini-5: ") and "mlx_fleet_backend: jaccl-ring" in jaccl.errors[0]


def test_a_thunderbolt_4_mac_is_said_not_to_fit_an_rdma_backend():
    cluster, macos = joining("mini-m4", rdma_new=False)
    onboarding = assess("new", macos, cluster.facts, cables=MESH, backend="jaccl-ring")
    assert onboarding.advice.backend == "jaccl-ring" and not onboarding.needs_recovery
    # The note: this Mac's readiness, then the backend to use instead.
    assert onboarding.rdma_status == rdma.NOT_CAPABLE and onboarding.notes[-1].startswith(onboarding.rdma)
    assert onboarding.notes[-1].split()[-1] == "ring"

"""render.rdma_summary: the cluster's RDMA readiness in words, one line per case."""

from __future__ import annotations

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.render.rdma_summary import blocking, summary
from factories import ReadinessCluster, minis


def test_all_ready_names_what_the_cabling_supports():
    assert summary(minis(3).mesh().assess()) == "all 3 Macs are ready for RDMA; the cabling supports jaccl (full mesh)"


def test_the_recovery_step_to_do_says_what_it_gains_and_what_runs_until_then():
    assert summary(minis(disabled=("mini-3", "mini-4")).mesh().assess()) == (
        "once mini-3 and mini-4 are enabled from Recovery, the cabling supports jaccl (full mesh); "
        "until then auto falls back to ring (no RDMA)")


def test_a_mac_that_cannot_do_rdma_keeps_ring():
    cluster = ReadinessCluster({"mini-1": "mini-m4-pro", "mini-2": "mini-m4-pro", "mini-3": "mini-m4"},
                               disabled=("mini-2", "mini-3")).mesh()
    assert summary(cluster.assess()) == (
        "once mini-2 is enabled from Recovery, the cabling still supports only ring (no RDMA); "
        "mini-3 cannot do RDMA, so ring is the way for it")


def test_rdma_on_but_not_working_is_named():
    cluster = minis(3).mesh()
    for host, n in (("mini-1", 2), ("mini-3", 1)):
        cluster.tb[host]["ports"][n - 1]["rdma_state"] = "PORT_DOWN"
    assert summary(cluster.assess()) == ("no Mac needs the Recovery step; the cabling supports ring (no RDMA); "
                                         "mini-1 and mini-3 have RDMA enabled but not working")


def test_an_rdma_backend_asked_for_names_who_blocks_it():
    blocked = minis(disabled=("mini-3", "mini-4")).mesh().assess(backend="jaccl")
    assert blocking(blocked) == ("mlx_fleet_backend jaccl needs RDMA on every Mac: mini-3 and mini-4 need the "
                                 "Recovery step")
    assert summary(blocked).endswith("; until then jaccl cannot run")

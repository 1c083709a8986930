"""Checks that guard the cluster's integrity, each pinned by a test that fails when the check is
taken out: an RDMA backend is blocked by any Mac still waiting for the Recovery step, macOS versions
compare as numbers, and a version must be nothing but its numbers."""

from __future__ import annotations

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.rdma import readiness as rdma
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.checks.inventory_checks import check_inventory
from factories import GOOD, check_node, minis

RING = (("mini-1:1", "mini-2:1"), ("mini-2:2", "mini-3:1"), ("mini-3:2", "mini-4:1"), ("mini-4:2", "mini-1:2"))


@pytest.mark.parametrize("backend", ["jaccl", "jaccl-ring"])
def test_an_rdma_backend_is_blocked_by_a_mac_that_needs_the_recovery_step(backend):
    cluster = minis(4, disabled=("mini-3",))
    for a, b in RING:
        cluster.cable(a, b)
    assessment = cluster.assess(backend=backend)
    assert assessment.hosts(rdma.NEEDS_RECOVERY) == ["mini-3"] and assessment.hosts(rdma.NOT_CAPABLE) == []
    assert assessment.blocked
    assert not cluster.assess(backend="ring").blocked


def test_macos_26_10_is_newer_than_26_2():
    cluster = minis(2, version=("26.10", "25K10")).mesh()
    assert {r.status for r in cluster.assess().nodes.values()} == {rdma.READY}
    assert check_node("m1", GOOD | {"product_version": "26.10"}, {"mlx_fleet_min_macos": "26.2"},
                      become_password=False) == []


@pytest.mark.parametrize("version", ["26.2beta", "26.2\n", "26.2.1.4", "v26.2"])
def test_a_version_is_nothing_but_its_numbers(version):
    [problem] = check_inventory({"m1": {}}, {"mlx_fleet_min_macos": version})  # the variable, its value quoted
    assert problem.startswith("mlx_fleet_min_macos: ") and repr(version) in problem

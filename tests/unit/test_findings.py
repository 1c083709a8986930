"""The one Finding, its table of kinds, the renderer (the one place findings become sentences) and the judges that
the audit, the watch and verify share."""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.judge import facts as judges
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import Cable, Port
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.findings import KINDS, Finding, cleared, line, lines

OFF = {"device": "bridge0", "active": False, "members": [], "service_enabled": False}


def test_findings_alike_but_for_their_macs_are_one_line_naming_all_of_them():
    off = [judges.rdma_off(host, False, True) for host in ("mini-1", "mini-2", "mini-3")]
    assert lines(off + [judges.sleep("mini-2", {"sleep": 10})]) == [
        "mini-1, mini-2 and mini-3: RDMA is off (rdma_ctl status: disabled), where the last converge saw it ready; "
        "the Recovery checklist: {checklist}, then {site}",
        "mini-2: system sleep is 10 min (pmset sleep): an idle Mac drops out of the cluster; {node}"]
    assert line(off[0]) == lines(off[:1])[0]
    assert cleared(off[0]) == "mini-1: RDMA is on again"


def test_every_judge_speaks_a_kind_of_the_table_and_reads_back_from_json():
    cable = Cable(Port("a", 1), Port("b", 2))
    port = {"receptacle": 1, "rdma_device": "rdma_en2", "rdma_state": "PORT_DOWN", "connected": True,
            "rdma_gids": ["fe80::1"]}
    found = [judges.unreachable("a", "timed out"), judges.bridge("a", OFF | {"active": True}, "disabled"),
             judges.sleep("a", {"sleep": 5}), judges.rdma_off("a", False, True), judges.stale_rdma("a", True),
             judges.port_address("a", 1, "en2", [], "10.0.0.1/30"),
             judges.rdma_port("a", port, enabled=True, seen_ready=True), judges.rdma_gid("a", port, ["10.0.0.1/30"]),
             judges.same_build({"a": "26.2 (25C56)", "b": "26.3 (25D20)"}),
             judges.same_environment({"a": "0" * 64, "b": "1" * 64}), judges.fast_synch(["a"], ["MLX_METAL_FAST_SYNCH=1"]),
             judges.cable_out(cable, "no link"), judges.moved(cable, Cable(Port("a", 2), Port("b", 2))),
             judges.extra(cable), judges.slow(cable, 40, 80)]
    assert all(f is not None and f.kind in KINDS for f in found)
    assert all(Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f for f in found)


@pytest.mark.parametrize("bridge, wanted, drift", [
    (OFF, "disabled", False),
    (OFF | {"active": True}, "disabled", True),  # active with no members: drift (the audit's rule, and the watch's)
    (OFF | {"service_enabled": True}, "disabled", True),
    (OFF | {"service_enabled": True, "active": True}, "enabled", False),
    (OFF, "enabled", True),
    (OFF | {"active": True}, "unmanaged", False),  # anything but enabled or disabled: left as it is
])
def test_the_bridge_is_judged_once(bridge, wanted, drift):
    assert (judges.bridge("m1", bridge, wanted) is not None) == drift


def test_a_moved_cable_is_judged_as_the_converge_judges_it():
    was, now = Cable(Port("a", 1), Port("b", 1)), Cable(Port("a", 3), Port("b", 1))
    rewired = judges.rewired([was], [now])
    assert [(f.kind, f.expected, f.found) for f in rewired.findings] == [("moved", "a:1 -- b:1", "a:3 -- b:1")]
    assert rewired.moved == {was.key}
    assert judges.rewired([], [now]).findings == []  # no last converge: nothing to compare with


def test_every_kind_is_spelled_one_way_lower_case_and_hyphenated():
    """Users' scripts read the ``kind`` of the fabric's result and of audit.json: one spelling for all of them."""
    assert [kind for kind in KINDS if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", kind)] == []

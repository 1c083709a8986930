"""Cable plan parsing and the simulator's generated layouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.declare.cable_plan import CablePlanError, Port, parse_cable, parse_cables
from mlx_fleet.sim.plan_file import load_plan_file
from mlx_fleet.sim.layout import build_layout, generated_cables
from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.mac_models import MODELS


@pytest.mark.parametrize("text", ["a:1 -- b:2", "a:tb1--b:Thunderbolt 2", "  a : 1 --b:2 "])
def test_cable_spellings(text):
    cable = parse_cable(text)
    assert (cable.a, cable.b) == (Port("a", 1), Port("b", 2))
    assert str(cable) == "a:1 -- b:2"


def test_cable_identity_ignores_orientation():
    assert parse_cable("a:1 -- b:2").key == parse_cable("b:2 -- a:1").key


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (["a:1 - b:2"], "cable 'a:1 - b:2' is not 'host:port -- host:port'"),
        (["a:1 -- a:2"], "cable 'a:1 -- a:2' connects a to itself"),
        (["a:x -- b:2"], "cable end 'a:x' is not host:port (port = Thunderbolt receptacle number)"),
        (["a:0 -- b:2"], "cable end 'a:0': Thunderbolt ports are numbered from 1"),
        (["a:1 -- c:2"], "cable a:1 -- c:2: unknown host 'c'"),
        (["a:4 -- b:2"], "cable a:4 -- b:2: a has Thunderbolt ports 1-3, not 4"),
        (["a:1 -- b:2", "a:1 -- b:3"], "cable a:1 -- b:3: port a:1 is already used by cable a:1 -- b:2"),
    ],
)
def test_cable_plan_errors_are_one_line_and_exact(entries, message):
    with pytest.raises(CablePlanError) as err:
        parse_cables(entries, {"a": 3, "b": 3})
    assert str(err.value) == message


def test_plan_file(tmp_path):
    plan = tmp_path / "plan.yml"
    plan.write_text("nodes:\n  s1: {model: studio-m3-ultra}\n  s2: {model: studio-m3-ultra, rdma: false}\n"
                    "cables:\n  - s1:2 -- s2:2\n")
    layout = build_layout(None, None, str(plan), "plan")
    assert list(layout.models) == ["s1", "s2"]
    assert [str(c) for c in layout.cables] == ["s1:2 -- s2:2"]
    assert layout.rdma == {"s1": True, "s2": False}
    plan.write_text("cables: []\n")
    with pytest.raises(CablePlanError, match="needs a 'nodes:' mapping"):
        load_plan_file(plan)


def test_the_declared_inventory_is_a_plan_the_sim_can_build():
    example = Path(__file__).resolve().parents[2] / "inventory" / "example"
    layout = build_layout(None, None, str(example), "plan")
    assert list(layout.models) == ["studio-1", "studio-2", "studio-3"]
    assert {m.key for m in layout.models.values()} == {"studio-m3-ultra"}
    assert [str(c) for c in layout.cables] == ["studio-1:2 -- studio-2:2", "studio-1:3 -- studio-3:2",
                                               "studio-2:3 -- studio-3:3"]
    assert load_plan_file(example / "hosts.yml").cables == [str(c) for c in layout.cables]


def test_generated_mesh_is_complete_and_avoids_ports_without_rdma():
    studio = MODELS["studio-m3-ultra"]
    models = {f"s{i}": studio for i in range(1, 5)}
    cables = generated_cables(models, "mesh")
    pairs = {frozenset((c.a.host, c.b.host)) for c in cables}
    assert len(cables) == 6 and len(pairs) == 6
    assert all(end.receptacle != 1 for c in cables for end in (c.a, c.b)), "Thunderbolt 1 sits beside Ethernet"
    parse_cables([str(c) for c in cables], {n: 6 for n in models})  # no port used twice


def test_generated_ring_and_line():
    mini = MODELS["mini-m4-pro"]
    models = {f"m{i}": mini for i in range(1, 6)}
    ring = [(c.a.host, c.b.host) for c in generated_cables(models, "ring")]
    assert ring == [("m1", "m2"), ("m2", "m3"), ("m3", "m4"), ("m4", "m5"), ("m5", "m1")]
    assert len(generated_cables(models, "line")) == 4


def test_mesh_larger_than_the_ports_allow_is_refused():
    with pytest.raises(CablePlanError, match="has only 3 Thunderbolt ports"):
        build_layout(5, "mini-m4-pro", "mesh", "all")


def test_rdma_selection():
    assert build_layout(3, None, "mesh", "mini-2").rdma == {"mini-1": False, "mini-2": True, "mini-3": False}
    with pytest.raises(CablePlanError, match="unknown node"):
        build_layout(3, None, "mesh", "mini-9")

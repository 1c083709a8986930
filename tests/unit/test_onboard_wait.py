"""`mlx-fleet onboard --wait-for-cables`: the advised cables (the plan's ``add``, lower end first) are matched
with the cables the fabric finds by name, as both write them; nothing is parsed back from text."""

from __future__ import annotations

import io

from mlx_fleet import onboard


class _Report:
    def __init__(self, fabric):
        self.fabric, self.unreachable = fabric, {}

    def result(self, name):
        return self.fabric if name == "mlx_fleet.cluster.fabric" else None


def test_the_wait_ends_when_every_advised_cable_is_found(monkeypatch, tmp_path):
    move = "new Thunderbolt 4 is cabled to mini-2 Thunderbolt 3, the plan says new Thunderbolt 1: move it"
    rounds = iter([
        {"cables": {"mini-1:1 -- new:2": 80.0}, "findings": [
            {"kind": "wrong-port", "cable": "mini-2:3 -- new:1", "message": move}]},
        {"cables": {"mini-1:1 -- new:2": 80.0, "mini-2:3 -- new:1": 80.0}, "findings": []},
    ])
    monkeypatch.setattr(onboard.runner, "run_playbook", lambda *a, **k: _Report(next(rounds)))
    monkeypatch.setattr(onboard, "POLL_SECONDS", 0)
    out = io.StringIO()
    assert onboard.wait_for_cables(["inv"], ["mini-1:1 -- new:2", "mini-2:3 -- new:1"], tmp_path, 60, {}, out)
    # The fabric's own line for the cable in the wrong port, once; then the count of cables in, per round,
    # with the one still awaited named.
    said, *rounds_said = out.getvalue().splitlines()
    assert said == move and [line.split("; ")[0] for line in rounds_said] == ["cables: 1/2 in", "cables: 2/2 in"]
    assert rounds_said[0].endswith(" mini-2:3 -- new:1")

"""Fixtures that build simulated clusters with the real `mlx-fleet sim` command."""

from __future__ import annotations

import os

import pytest

from simlib import Sim


def pytest_collection_modifyitems(items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="macsim needs root")
        for item in items:
            if "sim" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def make_sim():
    made: list[Sim] = []

    def make(**up_args) -> Sim:
        sim = Sim(**up_args)
        made.append(sim)
        return sim

    yield make
    for sim in made:
        sim.down()

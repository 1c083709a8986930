"""Argument types the CLI's commands share."""

from __future__ import annotations

import argparse

from ansible_collections.mlx_fleet.cluster.plugins.plugin_utils.base.waits import DAY, HOUR, bounded_seconds


def _bounded(text: str, most: float) -> float:
    try:
        return bounded_seconds(text, most)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds(text: str) -> float:
    """A positive, finite number of seconds, at most an hour (a wait between looks, a connection's): `nan`
    compares false with every deadline, so a wait bounded by it never ends, `inf` is no bound either, and a
    huge value sleeps for decades."""
    return _bounded(text, HOUR)


def long_seconds(text: str) -> float:
    """As `seconds`, up to a day: a bound on something slow, such as a Mac preparing and installing macOS."""
    return _bounded(text, DAY)

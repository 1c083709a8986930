"""Argument types the CLI's commands share."""

from __future__ import annotations

import argparse
import math

HOUR = 3600.0
DAY = 24 * HOUR


def _bounded(text: str, most: float, unit: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= most:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0 and at most {most:.0f} "
                                         f"({unit})")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds, at most an hour (a wait between looks, a connection's): `nan`
    compares false with every deadline, so a wait bounded by it never ends, `inf` is no bound either, and a
    huge value sleeps for decades."""
    return _bounded(text, HOUR, "an hour")


def long_seconds(text: str) -> float:
    """As `seconds`, up to a day: a bound on something slow, such as a Mac preparing and installing macOS."""
    return _bounded(text, DAY, "a day")

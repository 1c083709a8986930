"""A wait's bound, judged once for the CLI's options and the action plugins' arguments: a positive, finite
number of seconds up to a limit (`nan` compares false with every deadline, so a wait bounded by it never ends,
`inf` is no bound either, and a huge value sleeps for decades)."""

from __future__ import annotations

import math

HOUR = 3600.0
DAY = 24 * HOUR
SPANS = {HOUR: "an hour", DAY: "a day"}


def bounded_seconds(value, most: float) -> float:
    """VALUE (a number or its text) as seconds above 0 and at most MOST; ValueError saying why not."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(seconds) or not 0 < seconds <= most:
        raise ValueError(f"{value!r}: give a number of seconds above 0 and at most {most:.0f} "
                         f"({SPANS.get(most, f'{most:.0f} seconds')})")
    return seconds

"""macOS versions as a Mac prints them, compared as numbers."""

from __future__ import annotations

import re


def version_tuple(text: str) -> tuple[int, ...]:
    """(26, 2) from "26.2"; tolerant of suffixes a Mac may print ("26.2 beta")."""
    return tuple(int(part) for part in re.findall(r"\d+", str(text or "")))

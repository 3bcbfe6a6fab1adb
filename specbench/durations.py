"""Durations as people write them — ``50ms``, ``0.2s``, ``90s``, ``20m``, ``1.5h`` — read by one parser.

`parse_duration` turns a number and a unit of `UNIT_S` into seconds; each caller says which units make sense
for it (an SLO's latency: ``us``, ``ms``, ``s``; a sweep's wall-time budget: ``s`` to ``d``) and whether a bare
number means seconds, and words its own error (the flag or key, and an example) when the answer is None.
Units are read in any case (``20M`` is twenty minutes). Imports nothing of specbench: the CLI, measure/ and
analysis/ all read it.
"""

from __future__ import annotations

import re
from collections.abc import Collection

UNIT_S = {
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "d": 86400.0,
}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def parse_duration(value, units: Collection[str], *, bare: bool = False) -> float | None:
    """Seconds of ``value``: a non-negative number followed by one of ``units`` (keys of `UNIT_S`), or — with
    ``bare`` — a plain number of seconds (``600``, ``"600"``). None when ``value`` is no such duration (a
    boolean never is one)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if bare else None
    match = _DURATION.match(str(value))
    if not match:
        return None
    unit = match.group(2).lower()
    if not unit:
        return float(match.group(1)) if bare else None
    if unit not in units:
        return None
    return float(match.group(1)) * UNIT_S[unit]

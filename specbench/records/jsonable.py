"""Plain JSON-ready data out of results: numpy scalars become Python numbers, NaN/±inf become null."""

from __future__ import annotations

import math

import numpy as np


def json_ready(value):
    """A copy of ``value`` (dicts, lists, tuples, scalars) that `json.dumps` writes as strict JSON."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_ready(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value

#!/usr/bin/env python
"""Compare the records of two results folders unit by unit, timings left out.

    python scripts/compare_records.py results/before results/after

Units are matched by (``unit_id``, ``mode``). For every column both folders have, except those that
measure time (``*_s``), memory, load or the machine (`TIMING`), the two records must hold equal values (lists
compared element by element, NaN equal to NaN, floats to 1e-9 relative). Columns only one folder has
are listed, not compared: a change that adds columns passes. Prints the units compared, the matches
and, per differing column, the first units that differ; exits 1 when any unit differs or is missing.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import pandas as pd

from specbench.records.store import load_records

# what varies from run to run however right the code is: clocks (every *_s column), memory, load, the machine,
# the time, and the timing protocol's verdicts on them
TIMING = (
    "device",
    "timestamp",
    "peak_memory_bytes",
    "memory_kind",
    "load_1m",
    "other_cores",
    "cpu_mhz",
    "timing_ok",
    "timing_flag",
    "timing_attempts",
    "timing_kept",
    "attempt_other_cores",
    "node",  # where a Ray worker ran the unit: node, node_device, node_groups
    "node_device",
    "node_groups",
)


def is_timing(column: str) -> bool:
    return column.endswith(("_s", "_ms")) or column in TIMING


def same(a, b) -> bool:
    if isinstance(a, (list, tuple, np.ndarray)) or isinstance(b, (list, tuple, np.ndarray)):
        a, b = list(a if a is not None else []), list(b if b is not None else [])
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or (isinstance(a, float) and math.isnan(a))) and (
            b is None or (isinstance(b, float) and math.isnan(b))
        )
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def compare(before: pd.DataFrame, after: pd.DataFrame) -> dict:
    keys = ["unit_id", "mode"]
    left, right = before.set_index(keys), after.set_index(keys)
    shared = [c for c in left.columns if c in right.columns and not is_timing(c)]
    units = left.index.intersection(right.index)
    differ: dict[str, list] = {}
    for unit in units:
        a, b = left.loc[unit], right.loc[unit]
        for column in shared:
            if not same(a[column], b[column]):
                differ.setdefault(column, []).append(unit)
    bad = {u for us in differ.values() for u in us}
    return {
        "units": len(units),
        "matched": len(units) - len(bad),
        "only_before": len(left.index.difference(units)),
        "only_after": len(right.index.difference(units)),
        "compared_columns": len(shared),
        "differ": differ,
        "new_columns": sorted(set(right.columns) - set(left.columns)),
        "dropped_columns": sorted(set(left.columns) - set(right.columns)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    result = compare(load_records(args.before), load_records(args.after))
    print(
        f"{result['units']} units in both folders, {result['matched']} identical in "
        f"{result['compared_columns']} non-timing columns; only before: {result['only_before']}, "
        f"only after: {result['only_after']}"
    )
    print(
        f"new columns: {', '.join(result['new_columns']) or 'none'}; "
        f"dropped columns: {', '.join(result['dropped_columns']) or 'none'}"
    )
    for column, units in sorted(result["differ"].items()):
        print(f"  {column}: {len(units)} units differ, e.g. {units[:3]}")
    ok = not result["differ"] and not result["only_before"] and not result["only_after"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

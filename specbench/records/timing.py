"""Which records' timings may enter a timing fit: rule 6 of the timing protocol, for readers.

A unit timed under interference from other processes (``timing_ok`` false, written by
`specbench.measure.timing_protocol`) keeps its acceptance figures but is left out of timing
fits — unless every unit was disturbed, in which case all are used and the note says so.
"""

from __future__ import annotations

import pandas as pd


DISTURBED = "timing disturbed"  # how the note on a folder whose every timed unit was disturbed begins


def timing_usable(records: pd.DataFrame) -> tuple[pd.DataFrame, str | None]:
    """Rule 6 for readers: the records whose timings may enter a timing fit, and a note.

    Records without the column (older results) all count as undisturbed.
    """
    if records.empty or "timing_ok" not in records:
        return records, None
    ok = records["timing_ok"].fillna(True).astype(bool)
    if ok.all():
        return records, None
    if not ok.any():
        return records, (f"{DISTURBED}: all {len(records)} timed units ran under interference from other "
                         "processes (docs/results-schema.md, timing protocol); timings used anyway — rerun on a "
                         "quieter machine to confirm")
    return records[ok], (f"{int((~ok).sum())} of {len(records)} timed units ran under interference and are left out "
                         "of the timing fits (their acceptance counts)")


NO_ROUND_TIMINGS = ("no per-round timings in these records (a serving engine measures whole requests, not "
                    "draft and verify steps): no cost model and no predicted speedups; decisions use the "
                    "measured speedups")


def has_round_timings(records: pd.DataFrame) -> bool:
    """Whether speculative records carry the draft/verify timings a cost fit needs (the own engine's
    do; a serving backend's hold NaN, docs/backends.md)."""
    return "verify_s" in records and bool(records["verify_s"].notna().any())

"""Which records' timings may enter a timing fit or a paired speedup: rule 6 of the timing protocol, for readers.

A unit timed under interference from other processes (``timing_ok`` false, written by
`specbench.measure.timing.timing_protocol`) keeps its acceptance figures but is left out of timing
fits — unless every unit was disturbed, in which case all are used and the note says so
(`timing_usable`).

A speedup compares a configuration with its baseline unit by unit (same prompt, turn and repeat, same
scenario and load), so its rule is the pairs' (`paired_timing`): the pairs whose both sides ran
undisturbed, or — when no pair did — every pair, and the comparison is flagged as disturbed. Every
reader of a comparison (the verdict, the per-load table and verdicts, the crossover, the figures) takes
its units from `paired_timing`, so they all read the same records.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

UNIT_KEYS = ["prompt_id", "turn", "repeat"]  # one unit of a configuration: a prompt's turn, one repeat


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
        return records, (
            f"{DISTURBED}: all {len(records)} timed units ran under interference from other "
            "processes (docs/results-schema.md, timing protocol); timings used anyway — rerun on a "
            "quieter machine to confirm"
        )
    return records[ok], (
        f"{int((~ok).sum())} of {len(records)} timed units ran under interference and are left out "
        "of the timing fits (their acceptance counts)"
    )


def _ok(frame: pd.DataFrame) -> pd.Series:
    return frame["timing_ok"].fillna(True).astype(bool) if "timing_ok" in frame else pd.Series(True, frame.index)


@dataclass(frozen=True)
class PairedUnits:
    """The units a speedup of one configuration over its baseline uses (one row of each per pair, same order)."""

    config: pd.DataFrame
    base: pd.DataFrame
    disturbed: bool  # no pair ran undisturbed on both sides: every pair is used, and the speedup is flagged
    pairs: int  # pairs used
    all_pairs: int  # pairs available (undisturbed or not)


def paired_timing(config: pd.DataFrame, base: pd.DataFrame) -> PairedUnits:
    """Rule 6 for a paired comparison (module docstring): ``config``'s and ``base``'s units (one scenario, one
    load) joined by (prompt, turn, repeat); the pairs whose both units ran undisturbed, or every pair, flagged,
    when none did. Units without a partner are left out (a speedup is paired). ``config`` may be ``base`` itself
    (the baseline's own row): each unit is its own partner."""
    left = config.reset_index(drop=True)
    right = base.reset_index(drop=True)
    index = pd.merge(
        left[UNIT_KEYS].assign(_left=range(len(left))),
        right[UNIT_KEYS].assign(_right=range(len(right))),
        on=UNIT_KEYS,
        how="inner",
    )
    ok = _ok(left).to_numpy()[index["_left"].to_numpy()] & _ok(right).to_numpy()[index["_right"].to_numpy()]
    disturbed = bool(len(index)) and not ok.any()
    used = index if disturbed else index[ok]
    return PairedUnits(
        left.iloc[used["_left"].to_numpy()].reset_index(drop=True),
        right.iloc[used["_right"].to_numpy()].reset_index(drop=True),
        disturbed,
        len(used),
        len(index),
    )


def paired_note(records: pd.DataFrame) -> str | None:
    """What rule 6 did to a scenario's paired comparisons, in a sentence (None: nothing was disturbed); a
    note that begins with `DISTURBED` when every unit was."""
    kept, note = timing_usable(records)
    if note is None or note.startswith(DISTURBED):
        return note
    return (
        f"{int(len(records) - len(kept))} of {len(records)} timed units ran under interference: each speedup "
        "uses the (configuration, baseline) pairs timed undisturbed on both sides, and a configuration with no "
        "such pair is marked disturbed and left out of the verdict while others have one"
    )


NO_ROUND_TIMINGS = (
    "no per-round timings in these records (a serving engine measures whole requests, not "
    "draft and verify steps): no cost model and no predicted speedups; decisions use the "
    "measured speedups"
)


def has_round_timings(records: pd.DataFrame) -> bool:
    """Whether speculative records carry the draft/verify timings a cost fit needs (the own engine's
    do; a serving backend's hold NaN, docs/backends.md)."""
    return "verify_s" in records and bool(records["verify_s"].notna().any())

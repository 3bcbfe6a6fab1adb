"""A confirmation's paired ratios: one arm's tokens/s ÷ another's on the same fresh prompts (`compare`), the system
output tokens/s at one load (`compare_system`), and a schedule's cliffs at its thresholds (`cliff`).

Every ratio is `speedup_interval`'s (Σ decode tokens ÷ Σ decode seconds per prompt, a t-interval on the per-prompt
log-ratio contributions) with its ends at a `VerdictRule`'s levels: adjusted for the planned looks.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from specbench.analysis.load.table import system_rate
from specbench.analysis.recommendation.confirm_targets import NAN, Arm, finite, number
from specbench.analysis.statistics.sequential import VerdictRule
from specbench.analysis.statistics.speedup_interval import MIN_PROMPTS, speedup_interval, speedup_words

# ----------------------------------------------------------------------------- paired ratios


@dataclass
class Comparison:
    """One arm's tokens/s ÷ a reference's on the same fresh prompts, with its look-adjusted interval."""

    arm: str
    reference: str
    ratio: float
    lo: float  # look-adjusted two-sided ends (NaN below `MIN_PROMPTS` prompts)
    hi: float
    log_se: float
    dof: float
    n_prompts: int
    disturbed: bool = False  # fewer than MIN_PROMPTS prompts were timed without interference on both sides

    @property
    def has_interval(self) -> bool:
        return finite(self.lo) and finite(self.hi)

    @property
    def text(self) -> str:
        if not finite(self.ratio):
            return "-"
        return speedup_words(self.ratio, self.lo, self.hi) if self.has_interval else f"{self.ratio:.2f}×"

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> Comparison:
        return cls(
            str(data.get("arm")),
            str(data.get("reference")),
            number(data.get("ratio")),
            number(data.get("lo")),
            number(data.get("hi")),
            number(data.get("log_se")),
            number(data.get("dof")),
            int(data.get("n_prompts") or 0),
            bool(data.get("disturbed")),
        )


def per_prompt(records: pd.DataFrame, arm: Arm) -> pd.DataFrame:
    """Per fresh prompt (and repeat): Σ decode tokens, Σ decode seconds over its turns, and whether every turn
    was timed without interference; live records of ``arm`` only."""
    mine = records[arm.mask(records) & (records["mode"] == "live")]
    ok = mine["timing_ok"].fillna(True).astype(bool) if "timing_ok" in mine else pd.Series(True, index=mine.index)
    frame = mine.assign(ok=ok)
    return frame.groupby(["prompt_id", "repeat"], sort=True).agg(
        tokens=("decode_tokens", "sum"), seconds=("decode_s", "sum"), ok=("ok", "all")
    )


def compare(records: pd.DataFrame, arm: Arm, reference: Arm, rule: VerdictRule) -> Comparison:
    """``arm`` ÷ ``reference`` in tokens/s over the prompts both ran, ends at ``rule``'s two one-sided levels
    (one configuration, the planned looks). Prompts timed under interference on either side are left out,
    unless fewer than `MIN_PROMPTS` remain (then all count, and the comparison is marked disturbed)."""
    both = per_prompt(records, arm).join(per_prompt(records, reference), how="inner", lsuffix="_arm", rsuffix="_ref")
    both = both[(both["seconds_arm"] > 0) & (both["seconds_ref"] > 0)]
    clean = both[both["ok_arm"] & both["ok_ref"]]
    disturbed = len(clean) < MIN_PROMPTS and len(both) > len(clean)
    used = both if disturbed else clean
    iv = speedup_interval(used["tokens_arm"], used["seconds_arm"], used["tokens_ref"], used["seconds_ref"])
    lo = rule.lower(iv.point, iv.log_se, iv.dof) if iv.has_interval else NAN
    hi = rule.upper(iv.point, iv.log_se, iv.dof) if iv.has_interval else NAN
    return Comparison(arm.name, reference.name, iv.point, lo, hi, iv.log_se, iv.dof, iv.n_prompts, disturbed)


def compare_system(records: pd.DataFrame, arm: Arm, reference: Arm, rule: VerdictRule) -> Comparison:
    """``arm`` ÷ ``reference`` in system output tokens/s (Σ tokens ÷ Σ batch wall time) at one load; its ends carry
    the relative width of the paired per-request ratio Σ new tokens ÷ Σ request latency
    (`specbench.analysis.load.table`: the mean requests in flight held at their measured values)."""
    mine, theirs = (records[a.mask(records) & (records["mode"] == "live")] for a in (arm, reference))
    (rate, _), (base_rate, _) = system_rate(mine), system_rate(theirs)
    columns = ["new_tokens", "latency_s"]
    both = (
        mine.groupby(["prompt_id", "repeat"])[columns]
        .sum()
        .join(theirs.groupby(["prompt_id", "repeat"])[columns].sum(), how="inner", rsuffix="_ref")
    )
    both = both[(both["latency_s"] > 0) & (both["latency_s_ref"] > 0)]
    iv = speedup_interval(both["new_tokens"], both["latency_s"], both["new_tokens_ref"], both["latency_s_ref"])
    point = rate / base_rate if base_rate > 0 else NAN
    usable = iv.has_interval and finite(point) and point > 0
    lo = rule.lower(point, iv.log_se, iv.dof) if usable else NAN
    hi = rule.upper(point, iv.log_se, iv.dof) if usable else NAN
    ok = pd.concat([mine, theirs])["timing_ok"] if "timing_ok" in records else pd.Series(dtype=object)
    disturbed = not bool(ok.fillna(True).astype(bool).all())
    return Comparison(arm.name, reference.name, point, lo, hi, iv.log_se, iv.dof, iv.n_prompts, disturbed)


def cliff(schedule_vs: list[Comparison], ranges, load: int) -> str | None:
    """A load where the schedule's system throughput lies confidently below both the best static setting and the
    baseline (each ratio's look-adjusted upper end under 1), named by the threshold it sits at; None otherwise."""
    if not schedule_vs or any(not c.has_interval or c.disturbed or c.hi >= 1.0 for c in schedule_vs):
        return None
    below = " and ".join(f"{c.text} {c.reference}'s" for c in schedule_vs)
    return f"cliff at {load} in flight, {threshold_at(ranges, load)}: the schedule's system tokens/s is {below}"


def threshold_at(ranges, load: int) -> str:
    """The schedule threshold a load sits at: 'just past the threshold at batch 4 (K 2 → 0)'."""
    ranges = sorted(tuple(r) for r in ranges)
    for i, (first, last, k) in enumerate(ranges):
        if first <= load <= last:
            if first == load and i > 0:
                return f"just past the threshold at batch {first} (K {ranges[i - 1][2]} → {k})"
            if last == load and i + 1 < len(ranges):
                return f"just below the threshold at batch {last + 1} (K {k} → {ranges[i + 1][2]})"
            return f"inside the range {first}–{last} (K {k})"
    return f"beyond the last range (its K {ranges[-1][2]} applies)" if ranges else "no schedule"


def threshold_loads(ranges) -> list[int]:
    """The loads that confirm a schedule on both sides of every threshold: each range's first and last batch size
    (``[[1,1,4],[2,3,2],[4,8,0]]`` → 1, 2, 3, 4, 8)."""
    return sorted({int(x) for first, last, _ in ranges for x in (first, last)})

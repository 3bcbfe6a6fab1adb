"""Whether a cost prediction lies inside what was timed: one rule for every axis a cost model takes.

A cost model prices a round at a batch size B and a context length c (tokens in the KV cache). What it
knows is what was timed: a profile's grid of batch sizes and context lengths
(`specbench.analysis.cost.profile`), or a sweep's own rounds (`specbench.analysis.cost.round_cost.MeasuredCost`:
batch 1, the contexts its prompts had). For a query x on an axis whose timed values are v₁ < … < v_m:

* v₁ ≤ x ≤ v_m — inside: interpolated between timed values, nothing to say;
* x > v_m, m ≥ 2 — **extrapolated** beyond the largest timed value (a profile continues the last segment's
  power law; a sweep's fit carries its costs over unchanged);
* x > v_m, m = 1 — one value timed: its cost is used as it is (extrapolated as a constant);
* x < v₁ — below the smallest timed value: the smallest's cost is used, an upper bound.

The words name the axis, the query and the timed range, so a prediction's interval and the verdict line that
rests on it say "extrapolated" with the numbers (`describe`); `specbench.analysis.cost.profile.GridTable` notes the
furthest query the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

PLURAL = {"batch": "batch sizes", "context": "context lengths"}


def _range(timed: Collection[float]) -> str:
    low, high = min(timed), max(timed)
    return f"{low:,.0f}" if low == high else f"{low:,.0f}–{high:,.0f}"


def outside(axis: str, value: float, timed: Collection[float], source: str = "timed") -> str | None:
    """Words for a query ``value`` on ``axis`` against the values a cost source ``timed`` (None: inside them)."""
    if not len(timed):
        return None
    low, high = min(timed), max(timed)
    what = f"{axis} {value:,.0f}"
    if value > high and low < high:
        return f"{what} extrapolated beyond the {source} {PLURAL.get(axis, axis)} ({_range(timed)})"
    if value > high:
        return f"{what} extrapolated: one {axis} {source} ({_range(timed)}), its cost used as it is"
    if value < low:
        return f"{what} below the {source} {PLURAL.get(axis, axis)} ({_range(timed)}): the smallest one's cost, an upper bound"
    return None


def describe(
    query: Mapping[str, float | None], timed: Mapping[str, Collection[float]], source: str = "timed"
) -> str | None:
    """One phrase for a prediction at ``query`` (axis → value; None: not asked) against ``timed`` (axis → values),
    the axes that left what was timed joined by '; ' (None: every axis inside)."""
    parts = [
        words
        for axis, value in query.items()
        if value is not None and (words := outside(axis, float(value), timed.get(axis, ()), source))
    ]
    return "; ".join(parts) if parts else None

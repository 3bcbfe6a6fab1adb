"""Speedup intervals that behave with few prompts, and the three-way answer built on them.

A speedup is a ratio of sums over prompts: S = (Σ tokens ÷ Σ seconds) of a configuration over
the same for the target-only baseline, on the same P prompts. Its log is, to first order, a
mean over prompts of the *per-prompt log-ratio contributions*

    u_p = (t_p / T − s_p / S_time) − (b_p / B − d_p / D)

(t, s: the configuration's tokens and seconds on prompt p; b, d: the baseline's; capitals are
sums; Σ u_p = 0 at the estimate). The interval is a t-interval on that mean:

    log Ŝ ± t_{P−1, (1+level)/2} · se,      se² = P/(P−1) · Σ_p u_p²

(CR1 variance, P − 1 degrees of freedom — the same small-sample correction as cluster-robust
regression). It is centred on the table's speedup, stays positive, and at small P it is as wide
as the data demand without the extra stretch a percentile bootstrap needs. Its coverage on
synthetic data with a known truth is in docs/fit.md (`scripts/interval_coverage.py`).

Below `MIN_PROMPTS` prompts no interval is given: with P = 2 the t quantile is 12.7 and the
interval says nothing a reader can use; the answer is "too few prompts to tell (P = 2)".

`specbench.analysis.verdicts.verdict.decide` turns an interval into *confident yes* (lower end above 1), *confident no* (upper end
below 1) or *cannot tell*, and estimates how many prompts would settle a "cannot tell" at the
observed per-prompt spread: the smallest n with t_{n−1} · sd / √n < |log Ŝ|, sd = se · √P.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from specbench.analysis.statistics.intervals import LEVEL
from specbench.analysis.statistics.sequential import prompts_to_settle as settle_count

MIN_PROMPTS = 3
MAX_PROMPTS_ADVICE = 10_000
METHOD = "t-interval on per-prompt log-ratio contributions (CR1, P−1 df)"


@dataclass(frozen=True)
class SpeedupInterval:
    point: float
    lo: float  # NaN when there are too few prompts
    hi: float
    log_se: float
    dof: float
    n_prompts: int
    method: str = METHOD

    @property
    def has_interval(self) -> bool:
        return bool(np.isfinite(self.lo) and np.isfinite(self.hi))

    def text(self) -> str:
        if not np.isfinite(self.point):
            return "-"
        if not self.has_interval:
            return f"{self.point:.2f}× (too few prompts to tell (P = {self.n_prompts}))"
        return speedup_words(self.point, self.lo, self.hi)


def ratio_end(value: float) -> str:
    """A speedup or interval end with 2 decimals — 3 where 2 would print 1.00 for a value that is not 1,
    so an interval's side of 1 (what a verdict rests on) is visible: 1.004, not 1.00."""
    text = f"{value:.2f}"
    return f"{value:.3f}" if text == "1.00" and value != 1.0 else text


def speedup_words(point: float, lo: float, hi: float) -> str:
    """``1.43× [1.004, 2.03]``; what is missing in words — ``1.43× (no interval)``, ``no speedup measured`` —
    never a placeholder or 'nan' inside a sentence."""
    if not _finite(point):
        return "no speedup measured"
    if not (_finite(lo) and _finite(hi)):
        return f"{point:.2f}× (no interval)"
    return f"{point:.2f}× [{ratio_end(lo)}, {ratio_end(hi)}]"


def _finite(value) -> bool:
    try:
        return value is not None and bool(np.isfinite(float(value)))
    except (TypeError, ValueError):
        return False


def t_quantile(dof: float, level: float = LEVEL) -> float:
    return float(stats.t.ppf((1 + level) / 2, dof)) if dof > 0 else float("inf")


def log_ratio_contributions(tokens, seconds, base_tokens, base_seconds) -> tuple[float, np.ndarray]:
    """(Ŝ, u_p) for per-prompt arrays (see the module docstring)."""
    t, s, b, d = (np.asarray(v, dtype=float) for v in (tokens, seconds, base_tokens, base_seconds))
    T, S, B, D = t.sum(), s.sum(), b.sum(), d.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        point = (T / S) / (B / D)
        u = (t / T - s / S) - (b / B - d / D)
    return float(point), u


def speedup_interval(
    tokens, seconds, base_tokens, base_seconds, level: float = LEVEL, min_prompts: int = MIN_PROMPTS
) -> SpeedupInterval:
    """Paired speedup with its t-interval from per-prompt sums (arrays of length P)."""
    point, u = log_ratio_contributions(tokens, seconds, base_tokens, base_seconds)
    n = len(u)
    nan = float("nan")
    if n < min_prompts or not np.isfinite(point) or point <= 0:
        return SpeedupInterval(point, nan, nan, nan, max(n - 1, 0), n)
    se = float(np.sqrt(n / (n - 1) * np.sum(u**2)))
    return _interval(point, se, n - 1, n, level)


def _interval(point: float, se: float, dof: float, n: int, level: float, method: str = METHOD) -> SpeedupInterval:
    half = t_quantile(dof, level) * se
    return SpeedupInterval(
        point, float(np.exp(np.log(point) - half)), float(np.exp(np.log(point) + half)), se, dof, n, method
    )


def combine_log_se(parts: list[tuple[float, float]]) -> tuple[float, float]:
    """√(Σ se²) and the Welch–Satterthwaite degrees of freedom of independent (se, dof) parts."""
    parts = [(se, dof) for se, dof in parts if np.isfinite(se) and se > 0]
    if not parts:
        return 0.0, float("inf")
    var = sum(se**2 for se, _ in parts)
    den = sum(se**4 / dof for se, dof in parts if dof > 0)
    return float(np.sqrt(var)), float(var**2 / den) if den > 0 else float("inf")


def combined_interval(
    point: float, parts: list[tuple[float, float]], n_prompts: int, level: float = LEVEL, method: str = ""
) -> SpeedupInterval:
    """A log-scale t-interval about ``point`` from independent (se, dof) parts (acceptance, cost)."""
    se, dof = combine_log_se(parts)
    if n_prompts < MIN_PROMPTS or not np.isfinite(point) or point <= 0:
        return SpeedupInterval(point, float("nan"), float("nan"), se, dof, n_prompts, method)
    return _interval(point, se, dof, n_prompts, level, method)


def prompts_to_settle(interval: SpeedupInterval, level: float = LEVEL) -> int | None:
    """Prompts at which an interval of the observed per-prompt spread would exclude 1 (None: none do)."""
    if not interval.has_interval:
        return None
    return settle_count(
        interval.point,
        interval.log_se,
        interval.n_prompts,
        lambda dof: t_quantile(dof, level),
        limit=MAX_PROMPTS_ADVICE,
    )

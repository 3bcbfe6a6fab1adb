"""Confidence intervals: the prompt-cluster bootstrap and the exact binomial interval.

Rounds of one generation are not independent draws (an easy prompt gives many long accepted
runs), so every interval that specbench reports from a sweep resamples *prompts*: a bootstrap
replicate draws P prompts with replacement out of the P measured and re-estimates from all
records of the drawn prompts (all turns, repeats and configurations of a prompt travel together,
which keeps comparisons between configurations paired). Because every estimator in
`specbench.analysis.fit` and `specbench.analysis.cost.round_cost` is a function of sums over prompts, a replicate is the
same computation with prompt weights w = multinomial counts instead of w = 1.

Few prompts. The plain percentile interval under-covers with a dozen prompts (measured on
synthetic data with known α: 91–93 % for a nominal 95 % at P = 12): the bootstrap variance is
the plug-in one, biased by (P − 1)/P, and its quantiles ignore that the spread itself is
estimated from P clusters. `bootstrap_interval` therefore stretches the percentile interval
about the point estimate by k = √(P/(P−1)) · t_{P−1} / z — the usual small-cluster correction
of cluster-robust inference (CR1 variance, t with P − 1 df) — which restores 93–97 % at P = 12
and vanishes as P grows (k = 1.05 at P = 50).

Enough replicates. A percentile interval at level 1 − a reads its ends at the a/2 and 1 − a/2 quantiles of the
B replicates. The j-th smallest of B draws lies on average at the j/(B + 1) quantile of their distribution, so the
lower end is an order statistic j ≥ 1 only where (B + 1)·a/2 ≥ 1 — below that even the smallest replicate sits,
on average, inside the central 1 − a of the distribution, and the interval is narrower than its level says (with
B = 2, both ends are the same replicate: "2.31× [1.95, 1.95]"). The rule, for every interval specbench reports
from a bootstrap:

    B ≥ 2 / a − 1 = `replicates_needed`(level)        (95 %: 39; 90 %: 19)

counting the finite replicates. Below it `bootstrap_interval` gives no interval (NaN ends: "cannot tell", with
`replicate_shortfall`'s reason), and the flag ``--bootstrap`` refuses 1 … 38 (the bounds table's row, 0 or from
`replicates_needed` (`LEVEL`)). The Monte-Carlo error of the ends still shrinks as 1/√B: the default 1000 keeps
it far below the interval's own width.

The estimate lies inside its interval: the stretched ends are widened to the point where they would leave it out
(a skewed replicate distribution can put every replicate on one side of the estimate), and an estimate that is
not finite has no interval.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

LEVEL = 0.95
N_BOOT = 1000
FEW_PROMPTS = 10  # below this many prompts a percentile bootstrap interval runs narrow


def replicates_needed(level: float = LEVEL) -> int:
    """The fewest bootstrap replicates B whose two-sided ``level`` percentile interval has an order statistic beyond
    each end: (B + 1)·(1 − level)/2 ≥ 1, so B ≥ 2/(1 − level) − 1 (module docstring)."""
    return max(1, math.ceil(2.0 / (1.0 - level) - 1.0 - 1e-9))


def replicate_shortfall(n_replicates: int, level: float = LEVEL) -> str | None:
    """Why ``n_replicates`` replicates give no ``level`` interval (None: they are enough)."""
    needed = replicates_needed(level)
    if n_replicates >= needed:
        return None
    return (
        f"{n_replicates} bootstrap replicate{'s' if n_replicates != 1 else ''} cannot give a {level:.0%} interval: "
        f"it needs at least {needed}, one beyond each end"
    )


def few_prompts_note(n_prompts: int) -> str | None:
    """A warning for small prompt counts: the intervals are widened by `small_sample_factor`
    (the bootstrap alone would under-cover), so they come out wide; more prompts narrow them."""
    if 2 <= n_prompts < FEW_PROMPTS:
        return (
            f"only {n_prompts} prompts: intervals are widened {small_sample_factor(n_prompts):.1f}× for the "
            f"small sample (a bare bootstrap would under-cover), so they are wide; "
            f"measure ≥ {FEW_PROMPTS} prompts for useful ones"
        )
    return None


def bootstrap_weights(n_clusters: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """[n_boot, n_clusters] multinomial counts: how often each prompt is drawn in each replicate."""
    if n_clusters < 1:
        return np.zeros((n_boot, 0))
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot).astype(float)


def percentile_interval(samples: np.ndarray, level: float = LEVEL, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval (lower, upper) along ``axis``; non-finite replicates are ignored."""
    tail = 100 * (1 - level) / 2
    samples = np.asarray(samples, dtype=float)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column with no finite replicate: NaN, said by the caller
        lo = np.nanpercentile(np.where(np.isfinite(samples), samples, np.nan), tail, axis=axis)
        hi = np.nanpercentile(np.where(np.isfinite(samples), samples, np.nan), 100 - tail, axis=axis)
    return lo, hi


def small_sample_factor(n_clusters: int, level: float = LEVEL) -> float:
    """k = √(P/(P−1)) · t_{P−1}((1+level)/2) / z((1+level)/2); 1 below two clusters."""
    if n_clusters < 2:
        return 1.0
    q = (1 + level) / 2
    return float(np.sqrt(n_clusters / (n_clusters - 1)) * stats.t.ppf(q, n_clusters - 1) / stats.norm.ppf(q))


def bootstrap_interval(
    point, replicates: np.ndarray, n_clusters: int, level: float = LEVEL, axis: int = 0, positive: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of prompt-bootstrap replicates, stretched about ``point`` by
    `small_sample_factor` (see the module docstring).

    ``positive`` quantities (ratios such as speedups and τ) are stretched on the log scale,
    so that the interval stays above zero however few prompts there are.

    No interval (NaN ends) where fewer finite replicates than `replicates_needed` (``level``) stand behind it, or
    where ``point`` is not finite; otherwise the ends enclose ``point`` (module docstring).
    """
    replicates = np.asarray(replicates, dtype=float)
    lo, hi = percentile_interval(replicates, level, axis)
    k = small_sample_factor(n_clusters, level)
    point = np.asarray(point, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if positive:
            log_p, log_lo, log_hi = np.log(point), np.log(lo), np.log(hi)
            lo, hi = np.exp(log_p - k * (log_p - log_lo)), np.exp(log_p + k * (log_hi - log_p))
        else:
            lo, hi = point - k * (point - lo), point + k * (hi - point)
    enough = np.isfinite(replicates).sum(axis=axis) >= replicates_needed(level)
    keep = enough & np.isfinite(point) & np.isfinite(lo) & np.isfinite(hi)
    lo = np.where(keep, np.minimum(lo, point), np.nan)
    hi = np.where(keep, np.maximum(hi, point), np.nan)
    return lo, hi


def clopper_pearson(successes, trials, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper–Pearson) binomial interval for successes / trials.

    lower = Beta⁻¹((1−level)/2; s, n−s+1), upper = Beta⁻¹((1+level)/2; s+1, n−s), with lower = 0
    at s = 0 and upper = 1 at s = n; an empty trial set gives the uninformative [0, 1].
    """
    s = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    tail = (1 - level) / 2
    with np.errstate(all="ignore"):
        lo = np.where(s > 0, stats.beta.ppf(tail, s, n - s + 1), 0.0)
        hi = np.where(s < n, stats.beta.ppf(1 - tail, s + 1, n - s), 1.0)
    lo = np.where(n > 0, lo, 0.0)
    hi = np.where(n > 0, hi, 1.0)
    return lo, hi

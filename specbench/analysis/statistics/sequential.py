"""Error control for verdicts taken after several looks at growing data, and for the best of many.

A verdict (`specbench.analysis.verdicts.decision`) says *confident yes* when some configuration's speedup
interval lies above 1 and *confident no* when every configuration's lies below 1. Two habits
would make a plain 95 % interval over-confident:

1. **Looking more than once.** An adaptive sweep (`specbench.measure.run.adaptive`) decides after
   every stage and stops as soon as an interval clears 1. Each look is another chance for noise
   to clear it, so the chance of a confident-but-wrong verdict grows with the number of looks.
2. **Picking the best of K.** "Some configuration lies above 1" is K chances at once, and the
   interval of the configuration picked *because* it looked best is biased upward (the winner's
   curse).

The rule. The error budget α (1 − `LEVEL` = 0.05) is split between the two sides, α/2 each. On
the log scale, with each configuration's estimate log Ŝ_k, standard error se_k and degrees of
freedom ν_k (`specbench.analysis.statistics.speedup_interval`),

    confident yes:  max_k [ log Ŝ_k − t_{ν_k}(1 − p_yes) · se_k ] > 0
    confident no:   max_k [ log Ŝ_k + t_{ν_k}(1 − p_no)  · se_k ] < 0

where t_ν(q) is Student's t quantile and p_yes, p_no are *nominal* one-sided levels:

* p_no is the per-look level of a group-sequential test of total size α/2 over the planned looks;
  no adjustment for K: "every configuration lies below 1" is wrong only if some configuration k
  has S_k ≥ 1, and that configuration alone must have crossed (an intersection–union test);
* p_yes is the same for a total size α/(2K): a Bonferroni split over the K configurations, which
  holds whatever their correlation. All K lower ends then hold at once with probability
  ≥ 1 − α/2, so the lower end of the configuration that is picked holds too, however it was
  picked: the interval reported for a "yes" is this selection-adjusted one.

Looks (Pocock-type boundary). The looks are planned before any data: n_1 < … < n_L prompts. Under
the null each look's z-statistic is Z_j = W(n_j)/√n_j for a Brownian motion W (each stage's
prompts are new ones, so increments are independent); the boundary is the constant c with

    P( max_j Z_j ≥ c ) = a,        nominal level p = 1 − Φ(c),

found by simulating the Brownian motion at the planned n_j (`pocock_constant`), and each look
then tests at t_ν(1 − p) (a t quantile at the nominal level: the usual way to carry a
group-sequential boundary over to small samples). A constant boundary means every look uses the
same rule, so `specbench recommend` on the finished folder reaches the verdict the sweep stopped
on without knowing at which look it stopped. c lies between z(1 − a) (one look) and z(1 − a/L)
(Bonferroni over looks); with L = 1 — a fixed grid — the rule is the plain 95 % upper end for
"no" and a Bonferroni-adjusted lower end for "yes".

Why this and not anytime-valid confidence sequences: the looks are bounded anyway (a prompt cap
per workload), the stage sizes are known before the data, and the t quantile keeps the test valid
at the 3–30 prompts a CPU sweep affords, where the asymptotic confidence sequences are not. Its
error rates with a known truth are in docs/fit.md (`scripts/adaptive_simulation.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

from specbench.analysis.statistics.intervals import LEVEL

SIMULATIONS = 400_000  # Brownian paths for the boundary (deterministic seed): ±2 % on the nominal level
MAX_LOOKS = 64


@lru_cache(maxsize=256)
def pocock_constant(prompts: tuple[int, ...], a: float) -> float:
    """c with P(max_j W(n_j)/√n_j ≥ c) = a for a standard Brownian motion W at the planned n_j."""
    z_one, z_all = float(stats.norm.isf(a)), float(stats.norm.isf(a / max(len(prompts), 1)))
    if len(prompts) <= 1:
        return z_one
    rng = np.random.default_rng(20261201)
    steps = np.diff(np.concatenate([[0.0], np.asarray(prompts, dtype=float)]))  # [L] new prompts per look
    walk = np.zeros(SIMULATIONS)
    best = np.full(SIMULATIONS, -np.inf)
    for n, step in zip(prompts, steps):
        walk += np.sqrt(step) * rng.standard_normal(SIMULATIONS)
        np.maximum(best, walk / np.sqrt(n), out=best)
    c = float(np.quantile(best, 1.0 - a))
    return float(np.clip(c, z_one, z_all))  # Monte Carlo noise never leaves the exact bracket


@dataclass(frozen=True)
class LookPlan:
    """The looks a verdict allows for: prompts per look, planned before any data (one look: a fixed grid)."""

    prompts: tuple[int, ...] = ()
    alpha: float = 1.0 - LEVEL

    def __post_init__(self):
        if list(self.prompts) != sorted(set(self.prompts)) or any(n < 1 for n in self.prompts):
            raise ValueError(f"planned prompts per look must increase: {self.prompts}")
        if len(self.prompts) > MAX_LOOKS:
            raise ValueError(f"at most {MAX_LOOKS} looks, got {len(self.prompts)}")

    @property
    def looks(self) -> int:
        return max(len(self.prompts), 1)

    def nominal_level(self, a: float) -> float:
        """The per-look one-sided level of a test of total size ``a`` over these looks."""
        return float(stats.norm.sf(pocock_constant(tuple(self.prompts), a)))

    def as_dict(self) -> dict:
        return {"prompts": list(self.prompts), "alpha": self.alpha, "looks": self.looks}


FIXED = LookPlan()


@dataclass(frozen=True)
class VerdictRule:
    """The quantiles a verdict uses: ``configurations`` candidates judged under ``plan``."""

    plan: LookPlan = FIXED
    configurations: int = 1

    @property
    def p_yes(self) -> float:
        return self.plan.nominal_level(self.plan.alpha / 2 / max(self.configurations, 1))

    @property
    def p_no(self) -> float:
        return self.plan.nominal_level(self.plan.alpha / 2)

    def lower(self, point: float, log_se: float, dof: float) -> float:
        """The selection- and look-adjusted lower end (what a confident yes needs above 1)."""
        return _end(point, log_se, dof, self.p_yes, -1.0)

    def upper(self, point: float, log_se: float, dof: float) -> float:
        """The look-adjusted upper end (what a confident no needs below 1)."""
        return _end(point, log_se, dof, self.p_no, +1.0)

    def quantile(self, dof: float, side: str) -> float:
        return _t_isf(self.p_yes if side == "yes" else self.p_no, dof)

    def describe(self) -> str:
        parts = []
        if self.configurations > 1:
            parts.append(f"best of {self.configurations} configurations")
        if self.plan.looks > 1:
            parts.append(f"{self.plan.looks} planned looks")
        what = " and ".join(parts) if parts else "one configuration, one look"
        return f"adjusted for {what} (one-sided levels: yes {self.p_yes:.2g}, no {self.p_no:.2g})"

    def as_dict(self) -> dict:
        return {**self.plan.as_dict(), "configurations": self.configurations, "p_yes": self.p_yes, "p_no": self.p_no}


def _t_isf(p: float, dof: float) -> float:
    if not np.isfinite(dof) or dof > 1e6:
        return float(stats.norm.isf(p))
    return float(stats.t.isf(p, dof)) if dof > 0 else float("inf")


def _end(point: float, log_se: float, dof: float, p: float, sign: float) -> float:
    if not (np.isfinite(point) and point > 0 and np.isfinite(log_se)):
        return float("nan")
    return float(np.exp(np.log(point) + sign * _t_isf(p, dof) * log_se))


def prompts_to_settle(point: float, log_se: float, n_prompts: int, quantile_at, limit: int = 10_000) -> int | None:
    """Prompts at which an estimate of this per-prompt spread would clear 1 under the rule.

    sd = se · √P is the per-prompt spread; the answer is the smallest n with
    t_{n−1}(1 − p) · sd / √n < |log Ŝ| (``quantile_at(dof)`` gives the t quantile), None if none ≤ ``limit``.
    """
    if not (np.isfinite(point) and point > 0 and np.isfinite(log_se) and log_se > 0 and n_prompts >= 2):
        return None
    effect, sd = abs(float(np.log(point))), log_se * np.sqrt(n_prompts)
    if effect <= 0:
        return None
    n = max(n_prompts, 3)
    while n <= limit:
        if quantile_at(n - 1) * sd / np.sqrt(n) < effect:
            return int(n)
        n = n + 1 if n < 200 else int(n * 1.05) + 1
    return None

"""The choice rule with a known truth: how often a sweep names an option more than ε behind the best.

The table in docs/fit.md ("The choice") comes from here (`scripts/adaptive_simulation.py --choice`). A synthetic
workload has K options (think γ = 1..K of one drafter), each run on every prompt against the target alone
(`specbench.analysis.simulation.simulate_workload`: per-prompt speedups correlated across options, log-normal
timing noise). Each simulated sweep is judged by the real code — the verdict of
`specbench.analysis.verdicts.decision.decide_options` under a planned `LookPlan`, the stopping rule
`specbench.analysis.verdicts.stopping.look_outcome` with its racing — under two rules:

* **today's rule** (before the choice existed): no paired evidence; the sweep stops at the first confident
  direction and names the best point estimate among the options whose adjusted interval lies above 1;
* **the ε-choice**: the options compared with each other, paired on the same prompts
  (`specbench.analysis.verdicts.choice`); the sweep stops when the direction *and* the choice are settled.

Scored per sweep: *falsely confident* — a confident yes for an option whose true speedup is ≤ 1, a yes when no
option's exceeds 1, or a no when some option's is ≥ 1; *more than ε behind* — the named option's true speedup is
below (1 − ε) × the best option's; the prompts used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.analysis.options import Option
from specbench.analysis.simulation import Noise, simulate_workload
from specbench.analysis.statistics.paired_ratio import PerPrompt
from specbench.analysis.statistics.sequential import LookPlan
from specbench.analysis.statistics.speedup_interval import speedup_interval
from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.analysis.verdicts.decision import decide_options
from specbench.analysis.verdicts.stopping import OPEN, look_outcome
from specbench.analysis.verdicts.verdict import NO, YES, Decision

RULES = ("today's rule", "ε-choice")
CORRELATED = Noise(rho=0.9)  # γ options of one drafter: a prompt that suits one suits the others
_EMPTY = pd.DataFrame()


def _options(tokens: np.ndarray, base: np.ndarray, seconds: np.ndarray, counts: np.ndarray) -> list[Option]:
    """One measured option per configuration on the prompts it ran (its first ``counts[k]``)."""
    out = []
    for k, n in enumerate(counts):
        iv = speedup_interval(tokens[:n], seconds[k, :n], tokens[:n], base[:n])
        out.append(
            Option(
                "sim",
                "sim",
                "{}",
                "chain",
                k + 1,
                iv.point,
                iv.lo,
                iv.hi,
                float("nan"),
                True,
                "fixed",
                iv.log_se,
                iv.dof,
            )
        )
    return out


def _samples(tokens: np.ndarray, seconds: np.ndarray, counts: np.ndarray) -> dict[tuple, PerPrompt]:
    """Per option its per-prompt tokens and seconds on the prompts it ran (the paired evidence)."""
    return {
        ("sim", "chain", k + 1, "fixed"): PerPrompt(pd.Series(tokens[:n]), pd.Series(seconds[k, :n]))
        for k, n in enumerate(counts)
    }


def choice_sweep(
    truth: tuple[float, ...],
    planned: tuple[int, ...],
    rng: np.random.Generator,
    noise: Noise,
    paired: bool,
    tolerance: float = TOLERANCE,
) -> tuple[Decision, int]:
    """One adaptive sweep over ``planned`` looks: its final verdict and the prompts it used. ``paired``: the
    ε-choice; otherwise today's rule. An option out of the race gets no more prompts, and stays among the K
    options compared (its level does not change as others leave)."""
    tokens, base, seconds = simulate_workload(truth, planned[-1], rng, noise)
    plan = LookPlan(tuple(planned))
    dropped: set[tuple] = set()
    counts = np.zeros(len(truth), dtype=int)
    decision, n = None, planned[0]
    for look, n in enumerate(planned, start=1):
        for k in range(len(truth)):
            if ("sim", "chain", k + 1, "fixed") not in dropped:
                counts[k] = n
        options = _options(tokens, base, seconds, counts)
        samples = _samples(tokens, seconds, counts) if paired else None
        decision = decide_options(_EMPTY, _EMPTY, options, n, plan, tolerance, samples, dropped)
        status, newly = look_outcome([decision], look, planned)
        dropped |= newly
        if status != OPEN:
            break
    assert decision is not None
    return decision, int(n)


def score(decision: Decision, truth: tuple[float, ...], prompts: int, tolerance: float) -> dict:
    """One sweep's outcome against the truth (module docstring)."""
    best = max(truth)
    yes = decision.answer == YES and decision.confident
    gamma = decision.best.gamma if yes and decision.best is not None else None
    named = truth[int(gamma) - 1] if gamma is not None else None
    wrong = (yes and (named is None or named <= 1.0)) or (decision.answer == NO and best >= 1.0)
    behind = yes and named is not None and named < (1.0 - tolerance) * best
    return {
        "yes": yes,
        "no": decision.answer == NO,
        "settled": decision.settled,
        "falsely_confident": bool(wrong),
        "behind": bool(behind),
        "behind_settled": bool(behind and decision.settled),
        "prompts": prompts,
        "named_of_best": named / best if named is not None else np.nan,
    }


def choice_table(
    truths: dict[str, tuple[float, ...]],
    planned: tuple[int, ...] = (8, 16, 24, 32, 40, 48, 56, 64),
    sims: int = 500,
    seed: int = 0,
    noise: Noise = CORRELATED,
    tolerance: float = TOLERANCE,
) -> pd.DataFrame:
    """One row per (truth, rule): falsely-confident rate, more-than-ε-behind rate (all sweeps, and among the settled
    ones), the yes / no / settled rates, the mean prompts used and the mean true speedup of the named option over
    the best's."""
    rows = []
    for t, (name, truth) in enumerate(truths.items()):
        for r, rule in enumerate(RULES):
            rng = np.random.default_rng([seed, t, 0])  # the same synthetic sweeps under both rules
            results = []
            for _ in range(sims):
                decision, used = choice_sweep(truth, planned, rng, noise, paired=(r == 1), tolerance=tolerance)
                results.append(score(decision, truth, used, tolerance))
            out = pd.DataFrame(results)
            rows.append(
                {
                    "truth": name,
                    "options": len(truth),
                    "rule": rule,
                    "sims": sims,
                    "falsely_confident": float(out["falsely_confident"].mean()),
                    "more_than_eps_behind": float(out["behind"].mean()),
                    "behind_when_settled": float(out["behind_settled"].sum() / max(out["settled"].sum(), 1)),
                    "yes": float(out["yes"].mean()),
                    "no": float(out["no"].mean()),
                    "settled": float(out["settled"].mean()),
                    "mean_prompts": float(out["prompts"].mean()),
                    "named_of_best": float(out["named_of_best"].mean()),
                }
            )
    return pd.DataFrame(rows)

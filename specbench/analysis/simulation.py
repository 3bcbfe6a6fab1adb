"""Verdicts with a known truth: how often the adaptive rule and a fixed grid are confidently wrong.

The table in docs/fit.md ("Sweeps that decide") comes from here (`scripts/adaptive_simulation.py`).
A synthetic workload has K configurations measured live against the target-only baseline,
prompt by prompt (the measured path of `specbench.analysis.verdicts.decision`). Prompt p has n_p tokens
(uniform 24…128), a baseline time n_p · 0.05 s · e^{σ_b b_p}, and configuration k runs it at
speedup

    s_pk = exp(μ_k + σ_s (√ρ e_p + √(1 − ρ) e_pk)),     e standard normal,

(prompts differ, and a prompt that suits one configuration suits the others: correlation ρ),
each side timed with log-normal noise σ_n. The estimand, the ratio-of-sums speedup, is
S_k = exp(μ_k − σ_s²/2) (`scripts/interval_coverage.py` derives it), so a truth is set
through μ_k = log S_k + σ_s²/2.

Each simulated sweep is judged by the real code: `speedup_interval` per configuration, the
verdict of `specbench.analysis.verdicts.decision` under a `specbench.analysis.statistics.sequential.LookPlan`, and the
stopping rule `specbench.analysis.verdicts.stopping.look_outcome` (racing included: a dropped configuration
gets no more prompts). A verdict is *confidently wrong* when it says "yes" while no configuration's
true speedup exceeds 1, or "yes" for a configuration whose true speedup is below 1, or "no" while
some configuration's true speedup is ≥ 1. ``pick_of_best`` is the true speedup of the configuration
a "yes" recommends ÷ the best true speedup (how much a stop at the first confident yes leaves behind).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.options import Option
from specbench.analysis.recommendation.confirm_compare import Comparison
from specbench.analysis.recommendation.confirm_targets import Outcome, Prediction
from specbench.analysis.recommendation.confirmation import check_prediction
from specbench.analysis.statistics.sequential import FIXED, LookPlan, VerdictRule
from specbench.analysis.statistics.speedup_interval import speedup_interval
from specbench.analysis.verdicts.decision import decide_options
from specbench.analysis.verdicts.stopping import OPEN, look_outcome
from specbench.analysis.verdicts.verdict import NO, UNSURE, YES, Candidate, Decision

TRUTHS = {  # K = 6 configurations (think γ = 1..6 of one drafter)
    "every speedup 1.0": (1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
    "best 0.95": (0.80, 0.86, 0.90, 0.95, 0.93, 0.90),
    "best 1.1": (0.85, 0.95, 1.03, 1.10, 1.08, 1.05),
    "best 1.3": (0.95, 1.10, 1.22, 1.30, 1.27, 1.20),
}


@dataclass(frozen=True)
class Noise:
    sigma_s: float = 0.25  # per-prompt spread of log speedup
    rho: float = 0.8  # correlation of that spread across configurations
    sigma_n: float = 0.05  # timing noise of one run
    sigma_b: float = 0.25  # spread of the baseline's seconds per token across prompts


def simulate_workload(
    truth: tuple[float, ...], n_prompts: int, rng: np.random.Generator, noise: Noise = Noise()
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens [P], baseline seconds [P], configuration seconds [K, P]) of one synthetic workload."""
    k = len(truth)
    tokens = rng.integers(24, 129, n_prompts).astype(float)  # [P]
    base = tokens * 0.05 * np.exp(noise.sigma_b * rng.standard_normal(n_prompts))  # [P]
    mu = np.log(np.asarray(truth)) + noise.sigma_s**2 / 2  # [K]
    shared = rng.standard_normal(n_prompts)  # [P]
    own = rng.standard_normal((k, n_prompts))  # [K, P]
    speed = np.exp(mu[:, None] + noise.sigma_s * (np.sqrt(noise.rho) * shared + np.sqrt(1 - noise.rho) * own))
    timing = np.exp(noise.sigma_n * rng.standard_normal((k + 1, n_prompts)))
    return tokens, base * timing[0], base / speed * timing[1:]


def _options(tokens, base, seconds, counts) -> list[Option]:
    """One measured option per configuration, on the prompts it ran (its first ``counts[k]``)."""
    options = []
    for k, n in enumerate(counts):
        iv = speedup_interval(tokens[:n], seconds[k, :n], tokens[:n], base[:n])
        options.append(
            Option(
                "sim",
                f"config{k}",
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
    return options


def run_sweep(
    truth: tuple[float, ...],
    planned: tuple[int, ...],
    rng: np.random.Generator,
    noise: Noise = Noise(),
    adaptive: bool = True,
    adjusted: bool = True,
) -> dict:
    """One sweep: the adaptive rule over ``planned`` looks, or a fixed grid of ``planned[-1]`` prompts
    (``adjusted=False``: the plain 95 % rule, no adjustment for picking the best)."""
    decision, n = sweep_decision(truth, planned, rng, noise, adaptive, adjusted)
    return _score(decision, truth, n)


def sweep_decision(
    truth: tuple[float, ...],
    planned: tuple[int, ...],
    rng: np.random.Generator,
    noise: Noise = Noise(),
    adaptive: bool = True,
    adjusted: bool = True,
) -> tuple[Decision, int]:
    """The verdict one synthetic sweep ends with, and the prompts it used (`run_sweep`'s rule)."""
    tokens, base, seconds = simulate_workload(truth, planned[-1], rng, noise)
    k = len(truth)
    looks = planned if adaptive else (planned[-1],)
    plan = LookPlan(tuple(looks)) if adaptive else FIXED
    counts = np.zeros(k, dtype=int)
    dropped: set[tuple] = set()
    decision = None
    for look, n in enumerate(looks, start=1):
        for i in range(k):
            if (f"config{i}", "chain", i + 1, "fixed") not in dropped:
                counts[i] = n
        options = _options(tokens, base, seconds, counts)
        decision = decide_options(_EMPTY, _EMPTY, options, n, plan) if adjusted else _plain(options, n)
        status, newly = look_outcome([decision], look, looks)
        dropped |= newly
        if status != OPEN:
            break
    assert decision is not None  # `looks` is never empty: the loop ran at least once
    return decision, int(n)


_EMPTY = pd.DataFrame()


def _plain(options: list[Option], n: int) -> Decision:
    """The former rule, for comparison: yes if any plain 95 % interval lies above 1, no if all lie below."""
    above = [o for o in options if o.lo > 1]
    if above:
        pick = max(above, key=lambda o: o.speedup)
        best = Candidate(
            pick.drafter,
            pick.drafter_label,
            pick.tree,
            pick.gamma,
            "fixed",
            pick.speedup,
            pick.lo,
            pick.hi,
            pick.log_se,
            pick.dof,
            lo_adj=pick.lo,
            hi_adj=pick.hi,
            hi_sim=pick.hi,
        )
        return Decision(YES, "measured", pick, best, None, n, "")
    if all(o.hi < 1 for o in options):
        return Decision(NO, "measured", None, None, None, n, "")
    return Decision(UNSURE, "measured", None, None, None, n, "")


def _score(decision: Decision, truth: tuple[float, ...], prompts: int) -> dict:
    best_true = max(truth)
    answer = decision.answer
    option = decision.option if answer == YES else None  # a yes always names its option
    chosen, covered = None, None
    if option is not None:
        chosen = option.gamma - 1
        covered = bool(option.lo <= truth[chosen] <= option.hi)
    wrong = (chosen is not None and truth[chosen] <= 1.0) or (answer == NO and best_true >= 1.0)
    return {
        "answer": answer,
        "wrong": bool(wrong),
        "yes": answer == YES,
        "no": answer == NO,
        "chose_best": chosen is not None and truth[chosen] == best_true,
        "prompts": prompts,
        "covered": covered,
        "pick_of_best": truth[chosen] / best_true if chosen is not None else None,
    }


def error_table(
    truths: dict = TRUTHS,
    planned: tuple[int, ...] = (8, 16, 24, 32, 40, 48, 56, 64),
    fixed_sizes: tuple[int, ...] = (12, 64),
    sims: int = 2000,
    seed: int = 0,
    noise: Noise = Noise(),
) -> pd.DataFrame:
    """One row per (truth, method): confidently-wrong rate, yes / no rates, prompts used, coverage."""
    rows: list[dict] = []
    methods = [("adaptive (looks " + ",".join(map(str, planned)) + ")", planned, True, True)]
    for size in fixed_sizes:
        methods.append((f"fixed grid, {size} prompts, adjusted", (size,), False, True))
        methods.append((f"fixed grid, {size} prompts, plain 95 % (former rule)", (size,), False, False))
    for name, truth in truths.items():
        for label, looks, adaptive, adjusted in methods:
            rng = np.random.default_rng([seed, len(rows)])
            out = pd.DataFrame([run_sweep(truth, looks, rng, noise, adaptive, adjusted) for _ in range(sims)])
            covered, picked = out["covered"].dropna(), out["pick_of_best"].dropna()
            rows.append(
                {
                    "truth": name,
                    "method": label,
                    "sims": sims,
                    "confidently_wrong": float(out["wrong"].mean()),
                    "yes": float(out["yes"].mean()),
                    "no": float(out["no"].mean()),
                    "chose_best": float(out["chose_best"].mean()),
                    "mean_prompts": float(out["prompts"].mean()),
                    "yes_interval_covers_truth": float(covered.mean()) if len(covered) else float("nan"),
                    "pick_of_best": float(picked.mean()) if len(picked) else float("nan"),
                }
            )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- confirmations


CONFIRM_ROWS = (  # (truth, how the sweep decided: looks, adaptive, adjusted)
    ("best 1.3", (8, 16, 24, 32, 40, 48, 56, 64), True, True),
    ("best 1.1", (8, 16, 24, 32, 40, 48, 56, 64), True, True),
    ("best 1.1", (12,), False, False),
    ("every speedup 1.0", (12,), False, False),
)


def confirm_once(
    prediction: Prediction,
    truth_of_pick: float,
    looks: tuple[int, ...],
    rng: np.random.Generator,
    noise: Noise = Noise(),
) -> tuple[Outcome, int]:
    """A confirmation of ``prediction`` on fresh synthetic prompts whose true speedup is ``truth_of_pick``, looked
    at after each of ``looks`` prompts until held or missed (`specbench.analysis.recommendation.confirmation.check_prediction`)."""
    tokens, base, seconds = simulate_workload((truth_of_pick,), looks[-1], rng, noise)
    rule = VerdictRule(LookPlan(tuple(looks)), 1)
    check = None
    for n in looks:
        iv = speedup_interval(tokens[:n], seconds[0, :n], tokens[:n], base[:n])
        lo = rule.lower(iv.point, iv.log_se, iv.dof) if iv.has_interval else float("nan")
        hi = rule.upper(iv.point, iv.log_se, iv.dof) if iv.has_interval else float("nan")
        check = check_prediction(prediction, Comparison("pick", "base", iv.point, lo, hi, iv.log_se, iv.dof, n), rule)
        if check.outcome.settled:
            return check.outcome, n
    assert check is not None  # `looks` is never empty: the loop ran at least once
    return check.outcome, looks[-1]


def confirmation_table(
    rows=CONFIRM_ROWS,
    looks: tuple[int, ...] = (4, 8, 12, 16, 20, 24),
    sims: int = 2000,
    seed: int = 0,
    noise: Noise = Noise(),
) -> pd.DataFrame:
    """Per (truth, sweep rule): of the sweeps that said a confident yes, how often the confirmation on fresh
    prompts says held, missed or not settled — overall; among the predictions that were right (the picked
    configuration's true speedup above 1 and inside the predicted interval), how often "missed"; among those wrong
    in direction (true speedup ≤ 1), how often "held"; among those wrong in size only, how often "missed"."""
    out = []
    for i, (name, planned, adaptive, adjusted) in enumerate(rows):
        truth = TRUTHS[name]
        rng = np.random.default_rng([seed, 1000 + i])
        results = []
        for _ in range(sims):
            decision, _ = sweep_decision(truth, planned, rng, noise, adaptive, adjusted)
            prediction, best = Prediction.of(decision), decision.best
            if prediction is None or decision.answer != YES or best is None or best.gamma is None:
                continue  # a confident yes names its best, with its γ
            pick = truth[best.gamma - 1]
            outcome, used = confirm_once(prediction, pick, looks, rng, noise)
            inside = prediction.lo <= pick <= prediction.hi
            kind = "right" if inside and pick > 1.0 else ("direction" if pick <= 1.0 else "size")
            results.append({"outcome": outcome, "prompts": used, "kind": kind})
        frame = pd.DataFrame(results, columns=["outcome", "prompts", "kind"])
        method = (
            "adaptive (adjusted)"
            if adaptive
            else f"fixed grid, {planned[-1]} prompts, "
            + ("adjusted" if adjusted else "plain 95 % (picks on a lucky subset)")
        )

        def rate(kind: str | None, outcome: Outcome, frame: pd.DataFrame = frame) -> float:
            part = frame if kind is None else frame[frame["kind"] == kind]
            return float((part["outcome"] == outcome).mean()) if len(part) else float("nan")

        def share(kind: str, frame: pd.DataFrame = frame) -> float:
            return float((frame["kind"] == kind).mean()) if len(frame) else float("nan")

        out.append(
            {
                "truth": name,
                "sweep": method,
                "sims": sims,
                "confirmed": len(frame),
                "held": rate(None, Outcome.HELD),
                "missed": rate(None, Outcome.MISSED),
                "open": rate(None, Outcome.OPEN),
                "right": share("right"),
                "missed_when_right": rate("right", Outcome.MISSED),
                "direction_wrong": share("direction"),
                "held_when_direction_wrong": rate("direction", Outcome.HELD),
                "size_wrong": share("size"),
                "missed_when_size_wrong": rate("size", Outcome.MISSED),
                "mean_prompts": float(frame["prompts"].mean()) if len(frame) else np.nan,
            }
        )
    return pd.DataFrame(out)

"""The confirmation's regret within the sweep's tolerance, and what it says to deploy
(`specbench.analysis.recommendation.confirmation.regret`, `specbench.analysis.recommendation.confirmed`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.analysis.recommendation.confirm_report import LookResult, TargetLooks
from specbench.analysis.recommendation.confirm_targets import BASELINE, CONTENDER, RECOMMENDED, Arm, Prediction, Target
from specbench.analysis.recommendation.confirmation import judge
from specbench.analysis.recommendation.confirmed import BEATEN, CONFIRMED, NOT_SETTLED, deployment
from specbench.analysis.statistics.sequential import LookPlan
from specbench.analysis.verdicts.verdict import YES

ARMS = (
    Arm("target only", BASELINE),
    Arm("ngram γ=3", RECOMMENDED, "ngram", "{}", "ngram", "chain", 3),
    Arm("ngram γ=4", CONTENDER, "ngram", "{}", "ngram", "chain", 4),
)


def _records(speeds: dict[int, float], n: int, noise: float, seed: int = 0) -> pd.DataFrame:
    """Live records of the three arms on ``n`` fresh prompts: γ's tokens/s is ``speeds[γ]`` × the baseline's."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(40, 120, n).astype(float)
    base = tokens * 0.05 * np.exp(0.25 * rng.standard_normal(n))  # prompts differ a lot
    rows = []
    for gamma, speed in {0: 1.0, **speeds}.items():
        seconds = base / speed * np.exp(noise * rng.standard_normal(n))
        for i in range(n):
            rows.append(
                {
                    "workload": "mt-bench",
                    "temperature": 0.0,
                    "concurrency": 1,
                    "prompt_id": f"p{i}",
                    "turn": 1,
                    "repeat": 0,
                    "mode": "live",
                    "drafter": "none" if gamma == 0 else "ngram",
                    "drafter_label": "none" if gamma == 0 else "ngram",
                    "tree": "chain",
                    "gamma": gamma,
                    "schedule": "fixed",
                    "decode_tokens": tokens[i],
                    "decode_s": seconds[i],
                    "timing_ok": True,
                }
            )
    return pd.DataFrame(rows)


PREDICTION = Prediction(YES, "ngram γ=3", 1.4, 1.1, 1.8, "confident yes")
TARGET = Target("mt-bench", 1, PREDICTION, ARMS)


def test_a_near_equal_contender_settles_within_the_tolerance():
    """γ 4 at 1.01× of γ 3: never "beats it" and never "none beats it" at this spread, but within 5 % — settled."""
    result = judge(_records({3: 1.40, 4: 1.414}, 24, 0.01), TARGET, LookPlan((8, 16, 24)))
    regret = result.regret
    assert regret.within and regret.settled and not regret.beaten
    assert "within tolerance" in regret.text
    assert deployment(_state(result)).status == CONFIRMED
    strict = judge(_records({3: 1.40, 4: 1.414}, 24, 0.01), TARGET, LookPlan((8, 16, 24)), tolerance=0.001)
    assert strict.regret.beaten  # at a tolerance of 0.1 %, the same 1 % advantage is a confident beat


def test_a_contender_more_than_the_tolerance_ahead_is_what_to_deploy():
    result = judge(_records({3: 1.20, 4: 1.50}, 24, 0.01), TARGET, LookPlan((8, 16, 24)))
    assert result.regret.beaten and result.regret.best == "ngram γ=4"
    assert "beats it by more than 5 %" in result.regret.text
    deploy = deployment(_state(result))
    assert deploy.status == BEATEN and deploy.arm.gamma == 4 and "deploy ngram γ=4" in deploy.text


def test_an_open_confirmation_says_which_part_is_open():
    result = judge(_records({3: 1.40, 4: 1.45}, 4, 0.2), TARGET, LookPlan((4, 8, 24)))
    deploy = deployment(_state(result, status="budget"))
    assert deploy.status == NOT_SETTLED and "not settled" in deploy.text and "(budget)" in deploy.text


def _state(result, status: str = "decided") -> TargetLooks:
    state = TargetLooks(TARGET, [f"p{i}" for i in range(24)], (8, 16, 24), status=status)
    state.looks.append(LookResult(1, result.n_prompts, 1.0, 1.0, result))
    return state

"""The choice among options (`specbench.analysis.verdicts.choice`): paired comparisons, the ε-equivalent set, the
race, and the guarantee by simulation with a known truth — shown to fail on a broken rule."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.analysis import choice_simulation
from specbench.analysis.statistics.paired_ratio import PerPrompt, paired_ratio
from specbench.analysis.statistics.sequential import FIXED, LookPlan
from specbench.analysis.verdicts import choice as choice_module
from specbench.analysis.verdicts.choice import Choice, choose
from specbench.analysis.verdicts.verdict import Candidate


def _sample(rng, speed: float, n: int, noise: float = 0.03, shared=None) -> PerPrompt:
    tokens = rng.integers(40, 120, n).astype(float)
    shared = np.zeros(n) if shared is None else shared
    seconds = tokens / speed * np.exp(shared + noise * rng.standard_normal(n))
    return PerPrompt(pd.Series(tokens), pd.Series(seconds))


def _candidates(speeds: dict[int, float]) -> list[Candidate]:
    return [
        Candidate("ngram", "ngram", "chain", g, "fixed", s, 0.9 * s, 1.1 * s, 0.05, 20.0) for g, s in speeds.items()
    ]


def _samples(rng, speeds: dict[int, float], n: int, noise: float = 0.03) -> dict[tuple, PerPrompt]:
    shared = 0.3 * rng.standard_normal(n)  # prompts differ a lot; the options share that spread (it cancels)
    tokens = rng.integers(40, 120, n).astype(float)
    out = {}
    for g, s in speeds.items():
        seconds = tokens / s * np.exp(shared + noise * rng.standard_normal(n))
        out[("ngram", "chain", g, "fixed")] = PerPrompt(pd.Series(tokens), pd.Series(seconds))
    return out


def test_a_paired_ratio_is_sharper_than_either_option_against_a_noisy_baseline():
    rng = np.random.default_rng(1)
    n = 16
    shared = 0.3 * rng.standard_normal(n)
    a, b = _sample(rng, 2.0, n, shared=shared), _sample(rng, 1.8, n, shared=shared)
    ratio = paired_ratio(a, b)
    assert ratio.point == pytest.approx(2.0 / 1.8, rel=0.05)
    base = PerPrompt(a.tokens, a.tokens / 1.0 * np.exp(0.3 * rng.standard_normal(n)))
    assert ratio.log_se < 0.5 * paired_ratio(a, base).log_se


def test_near_equal_options_settle_as_equivalent_and_a_clear_loser_leaves_the_race():
    rng = np.random.default_rng(2)
    speeds = {1: 1.00, 2: 1.30, 3: 1.34, 4: 1.33, 5: 1.10}
    decision = choose(_candidates(speeds), _samples(rng, speeds, 24), FIXED)
    assert isinstance(decision, Choice) and decision.settled
    assert set(decision.equivalent) >= {("ngram", "chain", 3, "fixed"), ("ngram", "chain", 4, "fixed")}
    assert ("ngram", "chain", 1, "fixed") in decision.behind and ("ngram", "chain", 5, "fixed") in decision.behind
    assert decision.chosen in decision.equivalent
    assert "within 5 % of the best" in decision.text and "γ" in decision.text


def test_an_unsettled_choice_says_which_comparison_keeps_it_open_and_what_would_settle_it():
    rng = np.random.default_rng(3)
    speeds = {2: 1.30, 3: 1.36}  # 4.6 % apart: neither is within 5 % of the other by enough to be sure at 4 prompts
    decision = choose(_candidates(speeds), _samples(rng, speeds, 4, noise=0.08), LookPlan((4, 8, 16)))
    assert not decision.settled and decision.chosen is None
    assert decision.leader in decision.race
    assert decision.open_against is not None and "choice not settled" in decision.text


def test_one_option_needs_no_choice():
    rng = np.random.default_rng(4)
    assert choose(_candidates({2: 1.3}), _samples(rng, {2: 1.3}, 8), FIXED) is None


def test_the_choice_survives_its_dict_form():
    rng = np.random.default_rng(5)
    speeds = {1: 1.0, 2: 1.3, 3: 1.32}
    decision = choose(_candidates(speeds), _samples(rng, speeds, 16), FIXED)
    back = Choice.from_dict(decision.as_dict())
    assert back == decision


# one best option and six rivals 6–7 % behind it: picking the highest point estimate often names a rival
CROWDED = {"one best, six rivals 6-7 % behind": (1.30, 1.225, 1.22, 1.22, 1.215, 1.21, 1.20, 1.10)}


def test_the_guarantee_holds_by_simulation_and_fails_for_a_rule_without_confidence(monkeypatch):
    """The named option is more than ε behind the best in ≤ 5 % of settled sweeps (60 sims: measured 0 of 44 settled;
    the bound allows 8 %); certifying on point estimates alone (a t quantile of 0: the argmax of one run) names a
    rival in about 20 % of the same sweeps (measured 12 of 58)."""
    table = choice_simulation.choice_table(CROWDED, planned=(8, 16, 24, 32), sims=60, seed=7)
    new = table[table["rule"] == "ε-choice"].iloc[0]
    assert new["behind_when_settled"] <= 0.08
    assert new["falsely_confident"] <= 0.08
    monkeypatch.setattr(choice_module, "_quantile", lambda p: lambda dof: 0.0)
    broken = choice_simulation.choice_table(CROWDED, planned=(8, 16, 24, 32), sims=60, seed=7)
    bad = broken[broken["rule"] == "ε-choice"].iloc[0]
    assert bad["behind_when_settled"] > new["behind_when_settled"] + 0.08


def _decision(speeds: dict[int, float], n: int, noise: float, plan: LookPlan, seed: int = 8):
    """A measured decision over options run against a baseline on n prompts, with their paired samples."""
    from specbench.analysis.options import Option
    from specbench.analysis.statistics.speedup_interval import speedup_interval
    from specbench.analysis.verdicts.decision import decide_options

    rng = np.random.default_rng(seed)
    shared = 0.2 * rng.standard_normal(n)
    tokens = rng.integers(40, 120, n).astype(float)
    base = tokens * np.exp(shared + 0.02 * rng.standard_normal(n))
    options, samples = [], {}
    for g, s in speeds.items():
        seconds = tokens / s * np.exp(shared + noise * rng.standard_normal(n))
        iv = speedup_interval(tokens, seconds, tokens, base)
        options.append(
            Option("ngram", "ngram", "{}", "chain", g, iv.point, iv.lo, iv.hi, np.nan, True, "fixed", iv.log_se, iv.dof)
        )
        samples[("ngram", "chain", g, "fixed")] = PerPrompt(pd.Series(tokens), pd.Series(seconds))
    empty = pd.DataFrame()
    return decide_options(empty, empty, options, n, plan, 0.05, samples)


def test_an_adaptive_sweep_stops_only_when_the_choice_is_settled_too():
    from specbench.analysis.verdicts.stopping import DECIDED, OPEN, look_outcome
    from specbench.analysis.verdicts.verdict import YES

    plan = LookPlan((8, 16, 24))
    close = _decision({1: 1.30, 2: 1.36, 3: 1.00}, 8, 0.08, plan)  # direction clear, γ 1 and 2 4.6 % apart
    assert close.answer == YES and close.choice is not None and not close.choice.settled
    status, dropped = look_outcome([close], 1, plan.prompts)
    assert status == OPEN  # today's rule would have stopped here: a confident yes
    assert ("ngram", "chain", 3, "fixed") in dropped  # γ 3 is confidently more than 5 % behind: it leaves the race
    assert "choice not settled" in close.text
    clear = _decision({1: 1.10, 2: 1.40, 3: 1.00}, 16, 0.02, plan)
    assert clear.choice.settled and clear.best.gamma == 2
    assert look_outcome([clear], 1, plan.prompts)[0] == DECIDED


def _spread_by_gamma(rng, speeds: dict[int, float], n: int, per_gamma: float = 0.05) -> dict[tuple, PerPrompt]:
    """Per-prompt times whose difference between two γ grows with their distance (a prompt that favours long drafts
    favours γ 6 over γ 3 more than γ 5 over γ 4): distant options' paired ratios are the noisy ones."""
    shared = 0.3 * rng.standard_normal(n)
    leaning = rng.standard_normal(n)  # how much each prompt favours long drafts
    middle = float(np.mean(list(speeds)))
    tokens = rng.integers(40, 120, n).astype(float)
    return {
        ("ngram", "chain", g, "fixed"): PerPrompt(
            pd.Series(tokens),
            pd.Series(tokens / s * np.exp(shared - (g - middle) * per_gamma * leaning + 0.01 * rng.standard_normal(n))),
        )
        for g, s in speeds.items()
    }


def test_the_pick_is_the_certified_option_whose_weakest_comparison_is_strongest():
    """In a flat range whose edge option has the highest estimate, the pick is the middle option that is surest to be
    within reach of every other; reverting to the highest point estimate names the edge (γ 6)."""
    speeds = {3: 1.28, 4: 1.31, 5: 1.315, 6: 1.32}
    rng = np.random.default_rng(23)
    samples = _spread_by_gamma(rng, speeds, 32)
    point = {key: float(s.tokens.sum() / s.seconds.sum()) for key, s in samples.items()}
    candidates = [Candidate("ngram", "ngram", "chain", k[2], "fixed", point[k], 0.9, 1.1, 0.05, 20.0) for k in samples]
    decision = choose(candidates, samples, FIXED)
    assert decision.settled and len(decision.equivalent) >= 2
    top = max(decision.equivalent, key=lambda k: point[k])
    assert decision.chosen != top  # not the highest estimate ...
    margins = {i: choice_module._margin(i, decision.race, _lower_ends(decision, samples)) for i in decision.equivalent}
    assert margins[decision.chosen] == max(margins.values())  # ... but the largest margin


def _lower_ends(decision: Choice, samples: dict[tuple, PerPrompt]) -> dict[tuple, float]:
    from specbench.analysis.statistics.paired_ratio import Aligned

    keys = list(samples)
    aligned = Aligned.of([samples[k] for k in keys])
    quantile = choice_module._quantile(decision.level)
    return {
        (i, j): aligned.ratio(a, b).lower(quantile) for a, i in enumerate(keys) for b, j in enumerate(keys) if a != b
    }

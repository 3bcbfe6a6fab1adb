"""The cost model: fits recover known synthetic costs; prediction goes through the CostModel interface."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specbench.analysis.acceptance_model import AcceptanceModel, expected_tokens, improvement_factor
from specbench.analysis.cost.round_cost import (
    CostModel,
    DraftFit,
    MeasuredCost,
    VerifyFit,
    cost_stats,
    fit_costs,
    fit_group_costs,
    fit_verify,
    predict_curve,
    round_s,
)
from specbench.errors import SpecbenchError
from specbench.records.rounds import prompt_clusters
from specbench.records.summary import is_baseline
from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records, records_frame


def _group_fit(drafter: SyntheticDrafter, costs: SyntheticCosts, **kwargs):
    records = records_frame(make_records([drafter], costs=costs, **kwargs))
    base = records[is_baseline(records)]
    group = records[~is_baseline(records)]
    stats = cost_stats(group, base, prompt_clusters(records))
    return records, stats, fit_costs(stats)


def test_linear_verify_draft_step_and_c_recovered():
    costs = SyntheticCosts(verify_a_s=0.020, verify_b_s=0.0015, overhead_s=0.0004, noise=0.05)
    _, _, fit = _group_fit(
        SyntheticDrafter(alpha=0.7, gammas=(1, 2, 4, 6), draft_step_s=0.003), costs, n_prompts=10, seed=1
    )
    verify = fit.cost.verify
    assert verify.kind == "linear"  # no knee invented in linear data
    assert verify.a == pytest.approx(0.020, rel=0.03) and verify.b == pytest.approx(0.0015, rel=0.05)
    assert fit.draft_step_s == pytest.approx(0.003, rel=0.03)
    assert fit.target_step_s == pytest.approx(0.0215, rel=0.02)  # t(1) = a + b
    assert fit.c == pytest.approx(0.003 / 0.0215, rel=0.05)
    assert fit.cost.round_overhead_s == pytest.approx(0.0004, rel=0.03)
    assert fit.propose_rate > 0.9  # only the last round of a generation drafts nothing
    assert fit.baseline_tokens_per_s == pytest.approx(1 / (0.0215 + 0.0004), rel=0.03)


def test_knee_detected_where_the_data_have_one():
    costs = SyntheticCosts(verify_a_s=0.020, verify_b_s=0.0002, knee=5, verify_b2_s=0.004, noise=0.05)
    _, _, fit = _group_fit(SyntheticDrafter(alpha=0.95, gammas=(1, 2, 3, 4, 6, 8, 10)), costs, n_prompts=6, seed=2)
    verify = fit.cost.verify
    assert verify.kind == "knee" and verify.knee == 5
    assert verify.b2 == pytest.approx(0.004, rel=0.1)
    assert verify(11) == pytest.approx(costs.verify(11), rel=0.03)  # extrapolates the steep segment


def test_knee_search_on_exact_aggregates():
    x = np.array([1, 2, 3, 4, 5, 6, 7.0])
    truth = 0.01 + 0.001 * x + 0.01 * np.maximum(x - 4, 0)
    n = np.full(7, 50.0)
    noise_ss = 50 * 1e-8  # a little within-size spread
    totals = np.stack([n, n * truth, n * truth**2 + noise_ss], axis=-1)
    fit, _ = fit_verify(x, totals)
    assert (fit.kind, fit.knee) == ("knee", 4.0)
    np.testing.assert_allclose([fit.a, fit.b, fit.b2], [0.01, 0.001, 0.01], rtol=1e-6)
    linear = np.stack([n, n * (0.01 + 0.002 * x), n * (0.01 + 0.002 * x) ** 2 + noise_ss], axis=-1)
    assert fit_verify(x, linear)[0].kind == "linear"


def test_verify_fit_never_falls_with_tokens():
    """Noisy small-model timings can dip at large k; a hinge that would make verification cheaper
    with more tokens must not be chosen (it would predict ever larger γ to be ever faster)."""
    x = np.array([1, 2, 3, 4, 5, 6, 7.0])
    t = 0.01 + 0.004 * x - 0.005 * np.maximum(x - 5, 0)  # rises, then dips: the line still rises
    n = np.full(7, 40.0)
    fit, _ = fit_verify(x, np.stack([n, n * t, n * t**2 + 1e-9], axis=-1))
    assert np.all(np.diff(fit(np.arange(1, 30))) >= -1e-12)
    replicate, _ = fit_verify(
        x, np.stack([n, n * t, n * t**2 + 1e-9], axis=-1), like=VerifyFit(0.01, 0.004, "knee", 5.0, 0.0)
    )
    assert replicate.kind == "knee" and np.all(np.diff(replicate(np.arange(1, 30))) >= -1e-12)


def test_degenerate_verify_fits_are_flat_and_explained():
    fit, notes = fit_verify(np.array([3.0]), np.array([[10.0, 0.2, 0.004]]))
    assert fit.kind == "flat" and fit(7) == pytest.approx(0.02) and "one size" in notes[0]
    falling = np.array([[10.0, 0.30, 0.0091], [10.0, 0.20, 0.0041]])
    fit, notes = fit_verify(np.array([1.0, 5.0]), falling)
    assert fit.kind == "flat" and "did not grow" in notes[0]


def test_model_free_drafter_proposal_time_and_match_rate():
    drafter = SyntheticDrafter(
        name="ngram",
        params={"n_min": 1, "n_max": 3},
        model_free=True,
        draft_fixed_s=0.0008,
        no_match_rate=0.4,
        gammas=(2, 4),
        alpha=0.6,
    )
    _, _, fit = _group_fit(drafter, SyntheticCosts(noise=0.03), n_prompts=12, seed=3)
    assert fit.cost.draft.model_free and fit.cost.draft.step_s == 0.0
    assert fit.draft_step_s == pytest.approx(0.0008, rel=0.03)
    assert fit.propose_rate == pytest.approx(0.6, abs=0.05)
    assert fit.cost.draft_s(7) == pytest.approx(0.0008, rel=0.03)  # a lookup costs the same for any γ


def test_bootstrap_weights_are_resamples():
    _, stats, fit = _group_fit(SyntheticDrafter(gammas=(1, 3)), SyntheticCosts(), n_prompts=5, seed=4)
    same = fit_costs(stats, np.ones(5), like=fit)
    doubled = fit_costs(stats, np.full(5, 2.0), like=fit)
    for other in (same, doubled):
        assert other.cost.verify.a == pytest.approx(fit.cost.verify.a)
        assert other.draft_step_s == pytest.approx(fit.draft_step_s)
        assert other.baseline_tokens_per_s == pytest.approx(fit.baseline_tokens_per_s)
    dropped = fit_costs(stats, np.array([1.0, 0, 0, 0, 0]), like=fit)  # one prompt only: different numbers
    assert dropped.cost.round_overhead_s != pytest.approx(fit.cost.round_overhead_s, rel=1e-9)


class ProfileLike:
    """A stand-in for a hardware profile: costs grow with batch size; not a MeasuredCost."""

    def verify_s(self, verify_tokens, batch: int = 1, context=None):
        return 0.01 * batch + 0.002 * np.asarray(verify_tokens, dtype=float)

    def draft_s(self, gamma, batch: int = 1, context=None):
        g = np.asarray(gamma, dtype=float)
        return np.where(g > 0, 0.001 * batch * g, 0.0)

    def overhead_s(self, gamma, batch: int = 1, context=None):
        return np.zeros_like(np.asarray(gamma, dtype=float)) + 0.0005


def test_prediction_uses_only_the_interface():
    profile = ProfileLike()
    assert isinstance(profile, CostModel) and isinstance(
        MeasuredCost(VerifyFit(0.01, 0.001), DraftFit(0, 0.001, False), 0.0, 0.0), CostModel
    )
    curve = predict_curve(AcceptanceModel(0.8), profile, range(1, 7), baseline_tokens_per_s=50.0)
    g = np.arange(1, 7)
    seconds = 0.001 * g + (0.01 + 0.002 * (g + 1)) + 0.0005
    np.testing.assert_allclose(curve["round_s"], seconds)
    np.testing.assert_allclose(curve["tokens_per_s"], expected_tokens(0.8, g) / seconds)
    np.testing.assert_allclose(curve["speedup"], expected_tokens(0.8, g) / seconds / 50.0)
    # the paper column: γc with c = draft step ÷ one-token step t(1)
    np.testing.assert_allclose(curve["paper_factor"], improvement_factor(0.8, g, 0.001 / 0.012))
    assert round_s(profile, 3, batch=4) > round_s(profile, 3)  # batch flows through the interface
    with pytest.raises(SpecbenchError, match="batch 1"):
        MeasuredCost(VerifyFit(0.01, 0.001), DraftFit(0, 0.001, False), 0.0, 0.0).verify_s(3, batch=8)


def test_no_match_rounds_enter_tokens_and_time():
    profile = ProfileLike()
    curve = predict_curve(AcceptanceModel(0.5), profile, [4], propose_rate=0.25, baseline_tokens_per_s=1.0)
    tokens = 0.25 * expected_tokens(0.5, 4) + 0.75
    seconds = 0.004 + 0.25 * (0.01 + 0.002 * 5) + 0.75 * (0.01 + 0.002) + 0.0005
    assert curve["tokens_per_round"].iloc[0] == pytest.approx(tokens)
    assert curve["round_s"].iloc[0] == pytest.approx(seconds)


def test_tree_verifies_its_nodes():
    profile = ProfileLike()
    curve = predict_curve(AcceptanceModel(0.7), profile, [2], tree_nodes={2: 6}, baseline_tokens_per_s=1.0)
    assert curve["verify_s"].iloc[0] == pytest.approx(0.01 + 0.002 * 7)
    assert curve["expected_tokens"].iloc[0] == pytest.approx(expected_tokens(0.7, 2))


def test_predicted_tokens_per_s_matches_measured_at_measured_gamma():
    drafter = SyntheticDrafter(alpha=0.75, gammas=(2, 5), draft_step_s=0.002)
    records, stats, fit = _group_fit(drafter, SyntheticCosts(noise=0.03), n_prompts=16, seed=5, max_new_tokens=96)
    curve = predict_curve(
        AcceptanceModel(0.75),
        fit.cost,
        [2, 5],
        propose_rate=fit.propose_rate,
        baseline_tokens_per_s=fit.baseline_tokens_per_s,
    )
    for gamma, predicted in zip([2, 5], curve["tokens_per_s"]):
        part = records[records["gamma"] == gamma]
        measured = part["decode_tokens"].sum() / part["decode_s"].sum()
        assert predicted == pytest.approx(measured, rel=0.05)


def test_fit_group_costs_table():
    records = records_frame(make_records([SyntheticDrafter(gammas=(1, 2))], n_prompts=3, seed=6))
    table = fit_group_costs(records)
    assert len(table) == 1 and table["verify_model"].iloc[0] == "linear"
    no_base = fit_group_costs(records[~is_baseline(records)])
    assert "no target-only baseline" in no_base["cost_notes"].iloc[0]
    assert isinstance(table, pd.DataFrame)

"""The acceptance model: formulas, the closed-form MLE, its interval's coverage, the position test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from specbench.analysis.acceptance_model import (
    AcceptanceModel,
    alpha_mle,
    expected_tokens,
    fit_decay,
    fit_decay_batch,
    improvement_factor,
    position_counts,
    tokens_from_rates,
)
from specbench.analysis.fit import fit_acceptance, fits_frame, goodness_frame, goodness_of_fit, positions_frame
from specbench.errors import SpecbenchError
from specbench.records.rounds import flatten_rounds, prompt_clusters
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame


def _fit(drafter: SyntheticDrafter, **kwargs):
    kwargs.setdefault("baseline", False)
    n_boot = kwargs.pop("n_boot", 400)
    return fit_acceptance(records_frame(make_records([drafter], **kwargs)), n_boot=n_boot)[0]


def _finite_numbers(row: dict) -> None:
    for key, value in row.items():
        if isinstance(value, float):
            assert np.isfinite(value), f"{key} is {value}"


# ----------------------------------------------------------------------------- plain formulas


def test_expected_tokens_hand_computed():
    assert expected_tokens(0.6, 3) == pytest.approx(1 + 0.6 + 0.36 + 0.216)  # 2.176
    assert expected_tokens(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)  # 3.3616
    assert expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens(1.0, 4) == 5.0  # the limit γ + 1
    assert expected_tokens(1.0 - 1e-13, 4) == pytest.approx(5.0)
    assert expected_tokens(0.0, 7) == 1.0
    assert expected_tokens(0.9, 0) == 1.0
    np.testing.assert_allclose(expected_tokens(np.array([0.5, 1.0]), np.array([2, 2])), [1.75, 3.0])


def test_improvement_factor_hand_computed():
    # Leviathan et al.: (1 − α^(γ+1)) / ((1 − α)(γc + 1))
    assert improvement_factor(0.8, 4, 0.1) == pytest.approx(0.67232 / (0.2 * 1.4))  # 2.40114
    assert improvement_factor(0.8, 4, 0.1) == pytest.approx(2.401142857)
    assert improvement_factor(0.5, 2, 0.5) == pytest.approx(0.875)
    assert improvement_factor(1.0, 3, 0.0) == pytest.approx(4.0)
    assert improvement_factor(0.0, 5, 0.2) == pytest.approx(0.5)  # all rejected: only the cost remains


def test_per_position_expectation_matches_constant_and_decaying_by_hand():
    assert tokens_from_rates(np.full(3, 0.6)) == pytest.approx(expected_tokens(0.6, 3))
    model = AcceptanceModel(0.9, 0.5)  # rates 0.9, 0.45, 0.225
    np.testing.assert_allclose(model.rates(3), [0.9, 0.45, 0.225])
    assert model.expected_tokens(3) == pytest.approx(1 + 0.9 + 0.9 * 0.45 + 0.9 * 0.45 * 0.225)
    assert AcceptanceModel(0.7).expected_tokens(5) == pytest.approx(expected_tokens(0.7, 5))


# ----------------------------------------------------------------------------- the estimator


def test_closed_form_mle_maximises_the_truncated_geometric_likelihood():
    rng = np.random.default_rng(3)
    k = rng.integers(0, 7, size=400)  # mixed draft lengths, some rounds draft nothing
    j = np.array([min(rng.geometric(0.35) - 1, kk) for kk in k])  # accepted ~ truncated geometric, α = 0.65

    def negloglik(a: float) -> float:  # written per round, independently of the estimator
        full = j == k
        return -(np.sum(j * np.log(a)) + np.sum(np.where(full | (k == 0), 0.0, np.log(1 - a))))

    numeric = optimize.minimize_scalar(negloglik, bounds=(1e-6, 1 - 1e-6), method="bounded", options={"xatol": 1e-10}).x
    s, f = j[k > 0].sum(), np.sum((j < k) & (k > 0))
    assert alpha_mle(s, f) == pytest.approx(numeric, abs=1e-6)
    assert 0.55 < alpha_mle(s, f) < 0.75
    assert alpha_mle(5, 0) == 1.0 and alpha_mle(0, 5) == 0.0 and alpha_mle(0, 0) == 0.0


def test_position_counts_match_the_records_own_counts():
    records = records_frame(make_records([SyntheticDrafter(alpha=0.7, gammas=(3,))], n_prompts=5, baseline=False))
    clusters = prompt_clusters(records)
    counts = position_counts(flatten_rounds(records, clusters), len(clusters))
    attempts, accepts = counts.total()
    np.testing.assert_array_equal(attempts, np.sum(np.stack(records["pos_attempts"].to_numpy()), axis=0))
    np.testing.assert_array_equal(accepts, np.sum(np.stack(records["pos_accepts"].to_numpy()), axis=0))
    assert counts.successes.sum() == records["accepted"].sum()


def test_alpha_recovered_within_interval_over_seeds():
    """Coverage, checked honestly: 40 independent sweeps of 12 prompts with mixed γ per true α.

    A correct 95 % interval (true coverage ≥ 94 %) contains α in ≥ 34 of 40 sweeps per α and in
    ≥ 106 of all 120 with probability > 98 %; an interval half as wide covers ~60 % and fails."""
    pooled = 0
    for alpha in (0.3, 0.6, 0.9):
        hits, widths = 0, []
        for seed in range(40):
            fit = _fit(
                SyntheticDrafter(alpha=alpha, gammas=(1, 2, 3, 5, 8)),
                n_prompts=12,
                max_new_tokens=40,
                seed=100 + seed,
                n_boot=500,
            )
            hits += fit.estimate.lo <= alpha <= fit.estimate.hi
            widths.append(fit.estimate.hi - fit.estimate.lo)
            assert fit.gammas == [1, 2, 3, 5, 8]
        assert hits >= 34, f"α={alpha}: coverage {hits}/40"
        assert np.mean(widths) < 0.08, f"α={alpha}: intervals too wide to be useful"
        pooled += hits
    assert pooled >= 106, f"pooled coverage {pooled}/120"


def test_heterogeneous_prompts_widen_the_prompt_bootstrap():
    """Prompts of unequal difficulty: the prompt bootstrap is wider than the binomial interval that
    treats every draft position as independent."""
    from specbench.analysis.statistics.intervals import clopper_pearson

    fit = _fit(SyntheticDrafter(alpha=0.6, alpha_spread=0.2, gammas=(2, 4)), n_prompts=30, seed=4)
    lo, hi = clopper_pearson(fit.accepted, fit.trials)
    assert fit.estimate.hi - fit.estimate.lo > 1.5 * (hi - lo)


# ----------------------------------------------------------------------------- per-position test, decay


def test_decaying_acceptance_is_flagged_and_the_decaying_model_preferred():
    fit = _fit(SyntheticDrafter(alpha=0.9, decay=0.85, gammas=(2, 4, 8)), n_prompts=24, seed=1)
    test = fit.estimate.test
    assert test.p_constant_vs_free < 0.01 and "decays" in test.flag
    assert test.preferred == "decaying" and fit.model.name == "decaying"
    assert test.aic_decay < test.aic_constant
    assert fit.model.decay == pytest.approx(0.85, abs=0.04)
    assert fit.model.alpha == pytest.approx(0.9, abs=0.04)
    positions = fit.positions
    assert positions["alpha_i"].iloc[0] > positions["alpha_i"].iloc[4]  # the rates do fall


def test_constant_acceptance_is_not_flagged():
    flagged = 0
    for seed in range(10):
        fit = _fit(SyntheticDrafter(alpha=0.7, gammas=(2, 4, 8)), n_prompts=16, seed=50 + seed, n_boot=50)
        flagged += bool(fit.estimate.test.flag)
        assert fit.model.name == "constant"
    assert flagged <= 1


def test_rising_rates_from_unequal_prompts_are_not_called_decay():
    fit = _fit(SyntheticDrafter(alpha=0.6, alpha_spread=0.3, gammas=(2, 4, 8)), n_prompts=40, seed=3)
    assert "rises" in fit.estimate.test.flag
    assert fit.model.decay == 1.0  # predictions stay with constant α
    assert any("rising" in n for n in fit.estimate.notes)


def test_decay_fit_matches_a_numerical_optimum_and_vectorises():
    attempts = np.array([927, 776, 345, 194, 42, 21, 12, 3.0])
    accepts = np.array([788, 559, 197, 99, 22, 12, 3, 0.0])
    model, loglik = fit_decay(attempts, accepts)

    def negloglik(theta):
        rates = np.exp(theta[0] + theta[1] * np.arange(8))
        if (rates >= 1).any():
            return 1e18
        return -np.sum(accepts * np.log(rates) + (attempts - accepts) * np.log(1 - rates))

    best = optimize.minimize(
        negloglik, [np.log(0.8), 0.0], method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 5000}
    )
    assert model.alpha == pytest.approx(np.exp(best.x[0]), rel=1e-5)
    assert model.decay == pytest.approx(np.exp(best.x[1]), rel=1e-5)
    assert loglik == pytest.approx(-best.fun, rel=1e-9)
    theta, batch_ll = fit_decay_batch(np.stack([attempts, 2 * attempts]), np.stack([accepts, 2 * accepts]))
    np.testing.assert_allclose(np.exp(theta[:, 0]), model.alpha, rtol=1e-6)  # doubling the data: same fit
    np.testing.assert_allclose(batch_ll, [loglik, 2 * loglik], rtol=1e-8)


# ----------------------------------------------------------------------------- goodness of fit


def test_goodness_of_fit_small_for_the_right_model_large_for_the_wrong_one():
    records = records_frame(
        make_records([SyntheticDrafter(alpha=0.9, decay=0.85, gammas=(1, 4, 8))], n_prompts=24, seed=2, baseline=False)
    )
    fit = fit_acceptance(records, n_boot=100)[0]
    assert (fit.goodness["z"].abs() < 3.5).all()  # the preferred (decaying) model
    clusters = prompt_clusters(records)
    wrong = goodness_of_fit(records, flatten_rounds(records, clusters), fit.estimate.constant)
    assert wrong.loc[wrong["gamma"] == 8, "residual"].iloc[0] < 0  # constant α over-predicts long drafts
    assert wrong["z"].abs().max() > 3.5
    assert set(fit.goodness.columns) >= {"gamma", "tau_observed", "tau_predicted", "residual", "z"}


def test_tree_uses_depth_as_draft_length():
    fit = _fit(
        SyntheticDrafter(name="draft-model", alpha=0.75, gammas=(2, 4), tree="3x1x1x1", nodes_per_depth=3),
        n_prompts=16,
        seed=5,
    )
    assert fit.estimate.lo <= 0.75 <= fit.estimate.hi
    assert fit.alpha_observed < 0.5  # accepted ÷ tree nodes: far below the per-depth α


def test_by_category_splits_groups():
    records = records_frame(
        make_records([SyntheticDrafter(alpha=0.7, gammas=(2, 4))], n_prompts=16, seed=6, baseline=False)
    )
    fits = fit_acceptance(records, by=["category"], n_boot=100)
    frame = fits_frame(fits)
    assert len(frame) == 8 and set(frame["category"]) == set(records["category"])
    assert (frame["n_prompts"] == 2).all()
    assert not positions_frame(fits).empty and "category" in goodness_frame(fits).columns


# ----------------------------------------------------------------------------- degenerate data


def test_everything_accepted_is_finite_and_explained():
    fit = _fit(SyntheticDrafter(alpha=1.0, gammas=(2, 4)), n_prompts=6, seed=7)
    row = fit.summary()
    assert row["alpha"] == 1.0 and row["alpha_hi"] == 1.0 and 0.9 < row["alpha_lo"] < 1.0
    assert "every draft token accepted" in row["ci_method"]
    assert row["flag"] == ""
    _finite_numbers(row)
    assert np.isfinite(fit.goodness[["tau_observed", "tau_predicted", "residual", "z"]].to_numpy()).all()


def test_nothing_accepted_is_finite_and_explained():
    fit = _fit(SyntheticDrafter(alpha=0.0, gammas=(1, 3)), n_prompts=6, seed=8)
    row = fit.summary()
    assert row["alpha"] == 0.0 and row["alpha_lo"] == 0.0 and 0.0 < row["alpha_hi"] < 0.05
    assert "no draft token accepted" in row["ci_method"]
    assert "not identifiable" in row["notes"]  # the decaying model: one position only
    _finite_numbers(row)
    assert (fit.goodness["tau_predicted"] == 1.0).all()


def test_nothing_drafted_is_finite_and_explained():
    drafter = SyntheticDrafter(
        name="ngram",
        params={"n_min": 1, "n_max": 3},
        model_free=True,
        no_match_rate=1.0,
        draft_fixed_s=1e-4,
        gammas=(4,),
    )
    row = _fit(drafter, n_prompts=4, seed=9).summary()
    assert row["alpha"] == 0.0 and (row["alpha_lo"], row["alpha_hi"]) == (0.0, 1.0)
    assert "no round drafted" in row["notes"]
    _finite_numbers(row)


def test_single_gamma_and_single_prompt():
    single_gamma = _fit(SyntheticDrafter(alpha=0.6, gammas=(4,)), n_prompts=12, seed=10)
    assert single_gamma.estimate.test.positions == 4 and single_gamma.estimate.decay is not None
    assert single_gamma.estimate.lo <= 0.6 <= single_gamma.estimate.hi
    one_prompt = _fit(SyntheticDrafter(alpha=0.6, gammas=(2, 4)), n_prompts=1, seed=11, max_new_tokens=200)
    row = one_prompt.summary()
    assert "one prompt" in row["ci_method"] and row["alpha_lo"] < row["alpha"] < row["alpha_hi"]
    _finite_numbers(row)


def test_only_baseline_records_is_a_user_error():
    records = records_frame(make_records([SyntheticDrafter(gammas=())], n_prompts=2))
    with pytest.raises(SpecbenchError, match="no speculative records"):
        fit_acceptance(records)
    with pytest.raises(SpecbenchError, match="no records"):
        fit_acceptance(pd.DataFrame(columns=records.columns))


def test_goodness_of_fit_z_is_undefined_when_the_model_has_no_variance():
    """α̂ = 1 with a last round cut at the length limit after drafting γ (how a serving engine's rounds end):
    the residual is real, and z — residual ÷ a zero standard error — is NaN, not -inf."""
    records = make_records([SyntheticDrafter(alpha=1.0, gammas=(3,))], n_prompts=4, max_new_tokens=30)
    for r in records:
        if r["gamma"] == 3:
            r["decode_tokens"] -= 1  # the last round's tokens cut by one after it drafted and accepted γ
            r["new_tokens"] -= 1
    fits = fit_acceptance(records_frame(records), n_boot=0)
    (fit,) = fits
    row = fit.goodness.iloc[0]
    assert fit.estimate.alpha == 1.0 and row["residual"] < 0 and np.isnan(row["z"])

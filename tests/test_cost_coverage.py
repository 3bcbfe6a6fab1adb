"""A cost prediction outside what was timed says so, by one rule for batch and context
(`specbench.analysis.cost.coverage`), in the prediction's row and in the verdict line that rests on it (issue 49)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.cost.coverage import describe, outside
from specbench.analysis.cost.profile import fit_profile
from specbench.analysis.cost.round_cost import DraftFit, MeasuredCost, VerifyFit
from specbench.analysis.recommendation.recommend import ProfiledCosts, recommend
from specbench.errors import SpecbenchError
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame
from tests.test_profile import synthetic_profile

timed_values = st.lists(st.integers(1, 100_000), min_size=1, max_size=6, unique=True).map(sorted)


@settings(max_examples=200, deadline=None)
@given(axis=st.sampled_from(["batch", "context"]), timed=timed_values, value=st.integers(1, 200_000))
def test_a_query_is_marked_exactly_when_it_leaves_the_timed_range_on_either_axis(axis, timed, value):
    words = outside(axis, value, timed, "profiled")
    if timed[0] <= value <= timed[-1]:
        assert words is None
    elif value > timed[-1]:
        assert words is not None and words.startswith(f"{axis} {value:,}") and "extrapolated" in words
    else:
        assert words is not None and "upper bound" in words
    both = describe({"batch": value, "context": value}, {"batch": timed, "context": timed}, "profiled")
    each = [outside(a, value, timed, "profiled") for a in ("batch", "context")]
    assert both == (None if words is None else "; ".join(each)) and each[1] == outside(
        "context", value, timed, "profiled"
    )


def test_the_profile_and_the_sweep_costs_say_it_in_the_same_words():
    cost = fit_profile(synthetic_profile(lambda k, b, c: 0.01 + 0.001 * k, lambda b, c: 0.001))  # B 1–64, c 256–1024
    assert cost.extrapolation(8, 512) is None
    assert cost.extrapolation(8, 8192) == "context 8,192 extrapolated beyond the profiled context lengths (256–1,024)"
    assert cost.extrapolation(128, 512) == "batch 128 extrapolated beyond the profiled batch sizes (1–64)"
    cost.verify_s(2, 128, 8192)
    assert any(
        n.startswith("verify (synthetic-target): batch 128 extrapolated beyond the profiled batch sizes (1–64)")
        for n in cost.notes
    )
    measured = MeasuredCost(VerifyFit(0.01, 0.001), DraftFit(0, 0.001, False), 0.0, 0.0, contexts=(100.0, 400.0))
    assert measured.extrapolation(1, None) is None and measured.extrapolation(1, 300) is None
    assert measured.extrapolation(1, 1000) == "context 1,000 extrapolated beyond the timed context lengths (100–400)"
    with pytest.raises(SpecbenchError, match="batch 1 only"):
        measured.extrapolation(4, 300)


def test_a_verdict_resting_on_an_extrapolated_cost_says_so_in_its_line():
    records = records_frame(make_records([SyntheticDrafter(alpha=0.8, gammas=(1, 2, 4))], n_prompts=6, seed=4))
    flat = synthetic_profile(lambda k, b, c: 0.010 + 0.00001 * k, lambda b, c: 0.0001)  # B 1–64, c 256–1024
    inside = recommend(records, ProfiledCosts(flat, batches=[1, 8], context=512), n_boot=50)[0]
    assert "extrapolated" not in inside.verdict and inside.per_batch.table["extrapolated"].isna().all()
    beyond = recommend(records, ProfiledCosts(flat, batches=[1, 128], context=8192), n_boot=50)[0]
    context_words = "context 8,192 extrapolated beyond the profiled context lengths (256–1,024)"
    batch_words = "batch 128 extrapolated beyond the profiled batch sizes (1–64)"
    parts = beyond.verdict.split(" — ", 1)[1].split("; batch 128")
    assert context_words in parts[0] and batch_words not in parts[0]
    assert f"({batch_words}; {context_words})" in parts[1]
    assert list(beyond.per_batch.table["extrapolated"]) == [context_words, f"{batch_words}; {context_words}"]


def test_recommend_prints_the_extrapolation_in_the_verdict_and_the_interval(tmp_path):
    from specbench.records.profile_file import write_profile
    from tests.synthetic_results import write_results
    from tests.test_profile import _invoke

    results = write_results(
        tmp_path / "res", make_records([SyntheticDrafter(alpha=0.8, gammas=(1, 2, 4))], n_prompts=6, seed=4)
    )
    flat = write_profile(tmp_path / "flat", synthetic_profile(lambda k, b, c: 0.010 + 0.00001 * k, lambda b, c: 1e-4))
    args = ("recommend", results, "--cost-profile", flat, "--batch", "1,128", "--context", "8192", "--bootstrap", "50")
    printed = _invoke(*args)
    assert printed.exit_code == 0, printed.output
    text = " ".join(printed.stdout.split())  # the terminal folds long lines
    assert "context 8,192 extrapolated beyond the profiled context lengths (256–1,024)" in text
    assert "batch 128 extrapolated beyond the profiled batch sizes (1–64)" in text and "] extrapolated" in text
    choices = json.loads(_invoke(*args, "--json").stdout)[0]["per_batch"]["choices"]
    assert all("context 8,192 extrapolated" in c["extrapolated"] for c in choices)

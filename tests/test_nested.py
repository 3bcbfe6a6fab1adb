"""Nested speculation (specbench.engine.strategies.nested): lossless, and its hits are counted right.

The nested driver changes only where drafts come from (prepared during the previous round's
verification), so it must pass the same losslessness checks as sequential speculation: greedy
output identical to target-only decoding, and the sampled distribution of the first tokens
equal to the target's exact one (with a broken acceptance rule caught by the same test).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from specbench.analysis.strategies import strategy_table
from specbench.engine.drafters import make_drafter
from specbench.engine.drafters.base import Proposal
from specbench.engine.loop import SpeculativeEngine, Verifier
from specbench.engine.sampling import SamplingParams
from specbench.engine.strategies.nested import NestedDriver, likeliest_outcomes
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.units import expand_units, load_workloads
from specbench.models.resolve import load_model
from specbench.records.store import load_records
from tests.cli_helpers import (
    TINY_SWEEP,
    assert_user_error,
    invoke,
    jsonl_workload,
    write_sweep_yaml,
)
from tests.test_engine_sampling import (
    broken_sampling,
    chi_square_pvalue,
    exact_distributions,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NEW_TOKENS = 24
V8_PROMPT = [3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 3, 6, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1]


def nested_engine(target, drafter, *, prepared: int = 1, **options) -> SpeculativeEngine:
    """The engine with nested rounds: the sequential engine given the nested round driver."""
    return SpeculativeEngine(target, drafter, driver=NestedDriver(prepared=prepared), **options)


@pytest.fixture(scope="module")
def tiny_llama():
    return load_model("tiny-random-llama")


def test_greedy_identical_to_target_only_on_smollm2_with_the_early_exit_drafter(
    smollm2, smollm2_prompt_ids, early_exit_drafter
):
    """The early-exit drafter is refused almost always: rounds end in rejections, and the prepared
    drafts for them (the drafter's second choice as the correction) are verified when they guess right."""
    ids = smollm2_prompt_ids[0]
    engine = nested_engine(smollm2, early_exit_drafter, gamma=2, prepared=3)
    result = engine.generate(ids, NEW_TOKENS, stop_at_eos=False)
    assert (
        result.tokens == SpeculativeEngine(smollm2, None, gamma=0).generate(ids, NEW_TOKENS, stop_at_eos=False).tokens
    )
    # the draft model's prepared drafts are the drafts it would have made: the same rounds as sequential
    sequential = SpeculativeEngine(smollm2, early_exit_drafter, gamma=2).generate(ids, NEW_TOKENS, stop_at_eos=False)
    assert result.rounds.accepted == sequential.rounds.accepted
    # P = 3 outcomes per round, fewer where a round cut short at the length limit has fewer
    assert result.prepared_drafts == sum(min(3, d + 1) for d in result.rounds.drafted if d > 0)


@pytest.mark.parametrize("gamma,prepared", [(1, 2), (3, 1), (3, 4)])
def test_greedy_identical_to_target_only_on_tiny_random_models(tiny_v8, gamma, prepared):
    target, _ = tiny_v8
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"})
    engine = nested_engine(target, drafter, gamma=gamma, prepared=prepared)
    result = engine.generate(V8_PROMPT, 40, stop_at_eos=False)
    assert result.tokens == SpeculativeEngine(target, None, gamma=0).generate(V8_PROMPT, 40, stop_at_eos=False).tokens
    assert 0 < result.accepted < result.drafted
    assert result.prepared_drafts > 0 and result.prepared_hits > 0


def test_greedy_identical_with_a_feature_drafter(smollm2, smollm2_prompt_ids):
    """EAGLE drafts the guessed tokens from its own features; the output stays the target's."""
    drafter = make_drafter("eagle", smollm2, {})
    ids = smollm2_prompt_ids[0]
    result = nested_engine(smollm2, drafter, gamma=3, prepared=2).generate(ids, NEW_TOKENS, stop_at_eos=False)
    assert (
        result.tokens == SpeculativeEngine(smollm2, None, gamma=0).generate(ids, NEW_TOKENS, stop_at_eos=False).tokens
    )
    assert result.accepted > 0 and result.prepared_hits > 0


# ---------------------------------------------------------------------------------------- hits


def test_every_round_hits_when_the_drafter_is_the_target(tiny_llama):
    """Drafter = target, greedy: every draft is accepted and the bonus is the drafter's own argmax,
    so with every outcome prepared each round after the first runs on a prepared draft."""
    drafter = make_drafter("draft-model", tiny_llama, {"model": "tiny-random-llama"})
    prompt = list(range(3, 20))
    for gamma in (1, 3):
        engine = nested_engine(tiny_llama, drafter, gamma=gamma, prepared=gamma + 1)
        result = engine.generate(prompt, 25, stop_at_eos=False)
        rounds = len(result.rounds)
        last_drafts = result.rounds.drafted[-1]  # a round left with one token to emit drafts nothing
        assert result.alpha == 1.0
        assert result.prepared_drafts == sum(min(gamma + 1, d + 1) for d in result.rounds.drafted if d > 0)
        assert result.prepared_hits == rounds - 1 - (last_drafts == 0)
        assert result.draft_hidden_s > 0


def test_outcomes_are_ranked_by_the_drafter_confidence():
    log = torch.log(torch.tensor([0.9, 0.9 * 0.8, 0.9 * 0.8 * 0.1])).tolist()  # q_1 = .9, q_2 = .8, q_3 = .1
    # P(j=0) = .1, P(j=1) = .9·.2 = .18, P(j=2) = .72·.9 = .648, P(all) = .072
    assert likeliest_outcomes(log, 3, 4) == [2, 1, 0, 3]
    assert likeliest_outcomes(log, 3, 2) == [2, 1]
    assert likeliest_outcomes(None, 3, 2) == [3, 0]


def test_unsupported_configurations_fail_in_one_line(tiny_v8):
    target, _ = tiny_v8
    with pytest.raises(SpecbenchError, match="draft ahead"):
        nested_engine(target, make_drafter("ngram", target, {}), gamma=2)
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"})
    with pytest.raises(SpecbenchError, match="chains only"):
        nested_engine(target, drafter, gamma=2, tree="2x1")
    with pytest.raises(SpecbenchError, match="prepared"):
        nested_engine(target, drafter, gamma=2, prepared=0)
    assert Proposal(torch.zeros(1, 0, dtype=torch.long), None).path_logq is None


# ---------------------------------------------------------------------------------------- sampling

# t1 from the prefill; round 1 (γ = 1) emits t2 or t2 t3; round 2 always runs (γ = 1), on a prepared
# draft when the guess for round 1's outcome was right, and emits t4 (and t3 after a rejection)
NEW = 5
SAMPLES = 1000


def nested_counts(engine: SpeculativeEngine, samples: int):
    """Counts of (t2, t3) and t4 over ``samples`` seeds, and the rounds that verified a prepared draft."""
    joint23, marginal4, hits = np.zeros((8, 8)), np.zeros(8), 0
    for seed in range(samples):
        t = engine.generate(V8_PROMPT, NEW, seed=seed, stop_at_eos=False)
        joint23[t.tokens[1], t.tokens[2]] += 1
        marginal4[t.tokens[3]] += 1
        hits += t.prepared_hits
    return joint23, marginal4, hits


def _nested_sampling_pvalues(tiny_v8, verifier=None, samples=SAMPLES):
    target, _ = tiny_v8
    sampling = SamplingParams(temperature=1.0)
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"})
    engine = nested_engine(target, drafter, gamma=1, prepared=2, sampling=sampling, verifier=verifier)
    joint23, marginal4 = exact_distributions(target.model, 1.0, 0)
    counts23, counts4, hits = nested_counts(engine, samples)
    return chi_square_pvalue(counts23, joint23), chi_square_pvalue(counts4, marginal4), hits


def test_nested_sampling_matches_target_distribution(tiny_v8):
    p23, p4, hits = _nested_sampling_pvalues(tiny_v8)
    assert hits > SAMPLES // 10, "prepared drafts must be verified often enough to matter"
    assert p23 > 1e-3
    assert p4 > 1e-3


def test_nested_sampling_test_catches_a_broken_acceptance_rule(tiny_v8):
    p23, p4, _ = _nested_sampling_pvalues(tiny_v8, Verifier(sampling=broken_sampling))
    assert min(p23, p4) < 1e-5


# ---------------------------------------------------------------------------------------- sweeps

SWEEP = Path(__file__).resolve().parents[1] / "sweeps" / "strategies-nested.yaml"


def test_sweep_file_runs_end_to_end_at_tiny_size(tmp_path, prompts_file):
    """sweeps/strategies-nested.yaml cut to one prompt, γ = 2 and 8 tokens: sequential and nested
    EAGLE on SmolLM2, records with the strategy columns, greedy output identical to the baseline,
    and the report's strategy table."""
    raw = yaml.safe_load(SWEEP.read_text())
    raw.update(gammas=[2], max_new_tokens=8, workloads=[jsonl_workload(prompts_file, count=1)])
    out = tmp_path / "res"
    result = invoke("sweep", write_sweep_yaml(tmp_path, raw), "--out", out)
    assert result.exit_code == 0, result.output
    df = load_records(out)
    assert sorted(df["strategy"]) == ["nested", "sequential", "sequential"]  # baseline, sequential, nested
    nested, sequential = (
        df[df.strategy == "nested"].iloc[0],
        df[(df.strategy == "sequential") & (df.gamma == 2)].iloc[0],
    )
    assert nested["prepared"] == 2 and nested["drafter_label"] == "eagle nested(P=2)"
    assert nested["prepared_drafts"] > 0 and 0 <= nested["prepared_hits"] < nested["rounds"]
    assert pd.isna(sequential["prepared_drafts"]) and sequential["drafter_label"] == "eagle"
    assert df["output_sha1"].nunique() == 1, "greedy: every configuration reproduces the target's tokens"

    # the sequential units keep the ids they had before the strategy key existed
    plain = build_spec({k: v for k, v in raw.items() if k != "strategy"})
    assert sequential["unit_id"] in {u.unit_id for u in expand_units(plain, load_workloads(plain))}
    assert build_spec({**raw, "strategy": "sequential"}).spec_hash == plain.spec_hash

    table = strategy_table(df)
    assert list(table["strategy"]) == ["sequential", "nested"] and table["vs_sequential"].notna().sum() == 1
    report = invoke("plot", out, "--out", tmp_path / "report", "--format", "png")
    assert report.exit_code == 0, report.output
    html = (tmp_path / "report" / "index.html").read_text()
    assert "Nested speculation vs sequential" in html and (tmp_path / "report" / "nested_vs_sequential.png").exists()


@pytest.mark.parametrize(
    "strategy,needle",
    [
        ({"name": "nestd"}, "did you mean 'nested'"),
        ({"name": "nested", "prepared": 0}, "'prepared' must be an integer"),
        ({"name": "nested", "depth": 2}, "not ['depth']"),
        (["sequential", None], "got null"),  # before, a null item read as sequential (found by test_yaml_types)
        ([True], "got true"),
    ],
)
def test_bad_strategy_is_a_one_line_error(tmp_path, prompts_file, strategy, needle):
    raw = {**TINY_SWEEP, "workloads": [jsonl_workload(prompts_file, 1)], "strategy": strategy}
    assert_user_error(invoke("sweep", write_sweep_yaml(tmp_path, raw), "--dry-run"), needle)


def test_nested_with_a_drafter_that_cannot_draft_ahead_is_a_one_line_error(tmp_path, prompts_file):
    raw = {**TINY_SWEEP, "workloads": [jsonl_workload(prompts_file, 1)], "strategy": [{"name": "nested"}]}
    assert_user_error(invoke("sweep", write_sweep_yaml(tmp_path, raw), "--dry-run"), "'ngram' cannot")
    raw.update(drafters=[{"type": "draft-model", "params": {"model": "tiny-random-llama-draft"}}], mode="replay")
    assert_user_error(invoke("sweep", write_sweep_yaml(tmp_path, raw), "--dry-run"), "cannot be replayed")

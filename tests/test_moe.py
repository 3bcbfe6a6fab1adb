"""MoE testbed: sparse-upcycled targets equal their dense base, route by token, and report expert traffic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from specbench.engine.decoder import make_decoder
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.errors import SpecbenchError
from specbench.models.moe_upcycle import routing_log, upcycle
from specbench.models.resolve import load_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_pair():
    return load_model("tiny-random-llama"), load_model("tiny-random-llama-moe")


def _logits(loaded, ids: torch.Tensor) -> torch.Tensor:
    decoder = make_decoder(loaded.model)
    decoder.reset(1, ids.shape[1] + 1)
    return decoder.forward(ids).logits


def test_upcycled_tiny_model_equals_its_dense_base_bit_for_bit(tiny_pair):
    dense, moe = tiny_pair
    ids = torch.arange(3, 40)[None]
    assert torch.equal(_logits(dense, ids), _logits(moe, ids))
    with torch.inference_mode():  # transformers' own forward runs the same layers
        assert torch.equal(dense.model(ids).logits, moe.model(ids).logits)
    # the experts are the dense MLP itself: no parameter was copied or added
    assert sum(p.numel() for p in moe.model.parameters()) == sum(p.numel() for p in dense.model.parameters())
    assert moe.weights_sha256 != dense.weights_sha256  # a derived model has its own identity


def test_routing_depends_on_the_tokens_and_is_recorded_per_layer(tiny_pair):
    _, moe = tiny_pair
    log = routing_log(moe.model)
    assert (log.experts, log.top_k) == (8, 2)
    _logits(moe, torch.arange(3, 40)[None])
    assert sorted(log.layers) == [0, 1]
    chosen = log.layers[0][0]  # [T, top_k]
    assert chosen.shape == (37, 2)
    assert len({tuple(sorted(row)) for row in chosen.tolist()}) > 3  # different tokens, different experts
    assert all(2 < n <= 8 for n in log.distinct_per_layer())


def test_upcycling_refuses_impossible_expert_counts():
    model = load_model("tiny-random-llama").model
    with pytest.raises(SpecbenchError, match="top_k"):
        upcycle(model, experts=4, top_k=5, seed=0)


def test_speculation_on_the_moe_target_is_lossless_and_counts_the_experts_it_touches(tiny_pair):
    dense, moe = tiny_pair
    drafter = make_drafter("draft-model", moe, {"model": "tiny-random-llama-draft"})
    prompt = list(range(5, 25))
    base = SpeculativeEngine(moe, None, gamma=0).generate(prompt, 24, stop_at_eos=False)
    assert base.tokens == SpeculativeEngine(dense, None, gamma=0).generate(prompt, 24, stop_at_eos=False).tokens
    spec = SpeculativeEngine(moe, drafter, gamma=4).generate(prompt, 24, stop_at_eos=False)
    assert spec.tokens == base.tokens
    log = routing_log(moe.model)
    # a target-only step verifies one token: exactly top_k experts per layer
    assert base.rounds.experts == [2.0] * len(base.rounds)
    assert base.expert_bytes_per_verify == 2 * 2 * log.expert_bytes  # 2 layers × 2 experts
    # a round verifying n = drafted + 1 tokens touches between top_k and min(E, n·top_k) per layer
    for drafted, experts in zip(spec.rounds.drafted, spec.rounds.experts):
        assert 2 <= experts <= min(8, 2 * (drafted + 1))
    assert spec.experts_per_verify > base.experts_per_verify
    assert spec.expert_bytes_per_token == pytest.approx(sum(spec.rounds.expert_bytes) / spec.decode_tokens)
    dense_result = SpeculativeEngine(dense, None, gamma=0).generate(prompt, 4, stop_at_eos=False)
    assert dense_result.rounds.experts == [] and math.isnan(dense_result.experts_per_verify)


def test_upcycled_smollm2_generates_what_smollm2_generates(smollm2, smollm2_prompt_ids):
    moe = load_model("smollm2-135m-moe")
    ids = smollm2_prompt_ids[2]
    dense_logits, moe_logits = _logits(smollm2, torch.tensor([ids])), _logits(moe, torch.tensor([ids]))
    assert torch.allclose(dense_logits, moe_logits, atol=1e-5)
    dense_out = SpeculativeEngine(smollm2, None, gamma=0).generate(ids, 12, stop_at_eos=False)
    moe_out = SpeculativeEngine(moe, None, gamma=0).generate(ids, 12, stop_at_eos=False)
    assert moe_out.tokens == dense_out.tokens
    assert {k: moe_out.moe[k] for k in ("experts", "top_k", "expert_bytes")} == {
        "experts": 8,
        "top_k": 2,
        "expert_bytes": 3 * 576 * 1536 * 4,
    }
    assert moe_out.moe["step_bytes"] > 30 * moe_out.moe["expert_bytes"]
    layer0 = routing_log(moe.model).layers[0]
    assert layer0.shape[-1] == 2
    # parameters keep the dense model's names and values: drafters trained on SmolLM2 apply to it
    from specbench.engine.drafters.checkpoints.checkpoint import target_fingerprint

    assert target_fingerprint(moe.model)["id"] == target_fingerprint(smollm2.model)["id"]


# ----------------------------------------------------------------------------- the expert-aware cost model


def test_expected_distinct_experts_matches_uniform_routing_by_simulation():
    from specbench.analysis.cost.moe import expected_distinct_experts

    rng = np.random.default_rng(0)
    experts, top_k = 16, 4
    for n in (1, 3, 8):
        chosen = rng.random((2000, n, experts)).argsort(-1)[..., :top_k]  # [trials, n, top_k]: k distinct each
        touched = np.zeros((2000, experts), dtype=bool)
        np.put_along_axis(touched, chosen.reshape(2000, -1), True, axis=1)
        assert float(touched.sum(1).mean()) == pytest.approx(
            float(expected_distinct_experts(n, experts, top_k)), abs=0.1
        )
    assert float(expected_distinct_experts(1, experts, top_k)) == pytest.approx(top_k)
    assert float(expected_distinct_experts(200, experts, top_k)) == pytest.approx(experts)


def test_effective_expert_count_is_recovered_from_concentrated_routing():
    from specbench.analysis.cost.moe import (
        expected_distinct_experts,
        fit_effective_experts,
    )

    n = np.array([1, 2, 3, 5, 8, 8, 13])
    measured = expected_distinct_experts(n, 12.0, 2)  # tokens that keep to 12 of 64 experts
    assert fit_effective_experts(n, measured, 64, 2) == pytest.approx(12.0, abs=0.2)


def test_moe_sweep_records_expert_traffic_and_recommend_prices_it(tmp_path, prompts_file):
    from specbench.analysis.cost.moe import ExpertAwareCosts, is_moe, moe_traffic
    from specbench.analysis.cost.source import MeasuredCosts
    from specbench.analysis.recommendation.recommend import recommend
    from specbench.records.store import load_records
    from tests.cli_helpers import invoke, tiny_sweep_yaml

    out = tmp_path / "res"
    spec = tiny_sweep_yaml(
        tmp_path,
        prompts_file,
        target="tiny-random-llama-moe",
        gammas=[1, 4],
        drafters=[{"type": "draft-model", "params": {"model": "tiny-random-llama-draft"}}],
    )
    result = invoke("sweep", spec, "--out", out)
    assert result.exit_code == 0, result.output
    df = load_records(out)
    assert is_moe(df) and (df["moe_experts"] == 8).all() and (df["moe_top_k"] == 2).all()
    base, spec4 = df[df.gamma == 0], df[df.gamma == 4]
    assert (base["experts_per_verify"] == 2).all()
    assert (spec4["experts_per_verify"] > df[df.gamma == 1]["experts_per_verify"].mean()).all()
    assert (df["round_experts"].apply(len) == df["rounds"]).all()
    # greedy is lossless on the MoE target too
    assert set(df.groupby("prompt_id")["output_sha1"].nunique()) == {1}
    traffic = moe_traffic(df)
    assert 2 <= traffic.effective_experts <= 8 and traffic.extra_bytes(1) == 0

    class PlainMeasured(MeasuredCosts):  # the dense cost model, forced (recommend picks the aware one itself)
        pass

    recs = recommend(df, n_boot=40)
    assert any("expert-aware" in note for rec in recs for note in rec.notes)
    assert recs[0].cost_source == ExpertAwareCosts().describe()
    # the expert reads make every speculative round dearer than the plain measured model says
    plain = recommend(df, n_boot=40, costs=PlainMeasured())
    aware_curve, plain_curve = recs[0].curves, plain[0].curves
    assert (aware_curve["tokens_per_s"].to_numpy() < plain_curve["tokens_per_s"].to_numpy()).all()
    # the report's MoE figure draws from these records (and a dense folder skips it: tests/test_plot.py)
    from specbench.figures.plot import FIGURES, render_figure
    from specbench.figures.plot_data import load_plot_data

    figure = next(spec for spec in FIGURES if spec.name == "moe_experts")
    (tmp_path / "fig").mkdir()
    done = render_figure(figure, load_plot_data(out, n_boot=0), tmp_path / "fig", ("png",))
    assert done.files and done.files["png"].stat().st_size > 1000


# ----------------------------------------------------------------------------- profiles of MoE shapes


def test_dense_twin_has_the_moe_shapes_active_size_and_is_refused_for_dense_targets():
    from specbench.profile.architecture import dense_twin, moe_shape, resolve_architecture
    from specbench.profile.profiler import plan_profile

    moe = resolve_architecture("tiny-random-qwen3-moe")
    assert moe_shape(moe.config) == {"experts": 16, "top_k": 4, "expert_intermediate": 32}
    twin = dense_twin(moe)
    assert twin.config.model_type == "qwen3" and twin.config.intermediate_size == 4 * 32
    assert (twin.config.hidden_size, twin.config.num_hidden_layers, twin.config.head_dim) == (64, 2, 16)
    mixtral = dense_twin(resolve_architecture("tiny-random-mixtral"))
    assert mixtral.config.model_type == "mistral" and mixtral.config.intermediate_size == 2 * 64
    with pytest.raises(SpecbenchError, match="dense-twin"):
        plan_profile("tiny-random-llama", with_dense_twin=True)


def test_profile_times_an_moe_shape_beside_its_dense_twin(tmp_path):
    from specbench.analysis.cost.moe import moe_verify_table
    from specbench.profile.architecture import (
        forward_weight_bytes,
        moe_forward_bytes,
        random_model,
        resolve_architecture,
    )
    from specbench.profile.profiler import ProfileGrid, run_profile

    grid = ProfileGrid(batches=(1,), contexts=(16,), verify_tokens=(1, 4), warmup=0, repeats=1)
    profile = run_profile("tiny-random-mixtral", grid=grid, with_dense_twin=True)
    assert set(profile.frame["role"]) == {"target", "dense_twin"}
    table = moe_verify_table(profile)
    assert list(table["verify_tokens"]) == [1, 4] and (table["dense_ms"] > 0).all()
    assert table["distinct_experts"].iloc[0] == pytest.approx(2)  # one token: its top-2
    assert table["model_ms"].iloc[0] == pytest.approx(table["moe_ms"].iloc[0])
    # bytes a forward streams: a few experts of each layer, not all eight
    arch = resolve_architecture("tiny-random-mixtral")
    model = random_model(arch, device="cpu", dtype="fp32")
    shape = {"experts": 8, "top_k": 2}
    assert moe_forward_bytes(model, shape, 1) < moe_forward_bytes(model, shape, 4) < forward_weight_bytes(model)


@pytest.mark.parametrize("alias", ["tiny-random-qwen3-moe", "tiny-random-mixtral"])
def test_native_decoder_runs_real_moe_blocks_as_transformers_does(alias):
    loaded = load_model(alias)
    ids = torch.arange(5, 30)[None]
    with torch.inference_mode():
        reference = loaded.model(ids).logits
    decoder = make_decoder(loaded.model)
    assert type(decoder).__name__ == "NativeDecoder"
    assert torch.allclose(_logits(loaded, ids), reference, atol=1e-4)


# ----------------------------------------------------------------------------- expert-aware dynamic trees


def test_expert_aware_tree_spec_parses_and_rejects_bad_lambda():
    from specbench.engine.tree import parse_tree

    tree = parse_tree("dynamic:topk=4,nodes=8,lambda=0.5")
    assert tree.expert_cost == 0.5 and "λ=0.5" in tree.describe()
    assert tree.truncated(3).expert_cost == 0.5
    assert parse_tree("dynamic:topk=4,nodes=8").expert_cost == 0.0
    for bad in ("dynamic:lambda=x", "dynamic:lambda=-1", "dynamic:lambda=inf"):
        with pytest.raises(SpecbenchError, match="lambda"):
            parse_tree(bad)


def _random_growth(seed: int, layers: int = 3, experts: int = 8):
    from specbench.engine.drafters.growth import Growth, NodeExperts

    rng = np.random.default_rng(seed)
    growth = Growth()
    for n in range(30):
        parent = -1 if n < 4 else int(rng.integers(0, n))
        base = growth.scores[parent] if parent >= 0 else 0.0
        growth.add(n, parent, base + float(np.log(rng.uniform(0.05, 0.95))), (), None)
    sets = [[set(rng.choice(experts, 2, replace=False).tolist()) for _ in range(layers)] for _ in range(31)]
    return growth, NodeExperts(root=sets[0], nodes=sets[1:])


def test_expert_aware_selection_is_the_plain_one_at_lambda_zero_and_touches_fewer_experts_above():
    from specbench.engine.drafters.growth import select, select_expert_aware
    from specbench.engine.tree import DynamicTree

    def touched(chosen, experts):
        return sum(
            len(set.union(set(experts.root[layer]), *(experts.nodes[n][layer] for n in chosen)))
            for layer in range(len(experts.root))
        )

    fewer = 0
    for seed in range(20):
        growth, experts = _random_growth(seed)
        plain = select(growth, DynamicTree(depth=8, topk=4, nodes=10))
        assert select_expert_aware(growth, 10, 0.0, experts) == plain
        aware = select(growth, DynamicTree(depth=8, topk=4, nodes=10, expert_cost=2.0), experts)
        assert len(aware) == 10
        assert all(growth.parents[n] < 0 or growth.parents[n] in aware for n in aware)  # still a tree
        fewer += touched(aware, experts) < touched(plain, experts)
        assert touched(aware, experts) <= touched(plain, experts)
    assert fewer >= 10


def test_expert_aware_tree_on_the_moe_target_is_lossless(tiny_pair):
    _, moe = tiny_pair
    drafter = make_drafter("draft-model", moe, {"model": "tiny-random-llama-exit1"})
    prompt = list(range(5, 25))
    base = SpeculativeEngine(moe, None, gamma=0).generate(prompt, 24, stop_at_eos=False)
    plain = SpeculativeEngine(moe, drafter, gamma=3, tree="dynamic:topk=3,nodes=4").generate(
        prompt, 24, stop_at_eos=False
    )
    aware = SpeculativeEngine(moe, drafter, gamma=3, tree="dynamic:topk=3,nodes=4,lambda=1").generate(
        prompt, 24, stop_at_eos=False
    )
    assert plain.tokens == base.tokens and aware.tokens == base.tokens
    assert max(aware.rounds.drafted) <= 4
    # the predictor's extra forward (the nodes growth never fed) is a counted draft step
    assert sum(aware.rounds.draft_steps) > sum(plain.rounds.draft_steps)


@pytest.mark.parametrize("kind", ["eagle", "eagle3"])
def test_expert_aware_tree_with_eagle_features_is_lossless(tiny_pair, kind):
    _, moe = tiny_pair
    drafter = make_drafter(kind, moe, {"checkpoint": "random"})
    prompt = list(range(5, 25))
    base = SpeculativeEngine(moe, None, gamma=0).generate(prompt, 16, stop_at_eos=False)
    aware = SpeculativeEngine(moe, drafter, gamma=3, tree="dynamic:topk=3,nodes=4,lambda=1").generate(
        prompt, 16, stop_at_eos=False
    )
    assert aware.tokens == base.tokens
    assert drafter.expert_router is routing_log(moe.model)


def test_expert_aware_tree_refuses_dense_targets_and_foreign_feature_sizes(tiny_pair):
    dense, moe = tiny_pair
    with pytest.raises(SpecbenchError, match="MoE target"):
        SpeculativeEngine(
            dense,
            make_drafter("draft-model", dense, {"model": "tiny-random-llama-draft"}),
            gamma=2,
            tree="dynamic:topk=2,nodes=3,lambda=1",
        )
    with pytest.raises(SpecbenchError, match="hidden size 32"):
        SpeculativeEngine(
            moe,
            make_drafter("draft-model", moe, {"model": "tiny-random-llama-draft"}),
            gamma=2,
            tree="dynamic:topk=2,nodes=3,lambda=1",
        )
    for name, params in (("ngram", {}), ("medusa", {"checkpoint": "random"})):
        with pytest.raises(SpecbenchError, match="cannot predict"):
            SpeculativeEngine(moe, make_drafter(name, moe, params), gamma=2, tree="dynamic:topk=2,nodes=3,lambda=1")


def _bench_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "bench_strategy_moe.py"
    spec = importlib.util.spec_from_file_location("bench_strategy_moe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_strategies_moe_sweep_runs_tiny_end_to_end_with_greedy_identity(tmp_path):
    """sweeps/strategies-moe.yaml on the tiny MoE (plain vs expert-aware dynamic tree), through the bench script."""
    from specbench.records.store import load_records

    bench = _bench_script()
    out = tmp_path / "res"
    drafters = '[{"type": "draft-model", "params": {"model": "tiny-random-llama-exit1"}}]'
    args = bench.parse_args(
        [
            "--target",
            "tiny-random-llama-moe",
            "--drafters",
            drafters,
            "--prompts",
            "1",
            "--max-new-tokens",
            "12",
            "--out",
            str(out),
        ]
    )
    text = bench.run(args)
    records = load_records(out)
    assert set(records["tree"]) == {"chain", "dynamic:topk=4,nodes=8", "dynamic:topk=4,nodes=8,lambda=0.5"}
    assert bench.greedy_identical(records)
    assert "identical to target-only in every configuration: True" in text
    assert "lambda=0.5" in text and "experts/verify" in text
    spec = records[records["gamma"] > 0]
    assert (spec["experts_per_verify"] >= 2).all() and (spec["drafted"] <= 8 * spec["rounds"]).all()

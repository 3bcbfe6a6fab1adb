"""Cost profiles: the grid runs, the fit is monotone, recommend follows the profile, bad input exits 2.

CPU tests use tiny architectures and one torch thread (on a shared, busy CPU a second thread makes
every operator wait for it). CUDA tests (`pytest -m cuda`, run by scripts/gpu_check.sh) check the
engine and a profile on the GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from specbench.analysis.acceptance_model import expected_tokens
from specbench.analysis.cost.profile import fit_profile, markdown_summary, what_if
from specbench.analysis.cost.round_cost import round_s
from specbench.analysis.recommendation.profiled import workload_context
from specbench.analysis.recommendation.recommend import ProfiledCosts, recommend
from specbench.analysis.recommendation.result import ranges
from specbench.bounds import int_list
from specbench.cli import app
from specbench.errors import SpecbenchError
from specbench.profile.profiler import ProfileGrid, run_profile
from specbench.profile.timing import peak_bandwidth
from specbench.records.profile_file import COLUMNS, PROFILE_KIND, Profile, load_profile, summary_frame, write_profile
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame, write_results

DRAFT = "qwen2.5-coder-0.5b"  # the synthetic sweep's drafter model (SyntheticDrafter's default params)
SMALL = {
    "model_type": "llama",
    "vocab_size": 1024,
    "hidden_size": 128,
    "intermediate_size": 384,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": False,
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _one_line_error(result, *needles) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specbench: error:"), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# ----------------------------------------------------------------------------- measuring


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A real CPU profile of a small architecture from a local config.json, plus a model and an n-gram drafter."""
    folder = tmp_path_factory.mktemp("arch")
    (folder / "config.json").write_text(json.dumps(SMALL))
    grid = ProfileGrid(batches=(1, 2, 8), contexts=(16, 96), verify_tokens=(1, 2, 3, 4, 6, 8), warmup=2, repeats=5)
    profile = run_profile(str(folder), ["tiny-random-llama-draft", "ngram"], device="cpu", grid=grid)
    return profile, folder


def test_profile_grid_runs_and_records_everything(measured, tmp_path):
    profile, folder = measured
    frame = profile.frame
    verify = frame[frame["measure"] == "verify"]
    assert len(verify) == 3 * 2 * 6 and set(verify["tokens"]) == {1, 2, 3, 4, 6, 8}
    assert len(frame[frame["measure"] == "draft_step"]) == 6 and len(frame[frame["measure"] == "propose"]) == 6
    assert (frame["median_s"] > 0).all() and (frame["iqr_s"] >= 0).all() and (frame["repeats"] == 5).all()
    assert frame["times_s"].map(len).eq(5).all()
    assert (frame["q1_s"] <= frame["median_s"]).all() and (frame["median_s"] <= frame["q3_s"]).all()
    assert (frame["memory_bytes"] > 0).all() and set(frame["memory_kind"]) == {"cpu_max_rss"}
    info = profile.info
    assert info["kind"] == PROFILE_KIND and info["target"]["source"].endswith("config.json")
    # weights streamed per forward: everything but the (untied) input embedding table
    n = SMALL
    layer = (
        2 * n["hidden_size"] * n["hidden_size"]
        + 2 * n["hidden_size"] * 64
        + 3 * n["hidden_size"] * n["intermediate_size"]
        + 2 * n["hidden_size"]
    )
    expected = 4 * (n["num_hidden_layers"] * layer + n["hidden_size"] + n["vocab_size"] * n["hidden_size"])
    assert info["target"]["weight_bytes"] == expected
    assert (verify["weight_bytes"] == expected).all()
    kv = 2 * 3 * 2 * 32 * 4  # 2 · layers · kv_heads · head_dim · bytes
    row = verify.iloc[-1]
    assert row["kv_bytes"] == kv * row["batch"] * (row["context"] + row["tokens"])
    assert np.isclose(row["effective_gb_s"], (row["weight_bytes"] + row["kv_bytes"]) / row["median_s"] / 1e9)
    assert info["bandwidth"]["measured_read_gb_s"] > 0 and info["bandwidth"]["peak_gb_s"] > 0
    assert [d["name"] for d in info["drafters"]] == ["tiny-random-llama-draft", "ngram"]
    back = load_profile(write_profile(tmp_path / "p", profile))
    assert list(back.frame.columns) == list(COLUMNS) and len(back.frame) == len(frame)
    assert back.info == json.loads(json.dumps(profile.info))


def test_fit_of_measured_profile_is_monotone_and_tracks_the_data(measured):
    cost = fit_profile(measured[0], "tiny-random-llama-draft")
    ks = np.arange(1, 17)
    grid = np.array([[cost.verify_s(ks, b, c) for b in range(1, 17)] for c in (16, 50, 96, 200)])  # [c, b, k]
    assert (np.diff(grid, axis=2) >= -1e-15).all(), "t_verify falls with k"
    assert (np.diff(grid, axis=1) >= -1e-15).all(), "t_verify falls with the batch size"
    assert (np.diff(grid, axis=0) >= -1e-15).all(), "t_verify falls with the context"
    verify = measured[0].rows(measure="verify")
    fitted = np.array([float(cost.verify_s(r.tokens, r.batch, r.context)) for r in verify.itertuples()])
    # the fit smooths the medians (a shared CPU is noisy: the tight check is on a synthetic profile below)
    rel = np.abs(fitted / verify["median_s"].to_numpy() - 1)
    assert np.median(rel) < 0.5
    steps = [cost.step_s(b, 16) for b in (1, 2, 4, 8, 16)]
    assert (np.diff(steps) >= 0).all() and cost.draft_s(0, 1, 16) == 0
    assert np.isclose(cost.draft_s(3, 2, 16), 3 * cost.step_s(2, 16))
    ngram = fit_profile(measured[0], "ngram")
    assert ngram.model_free and np.isclose(ngram.draft_s(5, 2, 16), ngram.step_s(2, 16))


def test_what_if_picks_the_best_gamma_of_a_constant_acceptance(measured):
    cost = fit_profile(measured[0], "tiny-random-llama-draft")
    table = what_if(cost, [0.3, 0.9], [1, 8], context=16, max_gamma=8)
    assert list(table.columns) == ["alpha", "batch", "gamma", "speedup", "speedup_gamma_1", "speedup_gamma_4"]
    assert len(table) == 4 and table["gamma"].between(0, 8).all()
    for row in table.itertuples():  # the chosen γ is the argmax of the predicted speedup curve
        seconds = np.asarray(round_s(cost, np.arange(9), batch=row.batch, context=16), dtype=float)
        curve = expected_tokens(row.alpha, np.arange(9)) * seconds[0] / seconds
        assert row.gamma == int(np.argmax(curve)) and np.isclose(row.speedup, curve.max())
    by_alpha = table.set_index(["batch", "alpha"])["speedup"]
    assert (by_alpha.xs(0.9, level="alpha") >= by_alpha.xs(0.3, level="alpha")).all()  # more acceptance never loses


def test_markdown_summary_and_gpu_check_summary(measured, tmp_path):
    profile, _ = measured
    text = markdown_summary(profile)
    assert text.startswith(f"### {profile.target}") and "Fitted verify model" in text
    assert text.count("\n| ") >= len(summary_frame(profile))  # one table row per (model, batch, context)
    out, work = tmp_path / "out", tmp_path / "work"
    work.mkdir()
    write_profile(out / "profile-1b", profile)
    (work / "cuda-tests.out").write_text("3 passed\n")
    steps = tmp_path / "steps.tsv"
    steps.write_text("cuda-tests\tok\t12\nprofile-8b\ttimed out after 100s\t100\n")
    script = Path(__file__).resolve().parent.parent / "scripts" / "gpu_check_summary.py"
    result = subprocess.run(
        [
            sys.executable,
            str(script),
            "--out",
            str(out),
            "--work",
            str(work),
            "--steps",
            str(steps),
            "--elapsed",
            "112",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    summary = (out / "summary.md").read_text()
    assert "| cuda-tests | ok | 12 |" in summary and "| profile-8b | timed out after 100s | 100 |" in summary
    assert "3 passed" in summary and "profile-8b: not measured" in summary
    assert f"### {profile.target}" in summary and "What γ a constant acceptance" in summary


def test_cli_profile_writes_a_profile(tmp_path):
    out = tmp_path / "prof"
    result = _invoke(
        "profile",
        "--target",
        "tiny-random-llama",
        "--drafter",
        "ngram",
        "--batch",
        "1,2",
        "--context",
        "8",
        "--verify-tokens",
        "1..3",
        "--repeats",
        "2",
        "--warmup",
        "1",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "Cost profile" in result.stdout and "verify" in result.stdout and "propose" in result.stdout
    profile = load_profile(out)
    assert len(profile.rows(measure="verify")) == 6 and profile.drafters == ["ngram"]
    again = _invoke("profile", "--target", "tiny-random-llama", "--out", out)
    _one_line_error(again, "already holds")


def test_cli_profile_bad_inputs_exit_2(tmp_path):
    out = tmp_path / "x"
    _one_line_error(_invoke("profile", "--target", "no-such-model", "--out", out), "unknown architecture")
    _one_line_error(_invoke("profile", "--target", "tiny-random-lama", "--out", out), "did you mean")
    _one_line_error(
        _invoke("profile", "--target", "tiny-random-llama", "--drafter", "nope", "--out", out),
        "unknown architecture 'nope'",
    )
    _one_line_error(_invoke("profile", "--target", "tiny-random-llama", "--batch", "0,4", "--out", out), "--batch")
    _one_line_error(
        _invoke("profile", "--target", "tiny-random-llama", "--verify-tokens", "4..1", "--out", out), "--verify-tokens"
    )
    _one_line_error(_invoke("profile", "--target", "tiny-random-llama", "--context", "x", "--out", out), "--context")
    # tiny-random-v8 has 512 positions: a cache of 510 plus 4 new tokens does not fit
    _one_line_error(
        _invoke("profile", "--target", "tiny-random-v8", "--context", "510", "--verify-tokens", "1..4", "--out", out),
        "512",
    )
    _one_line_error(_invoke("profile", "--target", "tiny-random-llama", "--dtype", "int3", "--out", out), "dtype")
    bad = tmp_path / "bad.json"
    bad.write_text('{"hidden_size": 8}')
    _one_line_error(_invoke("profile", "--target", bad, "--out", out), "model_type")
    assert not out.exists()


def test_parse_int_list_and_peak_table():
    assert int_list("1..4,8, 16", "verify_tokens", "--verify-tokens") == (1, 2, 3, 4, 8, 16)
    with pytest.raises(SpecbenchError, match="--batch"):
        int_list("0", "batch", "--batch")
    with pytest.raises(SpecbenchError, match="from 1 to 4096"):  # checked at its ends, never expanded
        int_list("1..1000000000", "batch", "--batch")
    assert peak_bandwidth("NVIDIA H100 80GB HBM3", None)[0] == 3350
    assert peak_bandwidth("NVIDIA H100 PCIe", None)[0] == 2000
    assert peak_bandwidth("NVIDIA H200", None)[0] == 4800
    assert peak_bandwidth("NVIDIA A100-SXM4-40GB", None)[0] == 1555
    assert peak_bandwidth("NVIDIA A100-SXM4-80GB", None)[0] == 2039
    assert peak_bandwidth("NVIDIA A100 80GB PCIe", None)[0] == 1935
    assert peak_bandwidth("NVIDIA A10", None)[0] == 600 and peak_bandwidth("NVIDIA L4", None)[0] == 300
    assert peak_bandwidth("NVIDIA GeForce RTX 4090", None)[0] == 1008
    assert peak_bandwidth("Some CPU", 12.5) == (12.5, "measured: torch sum over a large tensor, best of 5")


# ----------------------------------------------------------------------------- synthetic profiles


def synthetic_profile(
    verify,
    draft,
    *,
    batches=(1, 4, 16, 64),
    contexts=(256, 1024),
    ks=tuple(range(1, 17)),
    drafter=DRAFT,
    noise=0.0,
    seed=0,
) -> Profile:
    """A profile with known times: verify(k, b, c) and draft(b, c) seconds (× log-normal noise)."""
    rng = np.random.default_rng(seed)
    rows = []

    def row(role, model, measure, b, c, k, t):
        times = t * np.exp(noise * rng.standard_normal(5))
        q1, med, q3 = np.percentile(times, [25, 50, 75])
        rows.append(
            {
                "role": role,
                "model": model,
                "measure": measure,
                "batch": b,
                "context": c,
                "tokens": k,
                "repeats": 5,
                "median_s": med,
                "q1_s": q1,
                "q3_s": q3,
                "iqr_s": q3 - q1,
                "min_s": times.min(),
                "mean_s": times.mean(),
                "times_s": list(times),
                "weight_bytes": 10**9,
                "kv_bytes": 0,
                "weight_gb_s": 1e9 / med / 1e9,
                "effective_gb_s": 1e9 / med / 1e9,
                "peak_fraction": np.nan,
                "memory_bytes": 1,
                "memory_kind": "cuda_max_allocated",
                "device_name": "NVIDIA H100 80GB HBM3",
                "dtype": "bf16",
            }
        )

    for b in batches:
        for c in contexts:
            for k in ks:
                row("target", "synthetic-target", "verify", b, c, k, verify(k, b, c))
            row("drafter", drafter, "draft_step", b, c, 1, draft(b, c))
    info = {
        "kind": PROFILE_KIND,
        "schema_version": 1,
        "target": {"name": "synthetic-target"},
        "drafters": [{"name": drafter, "model_free": False}],
        "device": {"device_name": "NVIDIA H100 80GB HBM3"},
        "dtype": "bf16",
        "grid": {"batches": list(batches), "contexts": list(contexts), "tokens": list(ks), "repeats": 5, "warmup": 0},
    }
    return Profile(frame=pd.DataFrame(rows, columns=list(COLUMNS)), info=info)


def test_fit_recovers_a_knee_and_interpolates_in_log_space():
    # GPU-like: flat while weight streaming dominates, then compute-bound beyond 4·64/b tokens
    def verify(k, b, c):
        return 0.010 + 0.00002 * k * b + 0.0004 * max(0.0, k * b - 256) / 16

    cost = fit_profile(synthetic_profile(verify, lambda b, c: 0.001, batches=(16, 64), contexts=(512,)))
    fit = cost.verify_fits[1][0]  # batch 64: knee at k = 4
    assert fit.kind == "knee" and fit.knee == 4
    assert np.allclose(cost.verify_s(np.arange(1, 17), 64, 512), [verify(k, 64, 512) for k in range(1, 17)], rtol=1e-6)
    between = cost.verify_s(8, 32, 512)  # geometric mean of the neighbours at 16 and 64
    assert np.isclose(between, np.sqrt(cost.verify_s(8, 16, 512) * cost.verify_s(8, 64, 512)))
    assert cost.verify_s(8, 4, 512) == cost.verify_s(8, 16, 512)  # below the grid: the smallest batch's time
    assert any("below the profiled batch sizes" in n for n in cost.notes)
    slope = np.log(cost.verify_s(16, 256, 512) / cost.verify_s(16, 64, 512)) / np.log(4)
    assert 0 <= slope <= 1 and any("extrapolated" in n for n in cost.notes)


def test_fit_is_monotone_even_when_noise_inverts_cells():
    # batch 4 measured faster than batch 1 (noise), context 1024 faster than 256 at batch 16
    def verify(k, b, c):
        base = {1: 0.010, 4: 0.009, 16: 0.012, 64: 0.020}[b] * (0.95 if (b == 16 and c == 1024) else 1.0)
        return base + 0.0003 * k * (b**0.5)

    profile = synthetic_profile(verify, lambda b, c: 0.001, noise=0.02)
    cost = fit_profile(profile)
    tables = np.array(
        [[cost.verify_s(np.arange(1, 20), b, c) for b in range(1, 100)] for c in (100, 256, 600, 1024, 4096)]
    )  # [c, b, k]
    for axis in range(3):
        assert (np.diff(tables, axis=axis) >= -1e-15).all()
    assert cost.verify_s(4, 4, 256) >= cost.verify_s(4, 1, 256)
    assert cost.verify_s(4, 16, 1024) >= cost.verify_s(4, 16, 256)
    # within noise: where the data are ordered the fit follows them (2 % timing noise → within 6 %)
    verify_rows = profile.rows(measure="verify")
    ordered = verify_rows[~verify_rows["batch"].isin([1, 4]) & ~(verify_rows["batch"] == 16)]
    fitted = np.array([float(cost.verify_s(r.tokens, r.batch, r.context)) for r in ordered.itertuples()])
    assert np.allclose(fitted, ordered["median_s"], rtol=0.06)
    # an inversion is averaged (geometric mean), not propagated from the slower cell
    pooled = float(cost.verify_s(1, 1, 256))
    assert np.isclose(pooled, float(cost.verify_s(1, 4, 256)))
    assert verify(1, 4, 256) * 0.97 < pooled < verify(1, 1, 256) * 1.03


def test_profiled_cost_is_a_cost_model():
    from specbench.analysis.cost.round_cost import CostModel

    cost = fit_profile(synthetic_profile(lambda k, b, c: 0.01 + 0.001 * k, lambda b, c: 0.002))
    assert isinstance(cost, CostModel)
    gammas = np.arange(0, 5)
    expected = np.array([0.011] + [0.002 * g + 0.01 + 0.001 * (g + 1) for g in gammas[1:]])
    assert np.allclose(round_s(cost, gammas, batch=4, context=512), expected)
    assert ranges(np.array([4, 4, 3, 0, 0])) == [[1, 2, 4], [3, 3, 3], [4, 5, 0]]


# ----------------------------------------------------------------------------- recommend --cost-profile


@pytest.fixture(scope="module")
def sweep_list():
    return make_records([SyntheticDrafter(alpha=0.8, gammas=(1, 2, 4))], n_prompts=12, seed=4)


@pytest.fixture(scope="module")
def sweep_records(sweep_list):
    return records_frame(sweep_list)


def _gamma_at(rec, batch) -> int:
    return int(rec.per_batch.table.set_index("batch").loc[batch, "gamma"])


def test_steep_verification_means_small_gamma_or_none(sweep_records):
    steep = synthetic_profile(lambda k, b, c: 0.001 + 0.010 * k, lambda b, c: 0.001)
    rec = recommend(sweep_records, ProfiledCosts(steep, batches=[1]), n_boot=200)[0]
    assert _gamma_at(rec, 1) <= 1
    assert rec.per_batch.vllm is None or rec.per_batch.vllm["config"]["num_speculative_tokens"] <= 1
    flat = synthetic_profile(lambda k, b, c: 0.010 + 0.00001 * k, lambda b, c: 0.0001)
    rec = recommend(sweep_records, ProfiledCosts(flat, batches=[1]), n_boot=200)[0]
    assert _gamma_at(rec, 1) >= 8 and rec.per_batch.table["speedup"].iloc[0] > 2
    assert rec.per_batch.vllm["config"]["num_speculative_tokens"] == _gamma_at(rec, 1)
    assert rec.per_batch.context == workload_context(sweep_records[sweep_records["gamma"] > 0])


def test_gamma_shrinks_with_batch_size_and_exports_vllm_ranges(sweep_records):
    # memory-bound at small batch (flat in k), compute-bound at large batch (time ∝ b·k)
    def verify(k, b, c):
        return 0.010 + 0.00005 * c / 1024 * b + 0.0003 * k * b

    profile = synthetic_profile(verify, lambda b, c: 0.0005 + 0.00001 * b)
    rec = recommend(sweep_records, ProfiledCosts(profile, batches=[1, 8, 64]), n_boot=200)[0]
    chosen = [_gamma_at(rec, b) for b in (1, 8, 64)]
    assert chosen[0] >= 3 and chosen[0] >= chosen[1] >= chosen[2] and chosen[2] <= 1
    plan = rec.per_batch.plans[0]
    assert (np.diff(plan.chosen) <= 0).all()  # never more speculation at a larger batch here
    schedule = rec.per_batch.vllm["config"]["num_speculative_tokens_per_batch_size"]
    assert schedule[0][0] == 1 and schedule[-1][1] == 64
    assert all(a[1] + 1 == b[0] for a, b in zip(schedule, schedule[1:]))
    assert rec.per_batch.vllm["config"]["num_speculative_tokens"] == max(k for _, _, k in schedule) == chosen[0]
    vllm = rec.per_batch.vllm
    assert vllm["config"]["method"] == "draft_model" and "--speculative-config" in vllm["snippet"]
    # a predicted speedup at batch b is its expected tokens × target-only round ÷ speculative round
    b, g = 8, chosen[1]
    cost = fit_profile(profile, DRAFT)
    t = (
        plan.tokens[g]
        * float(round_s(cost, 0, batch=b, context=rec.per_batch.context))
        / float(round_s(cost, g, propose_rate=plan.propose_rate, batch=b, context=rec.per_batch.context))
    )
    assert np.isclose(plan.speedup[b - 1, g], t)


def test_cli_recommend_with_cost_profile(tmp_path, sweep_list):
    results = write_results(tmp_path / "res", sweep_list)
    flat = write_profile(
        tmp_path / "flat", synthetic_profile(lambda k, b, c: 0.010 + 0.00001 * k * b, lambda b, c: 0.0001)
    )
    result = _invoke("recommend", results, "--cost-profile", flat, "--batch", "1,8,32", "--bootstrap", "100", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)[0]
    assert [c["batch"] for c in data["per_batch"]["choices"]] == [1, 8, 32]
    assert data["per_batch"]["vllm"]["config"]["num_speculative_tokens_per_batch_size"][-1][1] == 32
    assert (
        data["cost_source"] == "synthetic-target on NVIDIA H100 80GB HBM3 (bf16)"
        and data["supporting"]["measured"] is None
    )
    measured = json.loads(_invoke("recommend", results, "--bootstrap", "40", "--json").stdout)[0]
    assert set(measured) == set(data) and measured["per_batch"] is None  # one JSON form for both cost sources
    table = _invoke("recommend", results, "--cost-profile", flat, "--batch", "1,8", "--bootstrap", "50")
    assert table.exit_code == 0 and "num_speculative_tokens_per_batch_size" in table.stdout
    _one_line_error(_invoke("recommend", results, "--cost-profile", results), "not a cost profile")
    _one_line_error(_invoke("recommend", results, "--cost-profile", tmp_path / "none"), "not found")
    _one_line_error(_invoke("recommend", results, "--cost-profile", flat, "--batch", "0"), "--batch")
    _one_line_error(_invoke("recommend", results, "--batch", "4"), "--cost-profile")
    _one_line_error(_invoke("recommend", results, "--cost-profile", flat, "--objective", "latency"), "latency")


# ----------------------------------------------------------------------------- CUDA

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_check.sh)")


@pytest.mark.cuda
@needs_cuda
def test_cuda_greedy_is_lossless_with_tiny_models():
    from specbench.engine.drafters import make_drafter
    from specbench.engine.loop import SpeculativeEngine
    from specbench.models.resolve import load_model

    target = load_model("tiny-random-llama", device="cuda")
    drafters = {
        "ngram": make_drafter("ngram", target),
        "draft-model": make_drafter("draft-model", target, {"model": "tiny-random-llama-draft"}, device="cuda"),
    }
    prompts = [list(b"def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)  # ") * 2, list(b"the cat sat " * 6)]
    base = SpeculativeEngine(target, None, gamma=0)
    for ids in prompts:
        reference = base.generate(ids, 48, stop_at_eos=False).tokens
        for name, drafter in drafters.items():
            for gamma in (1, 4):
                result = SpeculativeEngine(target, drafter, gamma=gamma).generate(ids, 48, stop_at_eos=False)
                assert result.tokens == reference, (name, gamma)


@pytest.mark.cuda
@needs_cuda
def test_cuda_profile_smoke(tmp_path):
    grid = ProfileGrid(batches=(1, 4), contexts=(32, 128), verify_tokens=(1, 2, 4, 8), warmup=2, repeats=5)
    profile = run_profile(
        "tiny-random-llama", ["tiny-random-llama-draft", "ngram"], device="cuda", dtype="bf16", grid=grid
    )
    frame = profile.frame
    assert set(frame["memory_kind"]) == {"cuda_max_allocated"} and (frame["memory_bytes"] > 0).all()
    assert profile.info["device"]["device_name"] == torch.cuda.get_device_name(0)
    assert profile.info["bandwidth"]["peak_gb_s"] > 0 and (frame["median_s"] > 0).all()
    cost = fit_profile(load_profile(write_profile(tmp_path / "p", profile)), "tiny-random-llama-draft")
    table = np.array([cost.verify_s(np.arange(1, 9), b, 64) for b in (1, 2, 4)])
    assert (np.diff(table, axis=0) >= 0).all() and (np.diff(table, axis=1) >= 0).all()

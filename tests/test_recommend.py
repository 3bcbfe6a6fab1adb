"""recommend: known optima, no speculation, degenerate data, engine settings, and both CLI commands."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from specbench.analysis.acceptance_model import expected_tokens
from specbench.analysis.recommendation.recommend import MeasuredCosts, recommend, recommendation_dict, to_json
from specbench.analysis.settings.engine_settings import engine_settings, sglang_token_limit, tree_paths
from specbench.errors import SpecbenchError
from specbench.models.resolve import hub_ids
from specbench.records.summary import configuration_table, is_baseline
from tests.synthetic_results import (
    SyntheticCosts,
    SyntheticDrafter,
    make_records,
    records_frame,
    write_results,
    write_synthetic_results,
)

# A verify cost with a knee (flat up to 4 tokens, steep after, as on a GPU turning compute-bound)
# makes the optimum sharp: with α = 0.8 and a 1 ms draft step the true speedups for γ = 1..6 are
# 1.70, 2.19, 2.52, 1.96, 1.64, 1.41 — γ = 3 wins by 15 %.
KNEE = SyntheticCosts(verify_a_s=0.02, verify_b_s=0.0002, knee=4, verify_b2_s=0.01, noise=0.05)


def _true_speedup(alpha: float, gamma: int, step: float, costs: SyntheticCosts) -> float:
    round_time = step * gamma + costs.verify(gamma + 1) + costs.overhead_s
    return expected_tokens(alpha, gamma) / round_time * (costs.verify(1) + costs.overhead_s)


def test_known_optimum_is_picked_by_both_paths():
    assert max(range(1, 9), key=lambda g: _true_speedup(0.8, g, 0.001, KNEE)) == 3
    rec = recommend(
        records_frame(
            make_records(
                [SyntheticDrafter(alpha=0.8, gammas=(1, 2, 3, 4, 6, 8), draft_step_s=0.001)],
                costs=KNEE,
                n_prompts=12,
                seed=1,
            )
        ),
        n_boot=300,
    )[0]
    assert rec.final is not None and rec.final.gamma == 3
    assert rec.measured.gamma_lo <= 3 <= rec.measured.gamma_hi
    assert rec.model.choice.gamma == 3 and rec.model.gamma_lo <= 3 <= rec.model.gamma_hi
    assert rec.final.lo > 1 and rec.final.lo <= _true_speedup(0.8, 3, 0.001, KNEE) <= rec.final.hi * 1.02
    assert rec.verdict.startswith("speculate")
    assert rec.settings["vllm"].config["num_speculative_tokens"] == 3
    assert rec.costs["verify_model"].iloc[0] == "knee"


def test_unmeasured_optimum_found_by_the_model():
    rec = recommend(
        records_frame(
            make_records(
                [SyntheticDrafter(alpha=0.8, gammas=(1, 2, 4, 6, 8), draft_step_s=0.001)],
                costs=KNEE,
                n_prompts=12,
                seed=2,
            )
        ),
        n_boot=300,
    )[0]
    assert rec.final.gamma in (2, 4)  # the best the sweep measured
    assert rec.model.choice.gamma == 3 and not rec.model.choice.measured
    assert "the unmeasured" in rec.verdict and "not a recommendation" in rec.verdict
    curve = rec.curves
    assert set(curve["gamma"]) == set(range(1, 17)) and curve["measured"].sum() == 5
    assert (curve["paper_factor"] > curve["speedup"]).all()  # the paper ignores the verify cost's growth


def test_too_expensive_drafter_means_no_speculation():
    rec = recommend(
        records_frame(
            make_records([SyntheticDrafter(alpha=0.6, gammas=(1, 2, 4), draft_step_s=0.03)], n_prompts=12, seed=3)
        ),
        n_boot=300,
    )[0]
    assert rec.final is None and rec.settings and all(s.target_only for s in rec.settings.values())
    assert rec.verdict.startswith("no speculation") and "lies above 1" in rec.verdict
    assert rec.model.choice is None and rec.model.best.speedup < 1
    assert rec.measured.best.hi < 1


def test_measured_speedups_equal_configuration_table():
    records = records_frame(
        make_records(
            [
                SyntheticDrafter(alpha=0.7, gammas=(1, 3)),
                SyntheticDrafter(
                    name="ngram",
                    params={"n_min": 1, "n_max": 3},
                    model_free=True,
                    draft_fixed_s=5e-4,
                    no_match_rate=0.3,
                    gammas=(2,),
                ),
            ],
            n_prompts=6,
            seed=4,
        )
    )
    rec = recommend(records, n_boot=50)[0]
    table = configuration_table(records)
    table = table[table["gamma"] > 0]
    for _, row in table.iterrows():
        options = rec.options
        option = options[(options["drafter_label"] == row["drafter_label"]) & (options["gamma"] == row["gamma"])]
        assert option["speedup"].iloc[0] == pytest.approx(row["speedup"], rel=1e-12)
        assert option["lo"].iloc[0] <= row["speedup"] <= option["hi"].iloc[0]


def test_measured_costs_are_the_default_cost_source():
    records = records_frame(make_records([SyntheticDrafter(alpha=0.7, gammas=(1, 3))], n_prompts=4, seed=4))
    default = recommend(records, n_boot=40)[0]
    explicit = recommend(records, MeasuredCosts(), n_boot=40)[0]
    assert recommendation_dict(default) == recommendation_dict(explicit)
    assert default.cost_source == "the sweep's own timings (batch 1)" and default.per_batch is None


def test_latency_objective_counts_prefill():
    records = records_frame(
        make_records(
            [SyntheticDrafter(alpha=0.8, gammas=(2, 4))],
            costs=SyntheticCosts(prefill_s=0.5),
            n_prompts=8,
            seed=5,
            max_new_tokens=32,
        )
    )
    throughput = recommend(records, n_boot=50)[0]
    latency = recommend(records, objective="latency", n_boot=50)[0]
    assert latency.max_new_tokens == 32
    for gamma in (2, 4):
        t = throughput.options[throughput.options["gamma"] == gamma].iloc[0]
        lat = latency.options[latency.options["gamma"] == gamma].iloc[0]
        spec = records[records["gamma"] == gamma]
        base = records[is_baseline(records)]
        request = spec["prefill_s"].mean() + 31 * spec["decode_s"].sum() / spec["decode_tokens"].sum()
        base_request = base["prefill_s"].mean() + 31 * base["decode_s"].sum() / base["decode_tokens"].sum()
        assert lat["speedup"] == pytest.approx(base_request / request)
        assert 1 < lat["speedup"] < t["speedup"]  # a 0.5 s prefill dilutes the decode gain


def test_one_recommendation_per_workload():
    code = make_records([SyntheticDrafter(alpha=0.9, gammas=(2, 4))], n_prompts=6, seed=14, workload="humaneval")
    chat = make_records(
        [SyntheticDrafter(alpha=0.3, gammas=(2, 4), draft_step_s=0.008)], n_prompts=6, seed=15, workload="sharegpt"
    )
    orphan = make_records(
        [SyntheticDrafter(alpha=0.5, gammas=(2,))], n_prompts=3, seed=16, workload="mt-bench", baseline=False
    )
    recs = recommend(records_frame(code + chat + orphan), n_boot=100)
    assert [r.keys["workload"] for r in recs] == ["humaneval", "sharegpt"]
    assert recs[0].final is not None and recs[1].final is None  # easy code speculates, hard chat does not
    assert all(any("skipped mt-bench" in n for n in r.notes) for r in recs)


def test_timing_outliers_are_reported():
    records = records_frame(make_records([SyntheticDrafter(alpha=0.7, gammas=(2,))], n_prompts=6, seed=17))
    assert not [n for n in recommend(records, n_boot=40)[0].notes if "outlier" in n]
    first_base = records.index[is_baseline(records)][0]
    records.loc[first_base, "decode_s"] *= 40  # a warm-up stuck in the first baseline unit
    notes = [n for n in recommend(records, n_boot=40)[0].notes if "outlier" in n]
    assert len(notes) == 1 and "timing outliers in the baseline: 1 unit(s)" in notes[0]


# ----------------------------------------------------------------------------- degenerate data


def _all_finite(rec, measured_interval: bool = True) -> None:
    data = recommendation_dict(rec)
    for pick in ("measured", "model"):
        best = data["supporting"][pick]["best"]
        keys = ("speedup", "lo", "hi") if measured_interval or pick == "model" else ("speedup",)
        assert best is not None and all(math.isfinite(best[k]) for k in keys)
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN anywhere


def test_everything_accepted_picks_the_longest_draft():
    rec = recommend(
        records_frame(
            make_records(
                [SyntheticDrafter(alpha=1.0, gammas=(2, 4, 8), draft_step_s=2e-4)],
                n_prompts=6,
                seed=6,
                max_new_tokens=96,
            )
        ),
        n_boot=100,
        max_gamma=12,
    )[0]
    _all_finite(rec)
    assert rec.final.gamma == 8 and rec.model.choice.gamma == 12  # the optimum sits at the largest γ allowed


def test_nothing_accepted_means_no_speculation():
    rec = recommend(
        records_frame(make_records([SyntheticDrafter(alpha=0.0, gammas=(1, 2))], n_prompts=6, seed=7)), n_boot=100
    )[0]
    _all_finite(rec)
    assert rec.final is None and rec.model.choice is None


def test_single_gamma_and_single_prompt():
    one_gamma = recommend(
        records_frame(make_records([SyntheticDrafter(alpha=0.8, gammas=(3,))], n_prompts=8, seed=8)), n_boot=100
    )[0]
    _all_finite(one_gamma)
    assert one_gamma.final.gamma == 3
    one_prompt = recommend(
        records_frame(make_records([SyntheticDrafter(alpha=0.8, gammas=(2, 4))], n_prompts=1, seed=9)), n_boot=100
    )[0]
    _all_finite(one_prompt, measured_interval=False)  # one prompt: too few to tell, no interval printed
    assert one_prompt.final is None and "too few prompts to tell (P = 1)" in one_prompt.verdict
    assert one_prompt.measured.best.speedup > 1  # the point estimate is still shown
    assert any("one prompt" in n for n in one_prompt.notes)


def test_bad_inputs_are_user_errors():
    records = records_frame(make_records([SyntheticDrafter(gammas=(2,))], n_prompts=2, seed=10))
    with pytest.raises(SpecbenchError, match="baseline"):
        recommend(records[~is_baseline(records)])
    with pytest.raises(SpecbenchError, match="objective"):
        recommend(records, objective="cost")
    with pytest.raises(SpecbenchError, match="max-gamma"):
        recommend(records, max_gamma=0)
    with pytest.raises(SpecbenchError, match="no speculative"):
        recommend(records[is_baseline(records)])


# ----------------------------------------------------------------------------- engine settings


def test_engine_settings_for_each_drafter():
    ngram = engine_settings(
        "ngram", '{"n_max": 4, "n_min": 2}', "chain", 5, target="qwen2.5-coder-1.5b", hub_ids=hub_ids()
    )
    assert ngram["vllm"].config == {
        "method": "ngram",
        "num_speculative_tokens": 5,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 4,
    }
    assert "Qwen/Qwen2.5-Coder-1.5B-Instruct" in ngram["vllm"].snippet  # alias → hub id
    sglang_ngram = ngram["sglang"].config
    assert sglang_ngram["--speculative-algorithm"] == "NGRAM" and sglang_ngram["--speculative-num-draft-tokens"] == 6
    assert not any("match-window" in flag for flag in sglang_ngram)  # removed from SGLang: parsing would fail
    assert sglang_ngram["--speculative-ngram-max-bfs-breadth"] == 1  # a chain, as measured
    assert any("n_min=2, n_max=4 are not expressible" in note for note in ngram["sglang"].notes)
    assert ngram["transformers"].config == {"prompt_lookup_num_tokens": 5, "max_matching_ngram_size": 4}
    assert "vLLM 0.32.0" in ngram["vllm"].checked and "SGLang" in ngram["sglang"].checked

    draft = engine_settings("draft-model", {"model": "qwen2.5-coder-0.5b"}, "chain", 3, hub_ids=hub_ids())
    assert draft["vllm"].config == {
        "method": "draft_model",
        "model": "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "num_speculative_tokens": 3,
    }
    assert draft["sglang"].config["--speculative-algorithm"] == "STANDALONE"
    assert draft["sglang"].config["--speculative-num-draft-tokens"] == 4
    hf = draft["transformers"]
    assert hf.config["num_assistant_tokens"] == 3 and hf.config["assistant_confidence_threshold"] == 0.0
    # transformers reads γ and the threshold from the assistant's generation_config: the snippet sets them there
    assert "assistant.generation_config.assistant_confidence_threshold = 0.0" in hf.snippet
    assert "assistant.generation_config.num_assistant_tokens = 3" in hf.snippet
    assert "AutoModelForCausalLM.from_pretrained('Qwen/Qwen2.5-Coder-0.5B-Instruct')" in hf.snippet

    # vLLM 0.32 has no tree speculation: never a removed key, said to be not expressible
    eagle_tree = engine_settings("eagle", {"model": "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"}, "2x2", 2)
    assert not eagle_tree["vllm"].supported and "speculative_token_tree" not in eagle_tree["vllm"].config
    assert eagle_tree["vllm"].config["num_speculative_tokens"] == 2
    assert any("not expressible on vLLM" in note for note in eagle_tree["vllm"].notes)
    assert eagle_tree["sglang"].config["--speculative-eagle-topk"] == 2
    assert eagle_tree["sglang"].config["--speculative-num-draft-tokens"] == 7  # 6 nodes + root ≤ 1 + 2 + 1·4
    assert not eagle_tree["transformers"].supported

    # a 3x2x1 tree at γ = 2 is cut to depth 2 (3 + 6 nodes), within SGLang's 1 + topk + (steps − 1)·topk²
    cut = engine_settings("eagle", {"model": "m"}, "3x2x1", 2)["sglang"].config
    assert (cut["--speculative-num-steps"], cut["--speculative-eagle-topk"], cut["--speculative-num-draft-tokens"]) == (
        2,
        3,
        10,
    )
    assert (
        tree_paths("3x2x1", 2) == [p for p in tree_paths("3x2x1") if len(p) <= 2] and len(tree_paths("3x2x1", 2)) == 9
    )
    for tree, gamma in (("3x2x1", 2), ("3x2x1", 3), ("4x4x4", 3), ("[[0], [1], [2], [3], [0, 0]]", 1)):
        flags = engine_settings("eagle3", {"model": "m"}, tree, gamma)["sglang"].config
        topk, steps = flags["--speculative-eagle-topk"], flags["--speculative-num-steps"]
        assert steps <= gamma and flags["--speculative-num-draft-tokens"] <= sglang_token_limit(topk, steps)
    assert engine_settings("eagle", {"model": "m"}, "4x4x4", 3)["sglang"].config["--speculative-num-draft-tokens"] == 37

    assert not engine_settings("medusa", {}, "chain", 2)["sglang"].supported
    assert not engine_settings("draft-model", {"model": "x"}, "3x1", 2)["vllm"].supported
    assert tree_paths("[[0], [0, 0], [1]]") == [(0,), (0, 0), (1,)] and tree_paths("dynamic-k4") is None


# ----------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def results_folder(tmp_path_factory):
    drafters = [
        SyntheticDrafter(alpha=0.8, gammas=(1, 2, 4), draft_step_s=0.001),
        SyntheticDrafter(
            name="ngram",
            params={"n_min": 1, "n_max": 3},
            model_free=True,
            draft_fixed_s=3e-4,
            no_match_rate=0.2,
            alpha=0.85,
            decay=0.85,
            gammas=(2, 4),
        ),
    ]
    return write_synthetic_results(tmp_path_factory.mktemp("results") / "sweep", drafters, n_prompts=10, seed=11)


def _invoke(*args):
    from specbench.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_fit_tables_and_json(results_folder):
    result = _invoke("fit", results_folder, "--bootstrap", "100")
    assert result.exit_code == 0, result.output
    for title in ("Acceptance", "Per-position", "Goodness of fit", "Costs"):
        assert title in result.output
    data = json.loads(_invoke("fit", results_folder, "--json", "--by", "category", "--bootstrap", "50").stdout)
    assert set(data) == {
        "acceptance",
        "positions",
        "goodness_of_fit",
        "costs",
        "acceptance_by_context_bin",
        "online_windows",
        "online_recovery",
    }
    assert data["online_windows"] == data["online_recovery"] == []  # no online configuration in this sweep
    assert {row["category"] for row in data["acceptance"]} >= {"writing", "coding"}
    ngram = [r for r in data["costs"] if r["drafter"] == "ngram"][0]
    assert ngram["model_free"] and 0.7 < ngram["propose_rate"] < 0.9


def test_cli_recommend_tables_and_json(results_folder):
    result = _invoke("recommend", results_folder, "--bootstrap", "100", "--engine", "vllm")
    assert result.exit_code == 0, result.output
    assert "speculate" in result.output and "vllm settings" in result.output and "sglang settings" not in result.output
    data = json.loads(
        _invoke(
            "recommend", results_folder, "--json", "--bootstrap", "50", "--objective", "latency", "--max-gamma", "6"
        ).stdout
    )
    assert len(data) == 1 and data[0]["objective"] == "latency"
    assert data[0]["recommended"]["gamma"] in (1, 2, 4)
    decision = data[0]["decision"]
    if decision is not None:  # the JSON recommends what the decision (and the table's ★) recommends
        best = decision["best"]
        assert (decision["answer"] == "confident yes") == (data[0]["recommended"] is not None)
        if data[0]["recommended"] is not None:
            assert (data[0]["recommended"]["drafter_label"], data[0]["recommended"]["gamma"]) == (
                best["drafter_label"],
                best["gamma"],
            )
    assert set(data[0]["engine_settings"]) == {"vllm", "sglang", "transformers", "llamacpp"}
    assert max(p["gamma"] for p in data[0]["predictions"]) == 6


def test_cli_help_has_examples():
    for command in ("fit", "recommend"):
        result = _invoke(command, "--help")
        assert result.exit_code == 0 and "Examples" in result.output
        assert f"specbench {command} results/" in result.output


def test_cli_bad_input_exit_2(tmp_path, results_folder):
    missing = _invoke("recommend", tmp_path / "nope")
    assert missing.exit_code == 2 and "not found" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    assert _invoke("fit", tmp_path / "nope").exit_code == 2
    plain = tmp_path / "plain"
    plain.mkdir()
    result = _invoke("fit", plain)
    assert result.exit_code == 2 and "not a results folder" in result.stderr
    empty = write_results(tmp_path / "empty", [])
    result = _invoke("recommend", empty)
    assert result.exit_code == 2 and "no records" in result.stderr
    records = make_records([SyntheticDrafter(gammas=(2,))], n_prompts=2, seed=12, baseline=False)
    result = _invoke("recommend", write_results(tmp_path / "nobase", records))
    assert result.exit_code == 2 and "baseline" in result.stderr
    assert _invoke("fit", results_folder, "--by", "categroy").exit_code == 2
    assert _invoke("recommend", results_folder, "--engine", "tgi").exit_code == 2
    assert _invoke("recommend", results_folder, "--objective", "cost").exit_code == 2


def test_cli_fit_without_baseline_reports_acceptance(tmp_path):
    records = make_records([SyntheticDrafter(gammas=(2,))], n_prompts=3, seed=13, baseline=False)
    folder = write_results(tmp_path / "nobase", records)
    result = _invoke("fit", folder, "--bootstrap", "40")
    assert result.exit_code == 0, result.output
    assert "Acceptance" in result.output and "Costs" in result.output
    data = json.loads(_invoke("fit", folder, "--json", "--bootstrap", "40").stdout)
    assert data["acceptance"][0]["alpha"] > 0 and "costs not fitted" in data["costs"][0]["cost_notes"]


def test_to_json_is_strict(results_folder):
    from specbench.analysis.fit import load_results

    text = to_json(recommend(load_results(results_folder), n_boot=40))
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert np.isfinite(json.loads(text)[0]["baseline_tokens_per_s"])


def test_one_configuration_to_read_and_the_paths_as_supporting_detail(results_folder):
    """The printed recommendation names one configuration (the verdict's) and how flat the optimum is; each path's
    own best is supporting detail under it, never starred or worded as a recommendation."""
    from specbench.cli import app

    data = json.loads(_invoke("recommend", results_folder, "--json", "--bootstrap", "50").stdout)[0]
    recommended = data["recommended"]
    assert "measured" not in data and set(data["supporting"]) == {"measured", "model"}
    text = (
        CliRunner().invoke(app, ["recommend", str(results_folder), "--bootstrap", "50"], env={"COLUMNS": "250"}).stdout
    )
    assert text.count("recommended: ") == 1
    table = text[text.index("Supporting detail") : text.index("Measured configurations")]
    rows = [line for line in table.splitlines() if line.startswith(("│ measured", "│ model", "│ verdict"))]
    assert len(rows) >= 2, table
    starred = [row for row in rows if "★" in row]
    if recommended is None:
        assert not starred and data["flat_range"] is None, table
    else:
        wanted = f"{recommended['drafter_label']} γ={recommended['gamma']}"
        assert f"recommended: {wanted} at " in text
        assert [row for row in rows if row.startswith("│ verdict")] == starred and f"{wanted} ★" in starred[0], table
        assert recommended["gamma"] in data["flat_range"]["gammas"] and "how flat: " in text

"""Verify-length schedules (`specbench.engine.strategies.schedule`): each decision rule, the sweep axis, losslessness."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.engine.strategies.schedule import (
    DSpark,
    Heuristic,
    RoundVerdict,
    RunningLine,
    ScheduleSpec,
    make_schedule,
    parse_schedule,
)
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.units import Unit
from specbench.workloads.catalog import Prompt, Workload


def verdict(drafted, accepted, confidences=None, draft_s=0.0, verify_s=0.0, round_s=0.0):
    return RoundVerdict(drafted, accepted, accepted + 1, confidences, draft_s, verify_s, round_s)


# ----------------------------------------------------------------------------- decision rules


def test_fixed_drafts_the_cap_without_asking():
    schedule = make_schedule(ScheduleSpec(), 5)
    schedule.observe(verdict(5, 0))
    assert schedule.round_gamma() == 5 and schedule.keep_drafting is None


def test_heuristic_matches_transformers_update_rule():
    """Our n against transformers' own `update_candidate_strategy` run on the same verdicts."""
    from transformers.generation.candidate_generator import AssistedCandidateGenerator

    cap, rng = 6, random.Random(0)
    ours = Heuristic(cap)
    theirs = SimpleNamespace(
        num_assistant_tokens=cap,
        assistant_generation_config=SimpleNamespace(
            num_assistant_tokens_schedule="heuristic", assistant_confidence_threshold=None
        ),
    )
    ours.start()
    for _ in range(200):
        drafted = min(ours.round_gamma(), int(theirs.num_assistant_tokens))  # transformers cuts n at its limit too
        accepted = drafted if rng.random() < 0.4 else rng.randrange(drafted + 1)
        scores = torch.zeros(1, drafted + 1, 4)  # the target's scores over the candidates and the bonus
        AssistedCandidateGenerator.update_candidate_strategy(theirs, None, scores, accepted)
        ours.observe(verdict(drafted, accepted))
        assert ours.length == theirs.num_assistant_tokens
        assert 1 <= ours.round_gamma() <= cap
    ours.start()
    assert ours.round_gamma() == cap  # restarts at γ with each generation


def test_threshold_stops_after_the_first_unsure_token():
    keep = make_schedule(parse_schedule({"name": "threshold", "threshold": 0.4}), 6).keep_drafting
    assert keep([0.9, 0.5]) and keep([0.1, 0.4])  # only the last token counts, 0.4 is not below 0.4
    assert not keep([0.9, 0.39])


def test_running_line_fits_and_falls_back_to_proportional():
    line = RunningLine()
    assert line.slope() == 0.0
    line.add(4, 2.0)
    line.add(4, 2.4)
    assert line.slope() == pytest.approx(2.2 / 4)  # one length measured: cost ∝ tokens
    for x in (1, 2, 7):
        line.add(x, 1.0 + 0.05 * x)
    line.add(4, 1.2)
    points = [(4, 2.0), (4, 2.4), (1, 1.05), (2, 1.1), (7, 1.35), (4, 1.2)]
    xs, ys = zip(*points)
    mx, my = sum(xs) / 6, sum(ys) / 6
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    assert line.slope() == pytest.approx(slope)


def test_dspark_drafts_while_gain_pays_cost():
    """By hand: draft line 0.01 s/token, verify line 0.02 s/token, 0.1 s per emitted token, κ = 1."""
    schedule = DSpark(6, warmup=2, calibrate=0)
    assert schedule.keep_drafting([0.01])  # warm-up: γ whatever the confidence
    for drafted, accepted in ((2, 1), (4, 1)):
        schedule.observe(
            verdict(
                drafted,
                accepted,
                [0.5] * drafted,
                draft_s=0.01 * drafted,
                verify_s=0.05 + 0.02 * (drafted + 1),
                round_s=0.1 * (accepted + 1),
            )
        )
    assert schedule.marginal_cost() == pytest.approx(0.03)
    assert schedule.seconds_per_token == pytest.approx(0.1)
    # continue iff P_{i+1} · 0.1 ≥ 0.03, P_{i+1} = Π c_j · c_i (the forecast of the next confidence)
    assert schedule.keep_drafting([0.6])  # 0.36 · 0.1 = 0.036
    assert not schedule.keep_drafting([0.5])  # 0.25 · 0.1 = 0.025
    assert not schedule.keep_drafting([0.9, 0.5])  # 0.225 · 0.1
    assert schedule.keep_drafting([0.9, 0.9, 0.8])  # 0.518 · 0.1


def test_dspark_calibrates_confidence_to_observed_acceptance():
    schedule = DSpark(6, warmup=0)
    # confidences 0.5 everywhere, but every tested draft accepted but the last: κ > 1
    schedule.observe(verdict(4, 3, [0.5] * 4, draft_s=0.04, verify_s=0.1, round_s=0.4))
    assert schedule.kappa == pytest.approx((1 + 3) / (1 + 0.5 * 4))
    schedule.observe(verdict(4, 0, [0.9] * 4, draft_s=0.04, verify_s=0.1, round_s=0.1))
    assert schedule.kappa == pytest.approx((1 + 3) / (1 + 2.0 + 0.9))  # a first-position miss tests one draft


@pytest.mark.parametrize(
    "item, needle",
    [
        ("dspak", "did you mean 'dspark'"),
        ({"name": "threshold"}, "needs threshold"),
        ({"name": "threshold", "threshold": 1.5}, "(0, 1]"),
        ({"name": "heuristic", "x": 1}, "takes no parameters"),
        ({"name": "dspark", "warmup": "two"}, "must be a number"),
        (["fixed"], "a name or"),
    ],
)
def test_bad_schedule_entries(item, needle):
    with pytest.raises(SpecbenchError, match=None) as error:
        parse_schedule(item)
    assert needle in str(error.value) and "\n" not in str(error.value)


def test_one_schedule_one_identity():
    assert parse_schedule({"name": "dspark", "warmup": 2}) == parse_schedule("dspark")
    assert parse_schedule({"name": "threshold", "threshold": 0.4}).label == "threshold(threshold=0.4)"


# ----------------------------------------------------------------------------- the sweep axis

RAW = {
    "name": "ids",
    "target": "tiny-random-llama",
    "max_new_tokens": 16,
    "workloads": ["mt-bench"],
    "drafters": [{"type": "ngram"}, {"type": "draft-model", "params": {"model": "tiny-random-llama-draft"}}],
    "gammas": [2, 4],
}


def test_fixed_schedule_keeps_existing_hashes_and_unit_ids():
    """Values computed by main before schedules existed: a sweep without the key is unchanged."""
    for raw in (RAW, {**RAW, "schedules": ["fixed"]}):
        spec = build_spec(raw)
        assert spec.spec_hash == "9607a30db8fadb42"
        workload = Workload("mt-bench", "", "", True, 16, [])
        prompt = Prompt("mt-bench", "mt-bench/81", "writing", ("hi",))
        assert [Unit(c, workload, prompt, 1, 0, 16, 0).unit_id for c in spec.configs] == [
            "ff39a851ed96d49072bd",
            "2f51df9ffa57ba5be383",
            "7667fc14d4ba98cf8016",
            "a1172c2f7a99af955a6b",
            "d369c730a8beb23e64e3",
        ]


def test_schedules_axis_crosses_the_grid_and_enters_the_hash():
    spec = build_spec({**RAW, "drafters": RAW["drafters"][1:], "schedules": ["fixed", "heuristic", "dspark"]})
    assert spec.spec_hash != "9607a30db8fadb42"
    speculative = [c for c in spec.configs if not c.is_baseline]
    assert len(speculative) == 2 * 3 and {c.schedule.label for c in speculative} == {"fixed", "heuristic", "dspark"}
    workload = Workload("mt-bench", "", "", True, 16, [])
    prompt = Prompt("mt-bench", "mt-bench/81", "writing", ("hi",))
    assert len({Unit(c, workload, prompt, 1, 0, 16, 0).unit_id for c in spec.configs}) == len(spec.configs)


@pytest.mark.parametrize(
    "overrides, needle",
    [
        ({"schedules": ["dspark"]}, "drafter 'ngram' does not have"),
        ({"schedules": [{"name": "threshold", "threshold": 0.5}]}, "drafter 'ngram' does not have"),
        ({"schedules": ["heuristic"], "trees": ["2x2"]}, "add 'chain'"),
        ({"schedules": ["heuristic"], "mode": "replay"}, "own engine, live"),
        ({"schedules": ["heuristic"], "backend": "vllm"}, "own engine, live"),
        ({"schedules": []}, "at least one"),
    ],
)
def test_sweep_refuses_schedules_that_cannot_run(overrides, needle):
    with pytest.raises(SpecbenchError) as error:
        build_spec({**RAW, **overrides})
    assert needle in str(error.value)


def test_trees_beside_a_schedule_run_the_fixed_schedule():
    spec = build_spec(
        {**RAW, "drafters": RAW["drafters"][1:], "schedules": ["fixed", "heuristic"], "trees": ["chain", "2x2"]}
    )
    trees = {(c.tree, c.schedule.label) for c in spec.configs if not c.is_baseline}
    assert ("2x2", "fixed") in trees and ("chain", "heuristic") in trees and ("2x2", "heuristic") not in trees


def test_heuristic_runs_with_model_free_drafters():
    assert build_spec({**RAW, "drafters": RAW["drafters"][:1], "schedules": ["heuristic"]}).configs


# ----------------------------------------------------------------------------- the engine

SCHEDULES = ["fixed", "heuristic", {"name": "threshold", "threshold": 0.5}, {"name": "dspark", "warmup": 1}]


@pytest.fixture(scope="module")
def tiny_pair():
    from specbench.models.resolve import load_model

    target = load_model("tiny-random-llama")
    return target, make_drafter("draft-model", target, {"model": "tiny-random-llama-draft"})


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: parse_schedule(s).name)
def test_every_schedule_is_greedy_lossless_and_stops_the_drafter(tiny_pair, schedule):
    target, drafter = tiny_pair
    base = SpeculativeEngine(target, None, gamma=0)
    engine = SpeculativeEngine(target, drafter, gamma=4, schedule=parse_schedule(schedule))
    drafted = []
    for prompt in ([1, 5, 9, 2, 7], [3, 3, 8, 1], [10, 11, 12, 13, 14, 15]):
        reference = base.generate(prompt, 40, stop_at_eos=False).tokens
        result = engine.generate(prompt, 40, stop_at_eos=False)
        assert result.tokens == reference
        rounds = result.rounds
        assert all(0 <= d <= 4 for d in rounds.drafted)
        # a chain of d tokens costs d drafter forwards: a cut stops the drafter's loop, nothing is thrown away
        assert rounds.draft_steps == rounds.drafted
        emitted_before = [1 + sum(rounds.emitted[:r]) for r in range(len(rounds))]
        # the rounds the length limit (40 tokens) did not cut below γ = 4
        drafted += [d for d, before in zip(rounds.drafted, emitted_before) if 40 - before - 1 >= 4]
    if schedule == "fixed":
        assert set(drafted) == {4}
    else:
        assert min(drafted) < 4, "the schedule never chose a shorter draft: the test would not see it work"


def test_schedules_refuse_what_they_cannot_cut(tiny_pair):
    target, drafter = tiny_pair
    with pytest.raises(SpecbenchError, match="needs a chain"):
        SpeculativeEngine(target, drafter, gamma=2, tree="2x2", schedule=parse_schedule("heuristic"))
    with pytest.raises(SpecbenchError, match="confidence"):
        SpeculativeEngine(target, make_drafter("ngram", target), gamma=2, schedule=parse_schedule("dspark"))
    SpeculativeEngine(target, make_drafter("ngram", target), gamma=2, schedule=parse_schedule("heuristic"))


def test_threshold_schedule_keeps_the_sampling_distribution(tiny_v8):
    """Cutting chains by the drafter's confidence must not bias speculative sampling (same exact
    chi-square check as tests/test_engine_sampling.py; its broken-verifier test shows the power)."""
    from tests.test_engine_sampling import sampled_pvalues

    target, _ = tiny_v8
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"})
    engine = SpeculativeEngine(
        target,
        drafter,
        gamma=2,
        sampling=SamplingParams(temperature=1.0),
        schedule=parse_schedule({"name": "threshold", "threshold": 0.3}),
    )
    cut = engine.generate([3, 1, 4, 1, 5], 60, seed=1, stop_at_eos=False).rounds.drafted[:-1]
    assert 1 in cut and 2 in cut, "the threshold must cut some chains and not others"
    p23, p4, alpha = sampled_pvalues(engine, target.model, 500)  # few samples: a gross bias only, kept fast
    assert 0.05 < alpha < 0.95
    assert p23 > 1e-3 and p4 > 1e-3


# ----------------------------------------------------------------------------- the shipped sweep, end to end


def test_strategies_schedule_sweep_runs_tiny_and_is_greedy_lossless(tmp_path, prompts_file):
    """sweeps/strategies-schedule.yaml on SmolLM2 + EAGLE, cut to one γ, one prompt and a few tokens."""
    from pathlib import Path

    from specbench.records.store import load_records
    from specbench.safe_files import load_yaml_file
    from tests.cli_helpers import invoke, jsonl_workload, write_sweep_yaml

    shipped = load_yaml_file(Path(__file__).resolve().parents[1] / "sweeps" / "strategies-schedule.yaml", "sweep")
    assert {parse_schedule(s).name for s in shipped["schedules"]} == {"fixed", "heuristic", "threshold", "dspark"}
    path = write_sweep_yaml(
        tmp_path,
        shipped,
        gammas=[4],
        max_new_tokens=12,
        ignore_eos=True,
        workloads=[jsonl_workload(prompts_file, count=1)],
        timing={"warmup_s": 0, "order": "once", "retries": 0},
    )
    out = tmp_path / "res"
    result = invoke("sweep", path, "--out", out)
    assert result.exit_code == 0, result.output
    df = load_records(out)
    assert set(df["schedule"]) == {"fixed", "heuristic", "threshold(threshold=0.4)", "dspark"}
    base = df[df["gamma"] == 0].iloc[0]
    for _, row in df[df["gamma"] > 0].iterrows():
        assert row["output_ids"].tolist() == base["output_ids"].tolist(), row["schedule"]  # greedy: identical
        assert max(row["round_drafted"]) <= 4 and sum(row["round_drafted"]) == row["drafted"]
    assert (df[df["schedule"] == "fixed"]["schedule_params"] == "{}").all()


# ----------------------------------------------------------------------------- analysis


def _with_dynamic(speed: float, n_prompts: int = 12) -> list[dict]:
    """Synthetic fixed-γ records plus a 'dspark' copy of the γ = 4 configuration ``speed`` × as fast,
    with its own per-prompt noise."""
    import numpy as np

    from tests.synthetic_results import SyntheticDrafter, make_records

    records = make_records([SyntheticDrafter(alpha=0.7, gammas=(1, 2, 4, 6))], n_prompts=n_prompts)
    rng = np.random.default_rng(1)
    dynamic = [
        {
            **r,
            "schedule": "dspark",
            "schedule_params": "{}",
            "unit_id": r["unit_id"] + "-d",
            "decode_s": r["decode_s"] / speed * float(np.exp(rng.normal(0, 0.02))),
        }
        for r in records
        if r["gamma"] == 4
    ]
    fixed = [{**r, "schedule": "fixed", "schedule_params": "{}"} for r in records]
    return fixed + dynamic


@pytest.mark.parametrize("speed, answer", [(1.3, "yes"), (0.7, "no")])
def test_recommend_says_whether_a_dynamic_schedule_beats_the_best_fixed_gamma(speed, answer):
    from specbench.analysis.recommendation.recommend import recommend
    from specbench.analysis.recommendation.result import recommendation_dict
    from tests.synthetic_results import records_frame

    rec = recommend(records_frame(_with_dynamic(speed)), n_boot=40)[0]
    verdict = rec.schedules
    assert verdict["answer"] == answer and verdict["dynamic_schedule"] == "dspark"
    assert verdict["lo"] <= verdict["ratio"] <= verdict["hi"]
    assert (verdict["lo"] > 1) if answer == "yes" else (verdict["hi"] < 1)
    assert recommendation_dict(rec)["schedules"]["answer"] == answer
    options = rec.options
    assert set(options["schedule"]) == {"fixed", "dspark"}
    # the acceptance × cost model only describes fixed γ: it predicts fixed options, never the schedule's
    assert (rec.curves["drafter_label"].notna()).all() and len(rec.curves) > 0
    if answer == "yes":
        assert rec.final is not None and rec.final.schedule == "dspark" and "schedule dspark" in rec.verdict


def test_no_schedule_comparison_without_dynamic_schedules():
    from specbench.analysis.recommendation.recommend import recommend
    from tests.synthetic_results import SyntheticDrafter, make_records, records_frame

    rec = recommend(records_frame(make_records([SyntheticDrafter(gammas=(2, 4))], n_prompts=4)), n_boot=40)[0]
    assert rec.schedules is None


def test_plot_draws_the_schedule_figure_and_tables_show_the_schedule(tmp_path):
    from specbench.figures.plot import FIGURES, figures_for, render_figure
    from specbench.figures.plot_data import load_plot_data
    from specbench.figures.report_sections.acceptance import acceptance_section
    from specbench.figures.report_sections.lossless import lossless_section
    from specbench.figures.report_sections.recommendation import recommendation_section
    from tests.synthetic_results import write_results

    records = _with_dynamic(1.3, n_prompts=6)
    folder = write_results(tmp_path / "res", records)
    data = load_plot_data(folder, n_boot=0)
    specs = figures_for(data)
    assert [s.name for s in specs] == [s.name for s in FIGURES] + ["schedules"]
    figure = render_figure(specs[-1], data, tmp_path, ("png",))
    assert figure.skipped is None and figure.files["png"].stat().st_size > 10_000
    assert "dynamic schedule yes" in recommendation_section(data)
    assert "schedule dspark" in acceptance_section(data) and "schedule dspark" in lossless_section(data)
    plain = load_plot_data(
        write_results(tmp_path / "plain", [r for r in records if r["schedule"] == "fixed"]), n_boot=0
    )
    assert [s.name for s in figures_for(plain)] == [s.name for s in FIGURES]  # no schedules: not drawn, not skipped

"""Recommendations that prove themselves (`specbench confirm`): held and missed on synthetic truth, cliffs at a
schedule's thresholds, the fresh draw, the contenders, and a confirmation killed halfway that resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.recommendation.confirm_compare import threshold_at, threshold_loads
from specbench.analysis.recommendation.confirm_report import load_report
from specbench.analysis.recommendation.confirm_targets import (
    BASELINE,
    CONTENDER,
    RECOMMENDED,
    Arm,
    Outcome,
    Prediction,
    Target,
)
from specbench.analysis.recommendation.confirmation import STATIC, judge
from specbench.analysis.recommendation.recommend import recommend
from specbench.analysis.statistics.sequential import LookPlan
from specbench.analysis.verdicts.verdict import NO, YES
from specbench.backends.vllm.config import speculative_config
from specbench.engine.strategies.schedule import ScheduleSpec, batch_size_schedule, make_schedule
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig
from specbench.measure.run.confirm import ConfirmSettings, draw_fresh, fresh_prompts, plan_confirmation
from specbench.records.store import load_records, load_run_info
from specbench.workloads.catalog import load_workload
from specbench.workloads.prompt import Prompt
from tests.cli_helpers import assert_user_error, invoke
from tests.confirm_helpers import decided_results
from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records, records_frame

DRAFTER = SyntheticDrafter(alpha=0.8, gammas=(2, 4), alpha_spread=0.15)
COSTS = SyntheticCosts(noise=0.08)


def _arms(decision) -> tuple[Arm, Arm]:
    best = decision.best
    base = Arm("target only", BASELINE)
    chosen = Arm(best.describe(), RECOMMENDED, best.drafter, "{}", best.drafter_label, best.tree, best.gamma)
    return base, chosen


def _fresh_records(drafter: SyntheticDrafter, n: int, seed: int) -> pd.DataFrame:
    """The same synthetic truth measured on other prompts (another seed, other ids)."""
    frame = records_frame(make_records([drafter], n_prompts=n, seed=seed, costs=COSTS))
    return frame.assign(prompt_id="fresh-" + frame["prompt_id"])


def test_held_when_the_prediction_is_right():
    sweep = records_frame(make_records([DRAFTER], n_prompts=16, seed=0, costs=COSTS))
    (rec,) = recommend(sweep, n_boot=0)
    assert rec.decision.answer == YES
    prediction = Prediction.of(rec.decision)
    target = Target("mt-bench", 1, prediction, _arms(rec.decision))
    result = judge(_fresh_records(DRAFTER, 24, seed=7), target, LookPlan((8, 16, 24)))
    assert result.check.outcome == Outcome.HELD, result.check.reason
    realized = result.check.realized
    assert realized.lo > 1 and realized.hi >= prediction.lo and realized.lo <= prediction.hi


def test_missed_when_the_sweep_picked_on_a_lucky_subset():
    """The sweep kept the 8 prompts (of 48) where the drafter was accepted most: its confident yes promises a
    speedup the workload does not give, and fresh prompts say so."""
    spread = SyntheticDrafter(alpha=0.55, gammas=(2, 4), alpha_spread=0.3)
    whole = records_frame(make_records([spread], n_prompts=48, seed=3, costs=COSTS))
    by_prompt = whole[whole["gamma"] == 4].groupby("prompt_id")["alpha"].mean().sort_values()
    lucky = whole[whole["prompt_id"].isin(by_prompt.index[-8:])]
    (rec,) = recommend(lucky, n_boot=0)
    assert rec.decision.answer == YES, rec.decision.text  # the lucky subset convinced the sweep
    prediction = Prediction.of(rec.decision)
    target = Target("mt-bench", 1, prediction, _arms(rec.decision))
    result = judge(_fresh_records(spread, 24, seed=11), target, LookPlan((8, 16, 24)))
    assert result.check.outcome == Outcome.MISSED, result.check.reason
    assert result.check.realized.hi < prediction.lo  # slower than predicted: the winner's curse, caught


def test_a_no_that_holds_is_held_and_a_no_that_would_have_paid_is_missed():
    slow = SyntheticDrafter(alpha=0.5, gammas=(2, 4), draft_step_s=0.02)
    (rec,) = recommend(records_frame(make_records([slow], n_prompts=16, seed=4, costs=COSTS)), n_boot=0)
    assert rec.decision.answer == NO
    target = Target("mt-bench", 1, Prediction.of(rec.decision), _arms(rec.decision))
    assert judge(_fresh_records(slow, 16, 5), target).check.outcome == Outcome.HELD
    fast = SyntheticDrafter(alpha=0.95, gammas=(2, 4))  # the traffic changed: now it would pay
    missed = judge(_fresh_records(fast, 16, 5), target).check
    assert missed.outcome == Outcome.MISSED and "pays on fresh prompts" in missed.reason


def test_regret_names_a_contender_that_beats_the_recommendation():
    good, better = SyntheticDrafter(alpha=0.8, gammas=(1,)), SyntheticDrafter(alpha=0.8, gammas=(4,))
    frame = records_frame(make_records([SyntheticDrafter(alpha=0.8, gammas=(1, 4))], n_prompts=16, seed=2, costs=COSTS))
    arms = (
        Arm("target only", BASELINE),
        Arm("d γ=1", RECOMMENDED, drafter_label=good.label, gamma=1),
        Arm("d γ=4", CONTENDER, drafter_label=better.label, gamma=4),
    )
    result = judge(frame, Target("mt-bench", 1, None, arms))
    assert result.regret.answer == YES and result.regret.best == "d γ=4" and result.regret.percent > 0
    assert "beats it" in result.regret.text


# ----------------------------------------------------------------------------- loads and cliffs

RANGES = ((1, 1, 4), (2, 3, 2), (4, 8, 0))


def _serving_records(load: int, system: dict[str, float], n: int = 12, seed: int = 0) -> pd.DataFrame:
    """One batch per arm at ``load``: per-request tokens and latencies, the batch's wall time set so the arm's
    system tokens/s is ``system[arm]`` × the baseline's (each request's latency scaled alike)."""
    rng = np.random.default_rng([seed, load])
    tokens = rng.integers(40, 120, n).astype(float)
    base_latency = tokens * 0.05 * np.exp(0.2 * rng.standard_normal(n))
    rows = []
    for name, (label, gamma, schedule) in {
        "target only": ("none", 0, "fixed"),
        "schedule": ("d", 4, "batch"),
        "static": ("d", 2, "fixed"),
    }.items():
        speed = system[name]
        latency = base_latency / speed * np.exp(0.03 * rng.standard_normal(n))
        wall = float(np.sum(base_latency)) / load / speed
        for p in range(n):
            rows.append(
                {
                    "workload": "w",
                    "prompt_id": f"p{p}",
                    "turn": 1,
                    "repeat": 0,
                    "mode": "live",
                    "drafter": "none" if gamma == 0 else "d",
                    "drafter_label": label,
                    "tree": "chain",
                    "gamma": gamma,
                    "schedule": schedule,
                    "temperature": 0.0,
                    "concurrency": load,
                    "decode_tokens": tokens[p],
                    "decode_s": latency[p],
                    "new_tokens": tokens[p] + 1,
                    "latency_s": latency[p],
                    "batch_id": f"{name}-{load}",
                    "batch_output_tokens": float(tokens.sum() + n),
                    "batch_wall_s": wall,
                    "timing_ok": True,
                    "output_sha1": f"o{p}",
                }
            )
    return pd.DataFrame(rows)


def _load_target(load: int) -> Target:
    arms = (
        Arm("target only", BASELINE),
        Arm("schedule", RECOMMENDED, drafter_label="d", gamma=4, schedule="batch"),
        Arm("static", CONTENDER, drafter_label="d", gamma=2, why=STATIC),
    )
    return Target("w", load, None, arms, schedule_ranges=RANGES)


def test_the_loads_that_confirm_a_schedule_sit_on_both_sides_of_every_threshold():
    assert threshold_loads(RANGES) == [1, 2, 3, 4, 8]
    assert threshold_at(RANGES, 4) == "just past the threshold at batch 4 (K 2 → 0)"
    assert threshold_at(RANGES, 3) == "just below the threshold at batch 4 (K 2 → 0)"


def test_a_cliff_planted_at_a_schedule_threshold_is_reported():
    healthy = {"target only": 1.0, "schedule": 1.3, "static": 1.2}
    for load in threshold_loads(RANGES):
        planted = {"target only": 1.0, "schedule": 0.45, "static": 1.1} if load == 4 else healthy
        result = judge(_serving_records(load, planted), _load_target(load), LookPlan((12,)))
        if load == 4:
            assert result.cliff is not None and "threshold at batch 4 (K 2 → 0)" in result.cliff, result.cliff
        else:
            assert result.cliff is None, (load, result.cliff)


# ----------------------------------------------------------------------------- the fresh draw


def _prompts(ids) -> list[Prompt]:
    return [Prompt("w", i, "c", ("t",)) for i in ids]


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(st.text(min_size=1, max_size=6), unique=True, max_size=40),
    used_share=st.floats(0, 1),
    seed=st.integers(0, 2**31),
    limit=st.integers(0, 50),
)
def test_the_fresh_draw_never_reuses_a_sweep_prompt(ids, used_share, seed, limit):
    used = set(ids[: int(len(ids) * used_share)]) | {"not-a-prompt"}
    drawn = draw_fresh(_prompts(ids), used, seed, limit)
    names = [p.prompt_id for p in drawn]
    assert not set(names) & used and len(set(names)) == len(names)
    assert len(names) == min(limit, len([i for i in ids if i not in used]))
    assert names == [p.prompt_id for p in draw_fresh(_prompts(ids), used, seed, limit + 5)][: len(names)]


def test_the_plan_draws_fresh_prompts_and_names_its_contenders(tmp_path):
    results = decided_results(tmp_path / "sweep")
    plan = plan_confirmation(results, ConfirmSettings(first=2, batch=2, max_prompts=6))
    (target,) = plan.targets
    swept = set(load_records(results)["prompt_id"])
    fresh = plan.prompt_ids[target.workload]
    assert len(fresh) == 6 and not set(fresh) & swept
    assert target.prediction.answer == YES and target.chosen.name == "ngram γ=2"
    assert "ngram heuristic γ≤2" in [a.name for a in target.contenders]
    assert any("threshold schedule" in line and "ngram" in line for line in plan.absent)  # ngram has no confidence
    again = plan_confirmation(results, ConfirmSettings(first=2, batch=2, max_prompts=6))
    assert again.hash == plan.hash and again.prompt_ids == plan.prompt_ids  # seeded: the same command, the same plan
    longer = plan_confirmation(results, ConfirmSettings(first=2, batch=2, max_prompts=6, budget_s=3600))
    assert longer.hash == plan.hash  # a larger --budget continues the same confirmation
    reseeded = plan_confirmation(results, ConfirmSettings(first=2, batch=2, max_prompts=6, seed=1))
    assert reseeded.hash != plan.hash and reseeded.prompt_ids != plan.prompt_ids


def test_an_adaptive_sweeps_pool_is_never_fresh_and_the_rest_of_its_split_is(tmp_path):
    """An adaptive sweep draws its looks from a pool (the first max_prompts of each workload) and may stop early:
    the pool's unmeasured prompts are not fresh (a resumed sweep would take them), every other prompt is. run.json
    keeps the plan resolved (budget_s), and the confirmation reads its pool from there."""
    adaptive = {"first": 4, "batch": 4, "max_prompts": 12, "budget": "5m"}
    results = decided_results(tmp_path / "sweep", adaptive=adaptive)
    assert load_run_info(results)["sweep"]["adaptive"]["budget_s"] == 300
    source = yaml.safe_load((tmp_path / "sweep" / "sweep.yaml").read_text())["workloads"][0]["name"]
    pool = {p.prompt_id for p in load_workload(source, count=12, seed=0).prompts}
    swept = set(load_records(results)["prompt_id"])
    assert swept < pool
    plan = plan_confirmation(results, ConfirmSettings(first=2, batch=2, max_prompts=40))
    (target,) = plan.targets
    fresh = set(plan.prompt_ids[target.workload])
    assert len(fresh) == 40 - 12 and not fresh & pool


# ----------------------------------------------------------------------------- end to end, killed and resumed


def test_a_confirmation_killed_halfway_resumes_with_the_same_command(tmp_path):
    results = decided_results(tmp_path / "sweep", max_new_tokens=8)
    cmd = [
        sys.executable,
        "-m",
        "specbench",
        "confirm",
        str(results),
        "--first",
        "2",
        "--batch",
        "1",
        "--max-prompts",
        "4",
        "--budget",
        "20m",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, first = time.time() + 600, None
    state = results / "confirm" / "confirm.json"
    while time.time() < deadline and proc.poll() is None:
        report = load_report(results) if state.exists() else None
        if report and any(t.looks for t in report.targets.values()):
            first = report
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first is not None, "the kill must land after a look"
    done = subprocess.run(cmd + ["--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    resumed = load_report(results)
    records = load_records(results / "confirm")
    assert records["unit_id"].is_unique and resumed.finished
    for name, state_before in first.targets.items():
        after = resumed.targets[name]
        for before, again in zip(state_before.looks, after.looks):  # the looks before the kill are recomputed alike
            assert (before.look, before.prompts) == (again.look, again.prompts)
            assert before.result.as_dict() == again.result.as_dict()
        assert after.looks and after.status in ("decided", "prompts exhausted", "budget")
        assert after.last.lossless.startswith("lossless"), after.last.lossless  # every contender: greedy = target
    assert json.loads(done.stdout)["plan_hash"] == first.plan_hash


# ----------------------------------------------------------------------------- a workload shift


def test_regret_before_and_after_each_shift_of_a_stream():
    """A stream whose second segment suits the adaptive contender: the static γ's regret appears after the
    shift, not before."""
    rng = np.random.default_rng(0)
    rows = []
    for position in range(24):
        segment = "code" if position < 12 else "chat"
        tokens = float(rng.integers(40, 120))
        base = tokens * 0.05 * float(np.exp(0.2 * rng.standard_normal()))
        speeds = {"target only": 1.0, "static": 1.4, "adaptive": 1.4 if segment == "code" else 1.9}
        for name, speed in speeds.items():
            rows.append(
                {
                    "workload": "s",
                    "prompt_id": f"p{position}",
                    "turn": 1,
                    "repeat": 0,
                    "mode": "live",
                    "drafter": "none" if name == "target only" else "d",
                    "drafter_label": "none" if name == "target only" else "d",
                    "tree": "chain",
                    "gamma": 0 if name == "target only" else 4,
                    "schedule": "heuristic" if name == "adaptive" else "fixed",
                    "temperature": 0.0,
                    "decode_tokens": tokens,
                    "decode_s": base / speed * float(np.exp(0.03 * rng.standard_normal())),
                    "stream_position": position,
                    "stream_segment": segment,
                    "output_sha1": f"o{position}",
                }
            )
    arms = (
        Arm("target only", BASELINE),
        Arm("static", RECOMMENDED, drafter_label="d", gamma=4),
        Arm("adaptive", CONTENDER, drafter_label="d", gamma=4, schedule="heuristic"),
    )
    result = judge(pd.DataFrame(rows), Target("s", 1, None, arms), LookPlan((24,)))
    (shift,) = result.shifts
    assert (shift.position, shift.before, shift.after) == (12, "code", "chat")
    (before,), (after,) = shift.ahead, shift.behind
    assert before.lo < 1 < before.hi and after.lo > 1.2, (before.text, after.text)
    assert "shift at 12 (code → chat)" in shift.text


def test_a_fresh_stream_keeps_its_segments_and_never_reuses_a_prompt():
    swept = load_workload("stream-code-chat-mtbench")
    used = {p.prompt_id for p in swept.prompts}
    fresh, _ = fresh_prompts("stream-code-chat-mtbench", "eval", used, seed=0, limit=10)
    assert [p.segment for p in fresh.prompts] == [p.segment for p in swept.prompts]  # same shifts, same places
    assert not {p.prompt_id for p in fresh.prompts} & used
    assert [p.stream_position for p in fresh.prompts] == list(range(len(swept.prompts)))


# ----------------------------------------------------------------------------- the contenders in vLLM's config


def test_serving_schedules_become_vllm_settings_and_own_schedules_are_refused_there():
    config = RunConfig(DrafterConfig("ngram", (("n_max", 3), ("n_min", 1))), 4, "chain", 0.0, 1.0, 0)
    ranges = [[1, 1, 4], [2, 3, 2], [4, 8, 0]]
    built = speculative_config(replace(config, schedule=batch_size_schedule(ranges)))
    assert built["num_speculative_tokens_per_batch_size"] == ranges and built["num_speculative_tokens"] == 4
    assert "enable_adaptive_verification" not in built
    both = speculative_config(replace(config, schedule=batch_size_schedule(ranges, adaptive=True)))
    assert both["enable_adaptive_verification"] is True
    assert speculative_config(replace(config, schedule=ScheduleSpec("adaptive-k")))["enable_adaptive_verification"]
    assert speculative_config(config) == {
        k: v for k, v in built.items() if k != "num_speculative_tokens_per_batch_size"
    }
    with pytest.raises(SpecbenchError, match="own engine, live"):
        speculative_config(replace(config, schedule=ScheduleSpec("heuristic")))
    with pytest.raises(SpecbenchError, match="serving engine"):
        make_schedule(batch_size_schedule(ranges), 4)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--budget", "soon"], "budget must be a duration"),
        (["--first", "0"], "--first': must be an integer from 1"),
        (["--max-prompts", "-3"], "--max-prompts': must be an integer from 1"),
        (["--workload", "nope"], "--workload nope: not in"),
    ],
)
def test_bad_confirm_flags_are_one_line(tmp_path, args, needle):
    results = decided_results(tmp_path / "sweep")
    assert_user_error(invoke("confirm", results, *args, "--dry-run"), needle)


def test_confirming_a_folder_that_is_not_a_sweep_is_one_line(tmp_path):
    assert_user_error(invoke("confirm", tmp_path / "nothing", "--dry-run"), "results folder not found")


def test_a_schedule_that_cannot_differ_from_the_recommendation_is_not_a_contender():
    """The heuristic schedule moves its length between 1 and its cap: capped at γ = 1 it is γ = 1 itself."""
    from specbench.backends.adaptive_mechanisms import own_mechanisms

    at_one = {m.name: m for m in own_mechanisms({}, "ngram", 1)}
    assert at_one["heuristic schedule"].schedule is None and "γ = 1" in at_one["heuristic schedule"].absent
    at_three = {m.name: m for m in own_mechanisms({}, "ngram", 3)}
    assert at_three["heuristic schedule"].schedule == "heuristic" and at_three["heuristic schedule"].absent is None

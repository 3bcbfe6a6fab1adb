"""Sweeps that decide: the error control, the stopping rule, the look-by-look driver, its progress lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from specbench.analysis.options import Option
from specbench.analysis.recommendation.recommend import recommend
from specbench.analysis.simulation import TRUTHS, error_table
from specbench.analysis.statistics.sequential import FIXED, LookPlan, VerdictRule, pocock_constant
from specbench.analysis.statistics.speedup_interval import speedup_interval
from specbench.analysis.verdicts.decision import decide_options
from specbench.analysis.verdicts.stopping import DECIDED, OPEN, look_outcome
from specbench.analysis.verdicts.verdict import NO, UNSURE, YES
from specbench.cli import app
from specbench.errors import SpecbenchError
from specbench.measure.grid.adaptive import AdaptivePlan, parse_adaptive, parse_budget
from specbench.records.adaptive_history import read_history
from specbench.records.store import load_records
from tests.cli_helpers import assert_user_error, invoke, jsonl_workload, tiny_sweep_yaml
from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records, records_frame

# ----------------------------------------------------------------------------- the plan and its parser


def test_looks_are_planned_from_the_pool():
    plan = AdaptivePlan(batch=8, first=8, max_prompts=40)
    assert plan.looks_for(80) == (8, 16, 24, 32, 40)
    assert plan.looks_for(20) == (8, 16, 20)  # a small workload: its last look takes what it has
    assert plan.looks_for(5) == (5,)
    assert plan.calibration_for((8, 16, 24), 3) == (3, 6, 9)
    assert AdaptivePlan(calibration_batch=1).calibration_for((8, 16, 24), 4) == (4, 5, 6)


@pytest.mark.parametrize(
    "value,needle",
    [
        ({"bacth": 8}, "did you mean 'batch'"),
        ({"batch": 0}, "from 1 to"),
        ({"batch": 2.5}, "an integer"),
        ({"budget": "soon"}, "duration"),
        ({"budget": -5}, "more than 0"),
        ({"max_prompts": float("nan")}, "finite"),
        ({"batch": 1, "max_prompts": 1000}, "over the limit"),
        ("yes", "true or a mapping"),
    ],
)
def test_bad_adaptive_keys_are_one_line(value, needle):
    with pytest.raises(SpecbenchError, match=re.escape(needle)):
        parse_adaptive(value, "sweep.yaml")


def test_durations():
    assert parse_budget("90s", "x") == 90 and parse_budget("20m", "x") == 1200
    assert parse_budget("1.5h", "x") == 5400 and parse_budget(600, "x") == 600
    assert parse_adaptive(True, "x") == AdaptivePlan() and parse_adaptive(None, "x") is None


# ----------------------------------------------------------------------------- the rule


def test_pocock_boundary_matches_the_published_constants():
    # Pocock (1977): 2.178 (2 looks), 2.413 (5 looks) for a two-sided 5 % test = one-sided 2.5 %
    assert pocock_constant((10, 20), 0.025) == pytest.approx(2.178, abs=0.02)
    assert pocock_constant(tuple(range(8, 48, 8)), 0.025) == pytest.approx(2.413, abs=0.02)
    assert pocock_constant((10,), 0.025) == pytest.approx(stats.norm.isf(0.025))


def test_one_option_and_one_look_is_the_plain_95_percent_interval():
    rng = np.random.default_rng(0)
    tokens = rng.integers(30, 100, 12).astype(float)
    base = tokens * 0.05
    iv = speedup_interval(tokens, base / 1.2 * np.exp(0.1 * rng.standard_normal(12)), tokens, base)
    rule = VerdictRule(FIXED, 1)
    assert rule.lower(iv.point, iv.log_se, iv.dof) == pytest.approx(iv.lo)
    assert rule.upper(iv.point, iv.log_se, iv.dof) == pytest.approx(iv.hi)
    wider = VerdictRule(LookPlan((12, 24, 36)), 6)  # more looks and the best of six: a wider yes-interval
    assert wider.lower(iv.point, iv.log_se, iv.dof) < iv.lo


def _verdicts(frame, planned):
    recs = recommend(frame, n_boot=0, plans={"mt-bench": LookPlan(planned)})
    return [r.decision for r in recs]


@pytest.mark.parametrize(
    "drafter,answer",
    [
        (SyntheticDrafter(alpha=0.9, gammas=(2, 4)), YES),
        (SyntheticDrafter(alpha=0.6, gammas=(1, 2, 4), draft_step_s=0.03), NO),
    ],
)
def test_the_rule_stops_when_the_truth_is_clear(drafter, answer):
    frame = records_frame(make_records([drafter], n_prompts=12, seed=0, costs=SyntheticCosts(noise=0.05)))
    verdicts = _verdicts(frame, (12, 24, 36))
    assert [v.answer for v in verdicts] == [answer]
    assert look_outcome(verdicts, 1, (12, 24, 36)) == (DECIDED, set())


def test_the_rule_drops_a_configuration_confidently_below_the_best_and_goes_on():
    drafters = [
        SyntheticDrafter(
            name="ngram", params={}, model_free=True, alpha=0.5, no_match_rate=0.97, gammas=(2,), alpha_spread=0.2
        ),
        SyntheticDrafter(alpha=0.5, gammas=(2,), draft_step_s=0.02),
    ]  # drafting costs more than it gains
    frame = records_frame(make_records(drafters, n_prompts=8, seed=0, costs=SyntheticCosts(noise=0.15)))
    verdicts = _verdicts(frame, (8, 16, 24))
    status, dropped = look_outcome(verdicts, 1, (8, 16, 24))
    assert status == OPEN and verdicts[0].answer == UNSURE
    assert dropped == {("draft-model(model=qwen2.5-coder-0.5b)", "chain", 2, "fixed")}
    assert look_outcome(verdicts, 3, (8, 16, 24))[0] == "prompts exhausted"  # the last planned look


def test_a_disturbed_timing_never_decides():
    frame = records_frame(make_records([SyntheticDrafter(alpha=0.9, gammas=(2, 4))], n_prompts=12, seed=0))
    verdicts = _verdicts(frame, (12, 24))
    verdicts[0].timing_disturbed = True
    assert look_outcome(verdicts, 1, (12, 24))[0] == OPEN


def test_error_control_with_a_known_truth():
    """The adaptive rule is confidently wrong ≤ 5 % of the time when every speedup is 1; the former plain
    rule (any 95 % interval above 1) is not — the harness can tell them apart — and a 1.3× truth is found."""
    null = error_table({"null": TRUTHS["every speedup 1.0"]}, planned=(8, 16, 24), fixed_sizes=(12,), sims=400, seed=1)
    rates = dict(zip(null["method"], null["confidently_wrong"]))
    adaptive = next(v for k, v in rates.items() if k.startswith("adaptive"))
    assert adaptive <= 0.05 + 0.02  # 400 sweeps: ±1 % binomial noise around a rate ≤ 5 %
    assert rates["fixed grid, 12 prompts, plain 95 % (former rule)"] > 0.07
    power = error_table({"1.3": TRUTHS["best 1.3"]}, planned=(8, 16, 24), fixed_sizes=(), sims=100, seed=2)
    assert power["yes"].iloc[0] >= 0.8 and power["confidently_wrong"].iloc[0] == 0


def test_a_yes_names_its_adjusted_interval():
    options = [
        Option("x", f"c{k}", "{}", "chain", k, s, 0, 0, 0, True, "fixed", 0.02, 20.0)
        for k, s in enumerate((1.10, 1.30, 1.20), start=1)
    ]
    decision = decide_options(
        __import__("pandas").DataFrame(), __import__("pandas").DataFrame(), options, 21, LookPlan((7, 14, 21))
    )
    assert decision.answer == YES and decision.option.gamma == 2
    assert decision.option.lo == pytest.approx(1.30 * np.exp(-decision_quantile(decision) * 0.02))
    assert "best of 3 configurations and 3 planned looks" in decision.text


def decision_quantile(decision):
    return stats.t.isf(decision.rule.p_yes, 20.0)


# ----------------------------------------------------------------------------- the driver, end to end


ADAPTIVE = {"first": 2, "batch": 1, "max_prompts": 4}


def adaptive_yaml(tmp_path, prompts_file, **overrides):
    spec = {
        "workloads": [jsonl_workload(prompts_file, count=4), {"name": "mt-bench", "count": 3}],
        "drafters": [{"type": "ngram"}],
        "gammas": [1, 3],
        "mode": "replay",
        "calibration": {"gammas": [1, 3], "prompts": 1},
        "timing": {"order": "bracket", "warmup_s": 0},
        "max_new_tokens": 16,
        "adaptive": ADAPTIVE,
    }
    return tiny_sweep_yaml(tmp_path, prompts_file, **{**spec, **overrides})


def test_adaptive_sweep_runs_its_looks_and_records_them(tmp_path, prompts_file):
    spec, out = adaptive_yaml(tmp_path, prompts_file), tmp_path / "res"
    dry = invoke("sweep", spec, "--out", out, "--dry-run")
    assert dry.exit_code == 0 and "looks at 2, 3, 4 prompts" in dry.stdout and "worst case" in dry.stdout
    result = invoke("sweep", spec, "--out", out)
    assert result.exit_code == 0, result.output
    history = read_history(out)
    records = load_records(out)
    assert records["stage"].notna().all() and records["unit_id"].is_unique
    for name, entry in history["workloads"].items():
        assert entry["planned"][0] == 2 and entry["status"] != "open"
        looks = entry["looks"]
        assert [look["look"] for look in looks] == list(range(1, len(looks) + 1))
        mine = records[records["workload"] == name]
        assert int(mine["stage"].max()) == len(looks)  # nothing measured beyond the last look
        for look in looks:  # a look's prompts are the first n of the workload
            assert mine[mine["stage"] <= look["look"]]["prompt_id"].nunique() == look["prompts"]
        live_timed = mine[(mine["mode"] == "live") & (mine["gamma"] > 0)]
        assert live_timed["prompt_id"].nunique() <= entry["calibration"][len(looks) - 1]
    assert history["finished"] and history["elapsed_s"] > 0
    shown = invoke("results", "show", out)
    assert shown.exit_code == 0 and "stopping history" in shown.stdout
    rec = invoke("recommend", out, "--json", "--bootstrap", "50")
    assert rec.exit_code == 0, rec.output
    assert all(r["stopping_history"]["planned"][0] == 2 for r in json.loads(rec.stdout))
    recommended = [r["recommended"] for r in json.loads(rec.stdout)]
    text = CliRunner().invoke(app, ["recommend", str(out), "--bootstrap", "50"], env={"COLUMNS": "250"}).stdout
    verdict_rows = [line for line in text.splitlines() if line.startswith("│ verdict (")]
    assert len(verdict_rows) == len(recommended), text  # each workload's table shows what its verdict rests on
    for row, chosen in zip(verdict_rows, recommended):
        assert ("★" in row) == (chosen is not None), row
    assert "look" in result.stdout  # the end-of-sweep summary names each workload's last look


def test_adaptive_flags(tmp_path, prompts_file):
    spec = adaptive_yaml(tmp_path, prompts_file, adaptive=None)
    dry = invoke("sweep", spec, "--dry-run", "--until-decided", "--batch", "2", "--max-prompts", "3")
    assert dry.exit_code == 0 and "looks at 2, 3 prompts" in dry.stdout
    assert_user_error(invoke("sweep", spec, "--fixed-grid", "--budget", "5m"), "--fixed-grid")
    assert_user_error(invoke("sweep", spec, "--budget", "later", "--dry-run"), "duration")


def test_adaptive_sweep_resumes_after_a_kill_between_looks(tmp_path, prompts_file):
    spec, out = adaptive_yaml(tmp_path, prompts_file, max_new_tokens=24), tmp_path / "killed"
    cmd = [sys.executable, "-m", "specbench", "sweep", str(spec), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, first = time.time() + 300, None
    while time.time() < deadline and proc.poll() is None:
        history = read_history(out) if (out / "adaptive.json").exists() else None
        if history and any(e["looks"] for e in history["workloads"].values()):
            first = history
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first is not None, "the kill must land after a look"
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    resumed = read_history(out)
    records = load_records(out)
    assert records["unit_id"].is_unique
    for name, entry in first["workloads"].items():  # the looks before the kill are recomputed alike
        for before, after in zip(entry["looks"], resumed["workloads"][name]["looks"]):
            assert (before["look"], before["prompts"], before["answer"]) == (
                after["look"],
                after["prompts"],
                after["answer"],
            )
    assert resumed["finished"] and resumed["elapsed_s"] >= first["elapsed_s"]


def test_a_look_that_does_not_fit_the_budget_left_ends_as_budget_not_as_prompts_run_out(
    tmp_path, prompts_file, monkeypatch
):
    """Budget left, but the next look is estimated to overrun it: the workloads end "cannot tell within the
    budget" (with what is needed), not "its prompts ran out" — they had prompts left."""
    from specbench.measure.run.adaptive import AdaptivePolicy

    monkeypatch.setattr(AdaptivePolicy, "_look_seconds", lambda self, state: None if state.look == 0 else 1e9)
    spec, out = adaptive_yaml(tmp_path, prompts_file, adaptive={**ADAPTIVE, "budget": "1h"}), tmp_path / "res"
    result = invoke("sweep", spec, "--out", out)
    assert result.exit_code == 0, result.output
    workloads = read_history(out)["workloads"]
    open_after_one = [e for e in workloads.values() if len(e["looks"]) == 1 and e["looks"][-1]["answer"] != "decided"]
    assert all(e["status"] in ("budget", "decided") for e in workloads.values()), workloads
    assert any(e["status"] == "budget" for e in workloads.values()) or not open_after_one


def test_a_sweep_redirected_to_a_file_prints_progress_lines_while_it_runs(tmp_path, prompts_file):
    spec = tiny_sweep_yaml(tmp_path, prompts_file, max_new_tokens=48)
    log = tmp_path / "sweep.log"
    with open(log, "w") as stream:
        proc = subprocess.Popen(
            [sys.executable, "-m", "specbench", "sweep", str(spec), "--out", str(tmp_path / "o")],
            stdout=stream,
            stderr=subprocess.STDOUT,
        )
        seen_while_running = False
        deadline = time.time() + 300
        while time.time() < deadline and proc.poll() is None:
            if re.search(r"\] (look )?\d+/\d+ units .*elapsed \d+m\d+s · (look )?eta", log.read_text()):
                seen_while_running = proc.poll() is None
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)  # seen: the rest of the sweep is not this test's business
        proc.wait(timeout=120)
    assert seen_while_running, log.read_text()[-2000:]
    assert proc.returncode in (0, 143)


def test_progress_lines_count_the_look_and_cap_the_eta_by_the_budget():
    """In an adaptive sweep the grid is only an upper bound: lines count the look's units and say the budget left."""
    import io

    from specbench.cli.views.progress_lines import LineProgress

    stream = io.StringIO()
    progress = LineProgress(stream, heartbeat_s=1e9, min_gap_s=0.0)
    progress.begin(1728, 0)
    progress.look_started(40, 480.0)
    progress.unit_done(None, {})
    last = stream.getvalue().strip().splitlines()[-1]
    assert "look 1/40 units (1 of the grid's 1728)" in last, last
    assert re.search(r"budget left 7m5\ds", last), last
    assert "1728 units ·" not in last


def test_serving_backend_keeps_engines_and_runs_the_warm_ones_first(monkeypatch):
    """Two looks of baseline + 3 configurations with 3 engines kept: 4 starts, then 1 (the target-only engine and
    the last two configurations are still running, and run first) — against 8 without kept engines."""
    from specbench.backends.base import Request
    from specbench.backends.registry import make_backend
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.serving.groups import Group, warm_first

    monkeypatch.setenv("SPECBENCH_VLLM_WORKER_ENGINE", "tests.fake_vllm_engine:FakeEngine")
    monkeypatch.setenv("PYTHONPATH", os.getcwd())
    spec = build_spec(
        {"name": "kept", "drafters": ["ngram"], "gammas": [1, 2, 3], "workloads": ["mt-bench"], "backend": "vllm"}
    )
    backend = make_backend(
        "vllm", {"python": sys.executable, "engines_kept": 3}, target="smollm2-135m", device="cpu", dtype="fp32"
    )
    backend.start(lambda message: None)
    try:
        request = [Request([1, 2, 3], 4, 0, False)]
        for look in (1, 2):
            groups = warm_first([Group(c, 1, 1, []) for c in spec.configs], backend.is_warm)
            if look == 2:
                assert [g.config.gamma for g in groups] == [0, 2, 3, 1]  # baseline, the warm ones, the rest
            for group in groups:
                backend.generate_batch(group.config, request, 1)
        assert backend.engine_starts == 4 + 1
    finally:
        backend.close()
    assert not backend._workers


def test_an_interval_end_that_rounds_to_one_shows_its_side_of_one():
    from specbench.analysis.statistics.speedup_interval import ratio_end, speedup_words

    assert speedup_words(1.43, 1.0042, 2.03) == "1.43× [1.004, 2.03]"
    assert ratio_end(0.9981) == "0.998" and ratio_end(1.0) == "1.00" and ratio_end(1.2345) == "1.23"


def test_a_budget_shorter_than_the_first_look_stops_inside_it_and_keeps_what_was_measured(
    tmp_path, prompts_file, monkeypatch
):
    """The first look has no time estimate, so it starts whatever the budget; once the budget is spent no further
    piece of it starts (the one in flight finishes): the sweep ends "budget" within about one piece of its budget,
    keeps the units measured, and the same command with a larger budget finishes the look."""
    from specbench.measure.executors.executor import RecordWriter

    take = RecordWriter.take

    def slow_take(self, outcome):  # every piece outlasts the 1 s budget, whatever this machine's speed
        take(self, outcome)
        time.sleep(1.1)

    monkeypatch.setattr(RecordWriter, "take", slow_take)
    spec, out = adaptive_yaml(tmp_path, prompts_file, adaptive={**ADAPTIVE, "budget": "1s"}), tmp_path / "res"
    result = invoke("sweep", spec, "--out", out)
    monkeypatch.setattr(RecordWriter, "take", take)
    assert result.exit_code == 0, result.output
    history = read_history(out)
    assert all(e["status"] == "budget" and not e["looks"] for e in history["workloads"].values()), history
    kept = load_records(out)
    look_units = 2 * 2 * (1 + 2)  # two workloads × two first prompts × (baseline + γ 1, 3 live or replayed)
    assert 0 < len(kept) < look_units  # the first piece ran, no other started
    assert "the budget ran out inside the first look" in result.output
    again = invoke("sweep", spec, "--out", out, "--budget", "1h")
    assert again.exit_code == 0, again.output
    resumed = load_records(out)
    assert set(kept["unit_id"]) <= set(resumed["unit_id"]) and resumed["unit_id"].is_unique
    assert all(e["looks"] for e in read_history(out)["workloads"].values())

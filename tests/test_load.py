"""The serving view on synthetic records with a known truth: the per-load table (per-request and system
speedups, latency percentiles, intervals), the crossover where speculation stops paying, the SLO objective,
and the per-load verdicts and vLLM schedule — which say only what the decision machinery says."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from specbench.analysis.load.crossover import crossover, describe
from specbench.analysis.load.slo import make_slo, parse_latency, slo_answers
from specbench.analysis.load.table import has_load_axis, load_keys, scenario_keys, serving_table
from specbench.analysis.load.verdicts import for_scenario, summary
from specbench.analysis.recommendation.recommend import recommend, to_json
from specbench.analysis.verdicts.verdict import NO, YES
from specbench.errors import SpecbenchError
from tests.synthetic_serving import as_dicts, serving_records

LEVELS = (1, 2, 4, 8, 16)


def falling(load, gamma):
    """The true per-request speedup: 1.6 at one request in flight, crossing 1 at 1.6⁴ ≈ 6.55."""
    return 1.6 * load**-0.25


TRUE_CROSSOVER = 1.6**4


# ----------------------------------------------------------------------------- the crossover estimator


def test_crossover_on_records_with_a_known_crossover_covers_the_truth():
    """Over 40 synthetic sweeps the estimated crossover sits near 6.55 and its range holds it."""
    points, covered = [], 0
    for seed in range(40):
        table = serving_table(serving_records(LEVELS, falling, seed=seed), n_boot=0)
        spec = table[table["gamma"] > 0].sort_values("concurrency")
        c = crossover(spec["concurrency"], spec["speedup"], spec["speedup_lo"], spec["speedup_hi"])
        assert c.point is not None and not c.below_all
        points.append(c.point)
        covered += (c.lo or 0) <= TRUE_CROSSOVER <= (c.hi or np.inf)
    assert abs(np.median(points) / TRUE_CROSSOVER - 1) < 0.15
    assert covered >= 36  # ≥ 90 % of the ranges hold the true crossover


def test_crossover_cases_pays_everywhere_never_and_again():
    above = crossover([1, 4, 16], [1.5, 1.4, 1.3], [1.3, 1.2, 1.1], [1.7, 1.6, 1.5])
    assert above.point is None and above.lo is None and "at every load measured" in describe(above, "in flight")
    below = crossover([1, 4, 16], [0.9, 0.8, 0.7], [0.8, 0.7, 0.6], [1.0, 0.9, 0.8])
    assert below.below_all and "at no load measured" in describe(below, "in flight")
    again = crossover([1, 2, 4, 8], [1.4, 0.9, 1.2, 0.8], [1.2, 0.8, 1.05, 0.7], [1.6, 1.0, 1.4, 0.9])
    assert 1 < again.point < 2 and any("again at 4" in n for n in again.notes)
    # log-log interpolation: 1.21 at 1, 0.81 at 4 → log S halves the distance at 2 → 1 at 2^(log 1.21 / log(1.21/…))
    exact = crossover([1, 4], [1.21, 1 / 1.21], [1.1, 0.8], [1.3, 0.9])
    assert exact.point == pytest.approx(2.0)
    assert describe(exact, "requests in flight").startswith("pays up to about 2 requests in flight [95 %:")


def test_a_curve_above_1_says_where_its_interval_stops_being_sure():
    unsure_later = crossover([1, 4, 16], [1.5, 1.3, 1.2], [1.2, 0.9, 0.8], [1.8, 1.7, 1.6])
    text = describe(unsure_later, "requests in flight")
    assert unsure_later.point is None and text.startswith("pays with confidence up to about")
    assert "its interval includes 1 from about" in text and "at every load" not in text
    # the words follow the intervals: every one includes 1, so it never says "pays at every load measured"
    unsure_throughout = crossover([1, 4], [1.2, 1.1], [0.9, 0.8], [1.5, 1.4])
    text = describe(unsure_throughout, "requests in flight")
    assert text.startswith("cannot tell whether it pays at any load measured") and "every interval includes 1" in text
    crossing_unsure = crossover([1, 4], [1.21, 1 / 1.21], [0.9, 0.8], [1.3, 1.1])
    text = describe(crossing_unsure, "requests in flight")
    assert text.startswith("cannot tell where it stops") and "pays up to" not in text


# ----------------------------------------------------------------------------- the per-load table


def test_serving_table_speedups_system_throughput_and_percentiles():
    frame = serving_records(LEVELS, falling, seed=1)
    table = serving_table(frame, n_boot=200)
    assert sorted(table["concurrency"].unique()) == list(LEVELS)
    spec = table[table["gamma"] > 0].set_index("concurrency")
    for level in LEVELS:
        at = frame[frame["concurrency"] == level]
        base, conf = at[at["gamma"] == 0], at[at["gamma"] > 0]
        per_request = (conf["decode_tokens"].sum() / conf["decode_s"].sum()) / (
            base["decode_tokens"].sum() / base["decode_s"].sum()
        )
        assert spec.loc[level, "speedup"] == pytest.approx(per_request)
        system = (
            conf.groupby("batch_id")["batch_output_tokens"].first().sum()
            / conf.groupby("batch_id")["batch_wall_s"].first().sum()
        )
        base_system = (
            base.groupby("batch_id")["batch_output_tokens"].first().sum()
            / base.groupby("batch_id")["batch_wall_s"].first().sum()
        )
        assert spec.loc[level, "system_speedup"] == pytest.approx(system / base_system)
        assert (
            spec.loc[level, "system_speedup_lo"]
            < spec.loc[level, "system_speedup"]
            < spec.loc[level, "system_speedup_hi"]
        )
        np.testing.assert_allclose(
            spec.loc[level, ["itl_p50_s", "itl_p90_s", "itl_p99_s"]].to_numpy(float),
            np.percentile(conf["itl_s"], [50, 90, 99]),
        )
        ratio = np.percentile(base["latency_s"], 90) / np.percentile(conf["latency_s"], 90)
        assert spec.loc[level, "latency_p90_speedup"] == pytest.approx(ratio)
        assert spec.loc[level, "latency_p90_speedup_lo"] <= ratio <= spec.loc[level, "latency_p90_speedup_hi"]
    base_rows = table[table["gamma"] == 0]
    assert base_rows["speedup"].isna().all() and (base_rows["itl_p90_lo_s"] <= base_rows["itl_p90_s"]).all()


def test_per_request_interval_covers_the_truth():
    hits = 0
    for seed in range(30):
        spec = serving_table(serving_records((1, 8), falling, seed=seed), n_boot=0)
        spec = spec[spec["gamma"] > 0]
        hits += sum(
            lo <= falling(c, 2) <= hi
            for c, lo, hi in spec[["concurrency", "speedup_lo", "speedup_hi"]].itertuples(index=False)
        )
    assert hits >= 54  # 60 intervals, nominal 95 %


def test_load_keys_and_scenarios_only_where_the_load_varies():
    frame = serving_records((1, 4), falling)
    assert load_keys(frame) == ["concurrency"] and has_load_axis(frame)
    assert scenario_keys(frame)[-1] == "concurrency"
    one = frame[frame["concurrency"] == 1]
    assert load_keys(one) == [] and not has_load_axis(one) and "concurrency" not in scenario_keys(one)
    rates = serving_records((1.0, 2.0, 4.0), falling, axis="request_rate")
    assert load_keys(rates) == ["request_rate"] and scenario_keys(rates)[-1] == "request_rate"


def test_disturbed_units_are_left_out_and_flagged_when_nothing_else_is_left():
    frame = serving_records((1, 4), falling, timing_ok=False)
    table = serving_table(frame, n_boot=0)
    assert table["timing_disturbed"].all()
    recs = recommend(frame, n_boot=0)
    assert all(r.decision.timing_disturbed and r.final is None and not r.settings for r in recs)
    assert all("disturbed" in r.verdict for r in recs)


# ----------------------------------------------------------------------------- verdicts, crossover line, schedule


@pytest.fixture(scope="module")
def falling_sweep():
    frame = serving_records(LEVELS, falling, n_prompts=12, seed=0)
    recs = recommend(frame, n_boot=50)
    return frame, recs, summary(frame, recs, n_boot=50, hub_ids={"smollm2-135m": "HuggingFaceTB/SmolLM2-135M"})


def test_per_load_verdicts_come_from_the_decision(falling_sweep):
    _, recs, load = falling_sweep
    by_level = {v.load: v for v in load["verdicts"]}
    assert sorted(by_level) == list(LEVELS)
    for rec in recs:
        v = by_level[rec.keys["concurrency"]]
        assert v.decision is rec.decision and v.confident == rec.decision.confident
    assert by_level[1].decision.answer == YES and by_level[16].decision.answer == NO
    assert any(not v.confident for v in by_level.values())  # near the crossover it cannot tell


def test_the_crossover_line_states_where_speculation_stops(falling_sweep):
    _, _, load = falling_sweep
    (line,) = load["lines"]
    assert line["workload"] == "mt-bench" and line["gamma"] == 2
    assert "pays up to about" in line["text"] and "requests in flight" in line["text"]
    assert "at 1, " in line["text"] and "system output tokens/s" in line["text"]


def test_schedule_takes_the_verdicts_and_marks_the_rest_predicted(falling_sweep):
    """A confident yes gives its (ε-best) γ, a confident no K = 0, and a load without a confident verdict the
    prediction's best γ marked as predicted — never a silent K = 0 (it cost 18-22 % in docs/bench-confirm.md)."""
    _, _, load = falling_sweep
    (plan,) = load["schedules"]
    levels = {e["concurrency"]: e for e in plan["levels"]}
    unsure = 0
    for level, entry in levels.items():
        verdict = next(v for v in load["verdicts"] if v.load == level)
        if verdict.decision.answer == YES:
            assert entry["K"] == verdict.option.gamma and not entry["predicted"]
        elif verdict.decision.answer == NO:
            assert entry["K"] == 0 and not entry["predicted"]
        else:
            unsure += 1
            assert entry["predicted"] and entry["K"] >= 1 and "no confident verdict" in entry["why"]
    ranges = plan["ranges"]
    assert ranges[0][0] == 1 and ranges[-1][1] == 16
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))  # contiguous: vLLM fills no gap with K > 0
    covered = {b: k for first, last, k in ranges for b in range(first, last + 1)}
    for level, entry in levels.items():
        assert covered[level] == entry["K"]
    setting = plan["setting"]
    assert setting.config["num_speculative_tokens_per_batch_size"] == ranges
    assert setting.config["method"] == "ngram" and setting.config["num_speculative_tokens"] == max(covered.values())
    assert not unsure or any(n.startswith("predicted, not confirmed") for n in setting.notes)


def test_no_schedule_without_a_confident_yes():
    frame = serving_records((1, 4), lambda load, g: 1.0, n_prompts=4, noise=0.3)
    recs = recommend(frame, n_boot=0)
    assert all(r.final is None for r in recs)
    assert summary(frame, recs, n_boot=0)["schedules"] == []


def test_a_vllm_schedule_is_asked_for_only_when_vllm_is_among_the_engines(falling_sweep):
    """Before, `recommend --engine llamacpp` printed "vLLM per batch size: no schedule" under llama.cpp's flags."""
    from rich.console import Console

    from specbench.cli.views.load import print_load

    frame, recs, everyone = falling_sweep
    assert everyone["schedule_asked"] and everyone["schedules"]
    llamacpp = summary(frame, recs, n_boot=0, engines=("llamacpp",))
    assert not llamacpp["schedule_asked"] and llamacpp["schedules"] == []
    assert any("llama.cpp: one draft length at every slot count" in n for n in llamacpp["notes"])
    console = Console(record=True, width=200)
    print_load(llamacpp, console)
    assert "vLLM" not in console.export_text()
    assert summary(frame, recs, n_boot=0, engines=("vllm",))["schedules"]


def test_a_draft_model_schedule_names_the_model_as_vllm_loads_it():
    from tests.synthetic_results import SyntheticDrafter

    drafter = SyntheticDrafter(name="draft-model", params={"model": "smollm2-135m"}, gammas=(3,))
    frame = serving_records((1, 4), lambda load, g: 1.5 if load == 1 else 0.6, drafters=(drafter,), n_prompts=10)
    recs = recommend(frame, n_boot=0, hub_ids={"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct"})
    load = summary(frame, recs, n_boot=0, hub_ids={"smollm2-135m": "HuggingFaceTB/SmolLM2-135M-Instruct"})
    (plan,) = load["schedules"]
    assert plan["setting"].config["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert plan["ranges"] == [[1, 3, 3], [4, 4, 0]]
    main = next(r for r in recs if r.keys["concurrency"] == 1).settings["vllm"]
    assert main.config["model"] == plan["setting"].config["model"]  # the same name in every panel


def test_settings_agree_with_the_verdict_when_it_cannot_tell():
    """Before, an unconfident verdict still emitted the measured pick's settings."""
    frame = serving_records((1, 4), lambda load, g: 1.3, n_prompts=3, noise=0.6, prompt_spread=0.5)
    for rec in recommend(frame, n_boot=0):
        if not rec.decision.confident:
            assert (
                rec.final is None and rec.settings == {} and rec.verdict.startswith(("no speculation", "not decided"))
            )


def test_recommend_json_carries_each_scenarios_load_summary(falling_sweep):
    frame, recs, load = falling_sweep
    part = for_scenario(load, recs[0].keys)
    assert [v["load"] for v in part["verdicts"]] == [recs[0].keys["concurrency"]]
    assert {r["concurrency"] for r in part["table"]} == {recs[0].keys["concurrency"]}
    assert part["schedules"] and part["lines"]  # workload-wide parts
    data = json.loads(to_json(recs, [for_scenario(load, r.keys) for r in recs]))
    assert sorted(d["load"]["verdicts"][0]["load"] for d in data) == list(LEVELS)
    assert data[0]["load"]["schedules"][0]["setting"]["config"]["num_speculative_tokens_per_batch_size"]
    assert all(d["load"] is None for d in json.loads(to_json(recs)))


def test_a_concurrency_above_the_prompts_in_a_batch_is_named_for_what_it_measured():
    """4 prompts per batch cannot keep 8 requests in flight: the summary says so; 4 of 4 raises no note."""
    frame = serving_records((1, 4, 8), falling, n_prompts=4)
    notes = summary(frame, recommend(frame, n_boot=0), n_boot=0)["notes"]
    assert [n for n in notes if "had at most" in n] == [
        n for n in notes if n.startswith("mt-bench: concurrency 8 had at most 4 requests in flight")
    ]
    assert len([n for n in notes if "had at most" in n]) == 1


def test_the_crossover_line_carries_the_curves_notes():
    frame = serving_records(
        (1, 2, 4, 8),
        lambda load, g: {1: 1.5, 2: 0.6, 4: 1.5, 8: 0.6}[load],
        n_prompts=12,
        noise=0.02,
        prompt_spread=0.05,
    )
    load = summary(frame, recommend(frame, n_boot=0), n_boot=0)
    (line,) = load["lines"]
    assert "pays again at 4 requests in flight: the first crossing is reported" in line["text"]


def test_request_rate_sweeps_get_verdicts_but_no_batch_size_schedule():
    frame = serving_records((0.5, 1.0, 2.0), falling, axis="request_rate")
    recs = recommend(frame, n_boot=0)
    assert sorted(r.keys["request_rate"] for r in recs) == [0.5, 1.0, 2.0]
    load = summary(frame, recs, n_boot=0)
    assert (
        load["axis"] == "request_rate"
        and load["schedules"] == []
        and "request rates set no batch size" in load["notes"][0]
    )
    assert "requests/s" in load["lines"][0]["text"]


# ----------------------------------------------------------------------------- the SLO objective


def test_slo_gives_the_highest_load_under_the_target_with_and_without_speculation():
    frame = serving_records(LEVELS, falling, slowdown=0.25, seed=2)
    table = serving_table(frame, n_boot=200)
    slo = make_slo("itl", 90, "40ms")
    (answer,) = slo_answers(table, slo, "concurrency")
    base, best = answer["baseline"], answer["best"]
    for entry in (base, best):
        rows = table[table["gamma"] == entry["gamma"]].sort_values("concurrency")
        kept = rows[rows["itl_p90_s"] <= 0.040]["concurrency"]
        assert entry["highest_measured_kept"] == (kept.max() if len(kept) else None)
        c = entry["crossing"]
        if c["point"] is not None and not c["below_all"]:
            below = rows[rows["concurrency"] <= c["point"]]["itl_p90_s"]
            above = rows[rows["concurrency"] > c["point"]]["itl_p90_s"]
            assert (below.iloc[-1] <= 0.040 < above.iloc[0]) if len(below) and len(above) else True
            assert (c["lo"] or 0) <= c["point"] <= (c["hi"] or np.inf)
    assert answer["text"].startswith("ITL p90 ≤ 40 ms: target only") and "with ngram" in answer["text"]
    assert not answer["timing_disturbed"] and "disturbed" not in answer["text"]


def test_slo_says_when_it_rests_on_disturbed_timing_and_when_the_promise_is_kept_again():
    frame = serving_records(
        (0.5, 1.0, 2.0), lambda load, g: 1.0, axis="request_rate", timing_ok=False, noise=0.01, prompt_spread=0.01
    )
    table = serving_table(frame, n_boot=0)
    itl = table[table["gamma"] == 0].sort_values("request_rate")["itl_p90_s"].to_numpy()  # rises with the rate
    (answer,) = slo_answers(table, make_slo("itl", 90, f"{(itl[0] + itl[1]) / 2 * 1e3:.3f}ms"), "request_rate")
    assert answer["timing_disturbed"] and "timing disturbed" in answer["text"]
    curve = crossover([0.5, 1, 2], [0.9, 1.1, 0.8], [0.8, 1.0, 0.7], [1.0, 1.2, 0.9])
    text = describe(curve, "requests/s", "kept", "over the target")
    assert text.startswith("kept at no load measured") and "(kept again at 1 requests/s" in text


@pytest.mark.parametrize("text, seconds", [("50ms", 0.05), ("0.2s", 0.2), ("500us", 0.0005), (" 2 s", 2.0)])
def test_durations(text, seconds):
    assert parse_latency(text, "--itl-p90") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["50", "fast", "-3ms", "0ms"])
def test_bad_durations_are_one_line(text):
    with pytest.raises(SpecbenchError, match="--itl-p90"):
        parse_latency(text, "--itl-p90")


def test_slo_cli(tmp_path):
    from tests.cli_helpers import invoke
    from tests.synthetic_results import write_results

    frame = serving_records((1, 4, 16), falling, slowdown=0.25)
    folder = write_results(
        tmp_path / "served", as_dicts(frame), {"sweep": {"name": "served", "target": "synthetic-target"}}
    )
    out = invoke("recommend", folder, "--objective", "slo", "--itl-p90", "40ms", "--json")
    assert out.exit_code == 0, out.output
    (answer,) = json.loads(out.stdout)["answers"]
    assert answer["slo"] == {"metric": "itl", "percentile": 90, "limit_s": 0.04}
    text = invoke("recommend", folder, "--objective", "slo", "--slo", "latency-p99=3s")
    assert text.exit_code == 0 and "request latency p99 ≤ 3000 ms" in text.stdout
    for flags, needle in (
        (["--objective", "slo"], "needs a latency target"),
        (["--itl-p90", "40ms"], "need --objective slo"),
        (["--objective", "slo", "--itl-p90", "40"], "with its unit"),
        (["--objective", "slo", "--slo", "itl=4ms"], "METRIC-pNN=DURATION"),
    ):
        bad = invoke("recommend", folder, *flags)
        assert bad.exit_code == 2 and needle in bad.output, bad.output


def test_recommend_prints_the_load_view(tmp_path):
    from tests.cli_helpers import invoke
    from tests.synthetic_results import write_results

    frame = serving_records(LEVELS, falling)
    folder = write_results(
        tmp_path / "served", as_dicts(frame), {"sweep": {"name": "served", "target": "synthetic-target"}}
    )
    out = invoke("recommend", folder, "--engine", "vllm", "--bootstrap", "50")
    assert out.exit_code == 0, out.output
    for needle in (
        "Per load",
        "The verdict at each load",
        "pays up to about",
        "vLLM γ per batch size",
        "num_speculative_tokens_per_batch_size",
    ):
        assert needle in out.stdout, needle
    assert pd.notna(frame["batch_wall_s"]).all()


def test_results_show_keeps_rates_apart_and_names_both_taus(tmp_path):
    """τ (decode tokens ÷ every target forward) and vLLM's mean acceptance length (1 + accepted ÷ drafted
    rounds) differ when rounds draft nothing; both are shown under their own names, per request rate."""
    from tests.cli_helpers import invoke
    from tests.synthetic_results import SyntheticDrafter, write_results

    misses = SyntheticDrafter(
        name="ngram", params={"n_max": 3, "n_min": 1}, alpha=0.7, gammas=(2,), model_free=True, no_match_rate=0.4
    )
    frame = serving_records((1.0, 2.0), falling, axis="request_rate", drafters=(misses,))
    folder = write_results(tmp_path / "rates", as_dicts(frame), {"sweep": {"name": "rates", "target": "t"}})
    shown = invoke("results", "show", folder, "--json")
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["rows"]
    assert sorted({r["request_rate"] for r in rows}) == [1.0, 2.0] and len(rows) == 4
    spec = [r for r in rows if r["gamma"] == 2]
    for row in spec:
        part = frame[(frame["gamma"] == 2) & (frame["request_rate"] == row["request_rate"])]
        drafted_rounds = sum(int((np.asarray(x) > 0).sum()) for x in part["round_drafted"])
        assert row["mean_acceptance_length"] == pytest.approx(1 + part["accepted"].sum() / drafted_rounds)
        assert row["tau"] == pytest.approx(part["decode_tokens"].sum() / part["rounds"].sum())
        assert row["mean_acceptance_length"] > row["tau"]  # the rounds without a draft count only in τ
    text = invoke("results", "show", folder)
    assert "req/s" in text.stdout and "vLLM MAL" in text.stdout


def test_a_load_whose_baseline_batch_was_disturbed_is_not_decided():
    """A serving batch is flagged as a whole: if the baseline's only batch at a load ran beside a busy process,
    every speedup at that load rests on disturbed timing, and no verdict there is confident."""
    frame = serving_records((1, 4), lambda load, g: 1.6, n_prompts=10)
    disturbed = (frame["concurrency"] == 1) & (frame["gamma"] == 0)
    frame.loc[disturbed, "timing_ok"] = False
    by_level = {r.keys["concurrency"]: r for r in recommend(frame, n_boot=0)}
    assert by_level[1].decision.answer == YES and not by_level[1].decision.confident
    assert by_level[1].final is None and by_level[1].verdict.startswith("not decided (disturbed timing)")
    assert by_level[4].decision.confident and by_level[4].final is not None
    rows = {v.load: v for v in summary(frame, list(by_level.values()), n_boot=0)["verdicts"]}
    assert rows[1].short.startswith("not decided (disturbed timing; on its numbers alone: confident yes")
    assert rows[4].short.startswith("confident yes")

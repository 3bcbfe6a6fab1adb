"""Predicted speedup (replayed acceptance × interleaved costs), the decision, and --json everywhere."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specbench.records.store import load_records
from tests.cli_helpers import invoke, write_sweep_yaml

PROMPTS = [
    "Tell me about tea.",
    "Count to ten please.",
    "Why is the sky blue?",
    "Name a prime number.",
    "Spell the word cat.",
]


@pytest.fixture(scope="module")
def replay_folder(tmp_path_factory) -> tuple[Path, object]:
    tmp = tmp_path_factory.mktemp("predicted")
    prompts = tmp / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS)))
    spec = write_sweep_yaml(
        tmp,
        {
            "name": "tiny-predicted",
            "target": "tiny-random-llama",
            "max_new_tokens": 16,
            "ignore_eos": True,
            "drafters": [{"type": "ngram"}],
            "gammas": [1, 2, 3],
            "mode": "replay",
            "calibration": {"gammas": [1, 3], "prompts": 3},
            # about calibration, not interference: under xdist another test's CPU hog
            # (test_timing_protocol) may run beside it, so no unit is set aside as disturbed
            "timing": {"order": "bracket", "warmup_s": 0.1, "max_other_cores": 1000.0},
            "workloads": [{"name": f"jsonl:{prompts}:field=text:id=id", "count": 5}],
        },
    )
    out = tmp / "res"
    result = invoke("sweep", spec, "--out", out, "--json")
    assert result.exit_code == 0, result.output
    return out, result


def test_sweep_json_summary_has_the_table_keys_and_timing(replay_folder):
    out, result = replay_folder
    data = json.loads(result.stdout[result.stdout.index("{") :])
    assert data["units"] == len(load_records(out)) and data["timing"]["live_units"] > 0
    keys = {
        "workload",
        "configuration",
        "gamma",
        "mode",
        "prompts",
        "alpha",
        "tau",
        "tokens_per_s",
        "speedup",
        "greedy_identical",
        "disturbed_units",
    }
    assert data["rows"] and all(keys <= set(r) for r in data["rows"])
    shown = json.loads(invoke("results", "show", out, "--json").stdout)
    assert shown["rows"] == data["rows"]  # the same rows as the end-of-sweep summary
    table = invoke("results", "show", out)
    assert table.exit_code == 0 and "disturbed" in table.stdout


def test_live_units_carry_machine_state_and_the_baseline_is_bracketed(replay_folder):
    out, _ = replay_folder
    df = load_records(out)
    live = df[df["mode"] == "live"]
    calibrated = set(live[live["gamma"] > 0]["prompt_id"])
    base = live[live["gamma"] == 0]
    bracketed = base[base["prompt_id"].isin(calibrated)]
    assert len(calibrated) == 3 and (bracketed["timing_attempts"] >= 2).all()
    assert live["load_1m"].notna().all() and (live["attempt_decode_s"].map(len) == live["timing_attempts"]).all()
    replayed = df[df["mode"] == "replay"]
    assert (replayed["timing_flag"] == "modelled").all() and (replayed["timing_attempts"] == 0).all()


def test_predicted_speedup_with_both_uncertainties_and_a_decision(replay_folder):
    from specbench.analysis.cost.predicted_speedup import predicted_table

    out, _ = replay_folder
    table, notes = predicted_table(load_records(out))
    assert set(table["gamma"]) == {1, 2, 3} and (table["n_prompts"] == 5).all() and (table["n_calibration"] == 3).all()
    assert ((table["lo"] < table["predicted"]) & (table["predicted"] < table["hi"])).all()
    assert (table["cost_log_se"] > 0).all() and (table["acceptance_log_se"] >= 0).all()
    measured = table[table["gamma"].isin([1, 3])]
    assert np.isfinite(measured["realized_over_predicted"]).all()
    assert table.loc[table["gamma"] == 2, "n_measured"].iloc[0] == 0  # γ 2 was only replayed
    shown = json.loads(invoke("results", "show", out, "--json").stdout)["rows"]
    replayed = {r["gamma"]: r for r in shown if r["mode"] == "replay"}
    for row in table.itertuples():  # results show prints the predicted speedup (modelled baseline), interval too
        assert replayed[row.gamma]["speedup"] == pytest.approx(row.predicted)
        assert (replayed[row.gamma]["speedup_lo"], replayed[row.gamma]["speedup_hi"]) == pytest.approx((row.lo, row.hi))
    rec = invoke("recommend", out, "--json", "--bootstrap", "40")
    assert rec.exit_code == 0, rec.output
    scenario = json.loads(rec.stdout)[0]
    assert scenario["decision"]["answer"] in ("confident yes", "confident no", "cannot tell")
    assert scenario["decision"]["evidence"] == "predicted" and len(scenario["predicted"]) == 3
    printed = invoke("recommend", out, "--bootstrap", "40")
    assert printed.exit_code == 0 and "realized ÷ predicted" in printed.stdout


def test_profile_json_has_the_table_columns(tmp_path):
    result = invoke(
        "profile",
        "--target",
        "tiny-random-llama",
        "--drafter",
        "ngram",
        "--batch",
        "1",
        "--context",
        "8",
        "--verify-tokens",
        "1..2",
        "--repeats",
        "2",
        "--warmup",
        "1",
        "--out",
        tmp_path / "prof",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["rows"] and {"model", "what", "B", "c", "ms", "iqr_ms", "ms_tokens_max", "gb_s", "peak", "mib"} <= set(
        data["rows"][0]
    )
    assert {r["what"] for r in data["rows"]} >= {"verify"}


def test_the_speedup_figure_shows_the_predicted_evidence(replay_folder):
    """The figure shows what the decision rests on: a predicted point per replayed γ, with its interval."""
    from specbench.figures.families.gamma import figure_throughput
    from specbench.figures.plot_data import load_plot_data

    out, _ = replay_folder
    data = load_plot_data(out, n_boot=40)
    predicted = data.recommendations[0].predicted
    fig = figure_throughput(data)
    speed_ax = fig.axes[1]  # the speedup panel under the throughput panel of the only scenario
    hollow = [line for line in speed_ax.lines if line.get_marker() == "s"]
    assert len(hollow) == 1
    assert sorted(hollow[0].get_ydata()) == pytest.approx(sorted(predicted["predicted"]))
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert any(label.startswith("predicted speedup") for label in labels)

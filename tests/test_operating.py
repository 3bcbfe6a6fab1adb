"""Goodput, cost per million output tokens and energy per token at every load (`specbench.analysis.load.operating`),
the goodput objective (`specbench.analysis.load.goodput`), and where they show: `recommend` (text, --json), the
report and its cost-against-load figure."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.analysis.load.goodput import goodput_answers
from specbench.analysis.load.operating import good_requests, operating, price_of, targets_kept, wall_time
from specbench.analysis.load.slo import make_slo, slos_from_flags
from specbench.analysis.load.table import serving_table
from specbench.measure.grid.sweep import build_spec
from specbench.records.store import ResultsStore
from tests.cli_helpers import invoke
from tests.synthetic_results import SyntheticDrafter
from tests.synthetic_serving import NGRAM, serving_records

LOADS = [1, 4, 16]
TWO_GAMMAS = SyntheticDrafter(
    name="ngram", params={"n_max": 3, "n_min": 1}, alpha=0.7, gammas=(2, 4), model_free=True, draft_fixed_s=0.0005
)
JOULES = {0: 1.0, 2: 0.8, 4: 1.2}  # per output token: γ 2 the leanest, γ 4 (the fastest) the dearest


def _truth(load, gamma):
    return (1.5 if gamma == 2 else 1.8) if load < 4 else 0.8


@pytest.fixture(scope="module")
def records() -> pd.DataFrame:
    frame = serving_records(LOADS, _truth, drafters=(TWO_GAMMAS,), n_prompts=16, seed=3)
    frame["energy_j"] = (
        frame["new_tokens"]
        * frame["gamma"].map(JOULES)
        * np.exp(0.05 * np.random.default_rng(0).standard_normal(len(frame)))
    )
    frame["energy_counter"] = "fake: 1 J/token"
    return frame


def _write(folder, frame: pd.DataFrame, sweep: dict | None = None):
    store = ResultsStore(folder)
    store.write_run_info({"sweep": {"name": "serving", **(sweep or {})}})
    store.replace_records(frame)
    return folder


# ----------------------------------------------------------------------------- the estimators


def test_cost_is_the_price_over_system_tokens_and_its_ratio_the_inverse_system_speedup(records):
    op = operating(records, price_per_hour=2.0, n_boot=200)
    table = op.table.set_index(["concurrency", "gamma"])
    load = serving_table(records, n_boot=0).set_index(["concurrency", "gamma"])
    for key, row in table.iterrows():
        assert row["system_tokens_per_s"] == pytest.approx(load.loc[key, "system_tokens_per_s"])  # one definition
        assert row["cost_per_mtok"] == pytest.approx(2.0 / 3600 / row["system_tokens_per_s"] * 1e6)
        assert row["cost_per_mtok_lo"] <= row["cost_per_mtok"] <= row["cost_per_mtok_hi"]
        if key[1] > 0:
            assert row["cost_ratio"] == pytest.approx(1 / load.loc[key, "system_speedup"])
            assert row["cost_ratio_lo"] <= row["cost_ratio"] <= row["cost_ratio_hi"]
    assert not op.notes[:1] or "price" not in op.notes[0]


@settings(max_examples=30, deadline=None)
@given(price=st.floats(min_value=1e-3, max_value=1e5), seed=st.integers(0, 50))
def test_cost_times_throughput_is_the_price_whatever_the_data(price, seed):
    frame = serving_records([1, 2], lambda load, gamma: 1.2, n_prompts=4, seed=seed)
    table = operating(frame, price_per_hour=price, n_boot=50, seed=seed).table
    product = table["cost_per_mtok"] * table["system_tokens_per_s"]
    assert np.allclose(product, price / 3600 * 1e6)
    assert (table["cost_per_mtok_lo"] <= table["cost_per_mtok"] + 1e-9).all()
    assert (table["cost_per_mtok"] <= table["cost_per_mtok_hi"] + 1e-9).all()


def test_goodput_counts_the_requests_within_every_limit_over_the_wall_time():
    frame = pd.DataFrame(
        {"itl_s": [0.01, 0.05, np.nan, 0.02], "ttft_s": [0.1, 0.1, 0.1, 0.9], "latency_s": [1.0, 1.0, 1.0, 1.0]}
    )
    slos = [make_slo("itl", 90, "30ms"), make_slo("ttft", 50, "500ms")]
    # request 2 breaks the ITL limit, request 4 the TTFT one; a missing ITL (one-token request) breaks nothing
    assert good_requests(frame, slos).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert targets_kept(frame, slos) is False  # ITL p90 over {10, 50, 20} ms is 44 ms
    assert targets_kept(frame, [make_slo("ttft", 50, "500ms")]) is True
    batched = frame.assign(batch_id=["a", "a", "b", "b"], batch_wall_s=[1.5, 1.5, 2.5, 2.5])
    assert wall_time(batched) == 4.0 and wall_time(frame.assign(batch_id=None)) == 4.0  # Σ latency, one at a time


def test_goodput_table_and_answer(records):
    slos = slos_from_flags("40ms", None, [], latency_p90="2s")
    op = operating(records, slos=slos, n_boot=300)
    for _, row in op.table.iterrows():
        part = records[(records["concurrency"] == row["concurrency"]) & (records["gamma"] == row["gamma"])]
        good = good_requests(part, slos).sum()
        assert row["goodput"] == pytest.approx(good / wall_time(part))
        assert row["attainment"] == pytest.approx(good / len(part))
        assert row["goodput_lo"] <= row["goodput"] <= row["goodput_hi"]
    answers = goodput_answers(op, "concurrency")
    assert len(answers) == 1
    answer = answers[0]
    assert answer["best"]["gamma"] == 4 and answer["best"]["concurrency"] == 1  # 1.8× faster at one in flight
    assert answer["comparison"]["verdict"] == "confident: more good requests with speculation"
    assert "goodput within ITL p90 ≤ 40 ms, request latency p90 ≤ 2000 ms: most with ngram" in answer["text"]


def test_energy_per_token_and_the_energy_optimal_gamma_beside_the_fastest(records):
    op = operating(records, n_boot=300)
    assert op.energy_counter == "fake: 1 J/token"
    table = op.table.set_index(["concurrency", "gamma"])
    covered = 0
    for (_load, gamma), row in table.iterrows():
        assert row["joules_per_token"] == pytest.approx(JOULES[gamma], rel=0.05)
        covered += row["joules_per_token_lo"] < JOULES[gamma] < row["joules_per_token_hi"]
    assert covered >= 7  # nine 95 % intervals: 0.45 expected to miss (one does here, by chance)
    at_one = next(e for e in op.optimal if e["concurrency"] == 1)
    assert at_one["energy"]["gamma"] == 2 and at_one["energy"]["gamma_lo"] == at_one["energy"]["gamma_hi"] == 2
    assert at_one["throughput"]["gamma"] == 4 and at_one["throughput"]["share"] > 0.9
    assert "fewest joules per token at γ=2" in at_one["text"] and "most tokens/s at γ=4" in at_one["text"]
    at_sixteen = next(e for e in op.optimal if e["concurrency"] == 16)
    assert at_sixteen["throughput"]["gamma"] == 0  # 0.8× at load 16: no speculation is fastest


def test_no_energy_no_price_leave_columns_empty_and_say_why():
    frame = serving_records(LOADS, _truth, n_prompts=6)
    op = operating(frame, n_boot=50)
    assert op.table["joules_per_token"].isna().all() and op.table["cost_per_mtok"].isna().all()
    assert any("--price-per-hour" in n for n in op.notes) and any("no energy reading" in n for n in op.notes)
    assert op.table["goodput"].isna().all()  # no target: no goodput


def test_price_comes_from_the_flag_else_the_sweep_key(tmp_path, prompts_file):
    assert price_of(None, {"sweep": {"price_per_hour": 3.5}}) == 3.5
    assert price_of(1.0, {"sweep": {"price_per_hour": 3.5}}) == 1.0
    assert price_of(None, {"sweep": "old"}) is None
    raw = {"name": "p", "drafters": ["ngram"], "gammas": [2], "workloads": [f"jsonl:{prompts_file}:field=text:id=id"]}
    with_price = build_spec({**raw, "price_per_hour": 2.5})
    assert with_price.price_per_hour == 2.5 and with_price.to_dict()["price_per_hour"] == 2.5
    assert with_price.spec_hash == build_spec(raw).spec_hash  # what it costs is not what is measured


# ----------------------------------------------------------------------------- the commands


def test_recommend_goodput_and_cost_columns(tmp_path, records):
    folder = _write(tmp_path / "res", records, {"price_per_hour": 2.0})
    text = invoke(
        "recommend", folder, "--objective", "goodput", "--itl-p90", "40ms", "--latency-p90", "2s", "--bootstrap", "200"
    )
    assert text.exit_code == 0, text.output
    assert "What serving costs, per load" in text.stdout and "cost /Mtok" in text.stdout
    assert "goodput within ITL p90 ≤ 40 ms" in " ".join(text.stdout.split())
    data = json.loads(
        invoke(
            "recommend",
            folder,
            "--objective",
            "goodput",
            "--itl-p90",
            "40ms",
            "--json",
            "--bootstrap",
            "100",
            "--price-per-hour",
            "4",
        ).stdout
    )
    assert data["objective"] == "goodput" and data["price_per_hour"] == 4.0 and len(data["answers"]) == 1
    assert {"goodput", "goodput_lo", "cost_per_mtok", "cost_ratio", "joules_per_token"} <= set(data["table"][0])
    plain = json.loads(invoke("recommend", folder, "--json", "--bootstrap", "100").stdout)
    assert all(rec["operating"]["price_per_hour"] == 2.0 for rec in plain)  # the sweep's key
    assert all(len(rec["operating"]["table"]) == 3 for rec in plain)  # one load's configurations per scenario


@pytest.mark.parametrize(
    "args, message",
    [
        (["--objective", "goodput"], "--objective goodput needs a latency target"),
        (["--latency-p90", "2s"], "need --objective slo or --objective goodput"),
        (["--price-per-hour", "-1"], "--price-per-hour"),
        (["--objective", "goodput", "--latency-p90", "2"], "--latency-p90 takes a duration"),
    ],
)
def test_recommend_refuses_bad_operating_flags_in_one_line(tmp_path, records, args, message):
    folder = _write(tmp_path / "res", records)
    result = invoke("recommend", folder, *args)
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_report_has_a_cost_section_and_a_cost_against_load_figure(tmp_path, records):
    folder = _write(tmp_path / "res", records)
    result = invoke(
        "plot", folder, "--price-per-hour", "2.5", "--itl-p90", "40ms", "--bootstrap", "100", "--format", "png"
    )
    assert result.exit_code == 0, result.output
    assert (folder / "report" / "cost_vs_load.png").stat().st_size > 10_000
    html = (folder / "report" / "index.html").read_text()
    assert 'id="operating"' in html and "cost per million output tokens (at 2.5/hour)" in html
    assert "fewest joules per token" in html and "goodput within" in html


def test_without_a_price_or_energy_the_cost_figure_is_skipped_with_its_reason(tmp_path):
    folder = _write(tmp_path / "res", serving_records(LOADS, _truth, drafters=(NGRAM,), n_prompts=6))
    result = invoke("plot", folder, "--bootstrap", "50", "--format", "png")
    assert result.exit_code == 0, result.output
    assert "skipped cost_vs_load: nothing to draw: cost needs a price" in " ".join(result.output.split())

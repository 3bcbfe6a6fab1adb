"""TTFT and ITL percentiles (p50/p90/p99) per configuration and concurrency: `results show`, the
configuration table and the concurrency analysis, on synthetic serving records, against numpy."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from specbench.analysis.load.table import serving_table
from specbench.records.summary import LATENCY_COLUMNS, configuration_table, latency_percentiles
from tests.cli_helpers import invoke
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame, write_results

NGRAM = SyntheticDrafter(name="ngram", params={"n_min": 1, "n_max": 3}, model_free=True, gammas=(2, 4))
LEVELS = (1, 4)


def served_records(seed: int = 0) -> list[dict]:
    """Records as a serving backend writes them: two concurrency levels, a TTFT and a mean ITL per
    request from skewed distributions that widen with concurrency, and a few nulls (a one-token
    request has no ITL)."""
    rng = np.random.default_rng(seed)
    records = []
    for concurrency in LEVELS:
        batch = make_records([NGRAM], n_prompts=12, repeats=2, seed=seed + concurrency)
        for r in batch:
            r.update(
                backend="vllm",
                concurrency=concurrency,
                unit_id=f"{r['unit_id']}-c{concurrency}",
                ttft_s=float(rng.lognormal(np.log(0.05 * concurrency), 0.8)),
                itl_s=float(rng.lognormal(np.log(0.01 * concurrency), 0.5)),
            )
        records += batch
    records[3]["itl_s"] = None
    records[7]["ttft_s"] = float("nan")
    records[40]["itl_s"] = float("nan")
    return records


def numpy_percentiles(records: list[dict]) -> dict[tuple, dict[str, np.ndarray]]:
    """(drafter_label, gamma, concurrency) -> {"ttft": p50/p90/p99, "itl": ...} straight from the dicts."""
    values: dict = defaultdict(lambda: {"ttft": [], "itl": []})
    for r in records:
        for name in ("ttft", "itl"):
            v = r[f"{name}_s"]
            if v is not None and math.isfinite(v):
                values[(r["drafter_label"], r["gamma"], r["concurrency"])][name].append(v)
    return {key: {name: np.percentile(v, [50, 90, 99]) for name, v in by.items()} for key, by in values.items()}


def got(row, name: str) -> list[float]:
    return [row[f"{name}_p{p}_s"] for p in (50, 90, 99)]


def test_configuration_table_percentiles_match_numpy():
    records = served_records()
    expected = numpy_percentiles(records)
    table = configuration_table(records_frame(records), by=["concurrency"])
    assert len(table) == 3 * len(LEVELS)  # baseline, γ 2, γ 4 at each level
    for row in table.to_dict("records"):
        key = (row["drafter_label"], row["gamma"], row["concurrency"])
        for name in ("ttft", "itl"):
            np.testing.assert_allclose(got(row, name), expected[key][name], rtol=1e-12)


def test_percentiles_are_over_requests():
    # nine fast requests and one slow one: p50 is a fast request, p99 near the slow one; the mean is neither
    frame = pd.DataFrame({"ttft_s": [0.1] * 9 + [2.0], "itl_s": [0.01] * 9 + [0.5]})
    out = latency_percentiles(frame)
    np.testing.assert_allclose(got(out, "itl"), np.percentile(frame["itl_s"], [50, 90, 99]))
    assert out["itl_p50_s"] == pytest.approx(0.01) and out["itl_p99_s"] > 0.45
    assert out["itl_p50_s"] < frame["itl_s"].mean() < out["itl_p99_s"]
    nulls = latency_percentiles(pd.DataFrame({"ttft_s": [None, None], "itl_s": [float("nan"), 0.02]}))
    assert all(math.isnan(v) for v in got(nulls, "ttft")) and got(nulls, "itl") == [0.02] * 3
    assert all(math.isnan(v) for v in latency_percentiles(pd.DataFrame({"x": [1]})).values())  # old records


def test_replayed_rows_have_no_latency():
    records = served_records()
    replayed = [{**r, "mode": "replay", "unit_id": r["unit_id"] + "-r"} for r in records if r["gamma"] > 0]
    table = configuration_table(records_frame(records + replayed), by=["concurrency"])
    assert table[table["mode"] == "replay"][LATENCY_COLUMNS].isna().all().all()
    assert table[table["mode"] == "live"][LATENCY_COLUMNS].notna().all().all()


def test_serving_table_percentiles_per_level_with_the_baseline():
    records = served_records(seed=3)
    expected = numpy_percentiles(records)
    table = serving_table(records_frame(records), n_boot=50)
    assert sorted(zip(table["drafter_label"], table["gamma"], table["concurrency"])) == sorted(expected)
    for row in table.to_dict("records"):
        key = (row["drafter_label"], row["gamma"], row["concurrency"])
        assert row["requests"] == 24
        for name in ("ttft", "itl"):
            np.testing.assert_allclose(got(row, name), expected[key][name], rtol=1e-12)
            assert all(
                row[f"{name}_p{p}_lo_s"] <= row[f"{name}_p{p}_s"] <= row[f"{name}_p{p}_hi_s"] for p in (50, 90, 99)
            )
    json.dumps(table.replace({np.nan: None}).to_dict("records"))  # plain data


def test_no_latency_columns_no_latency_percentiles():
    frame = records_frame(served_records()).drop(columns=["ttft_s", "itl_s"])
    table = serving_table(frame, n_boot=0)
    assert table[LATENCY_COLUMNS].isna().all().all()
    assert table["latency_p50_s"].notna().all()  # request latency: prefill + decode of records without it


def test_results_show_reports_the_percentiles(tmp_path):
    records = served_records(seed=5)
    folder = write_results(
        tmp_path / "served",
        records,
        {"sweep": {"name": "served", "target": "synthetic-target"}, "device_name": "cpu", "dtype": "fp32"},
    )
    shown = invoke("results", "show", folder, "--json")
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["rows"]
    expected = numpy_percentiles(records)
    assert len(rows) == 3 * len(LEVELS)
    for row in rows:
        label = "none" if row["gamma"] == 0 else NGRAM.label
        key = (label, row["gamma"], row["concurrency"])
        for name in ("ttft", "itl"):
            np.testing.assert_allclose(got(row, name), expected[key][name], rtol=1e-12)
    text = invoke("results", "show", folder)
    assert text.exit_code == 0, text.output
    assert "TTFT" in text.stdout and "ITL" in text.stdout

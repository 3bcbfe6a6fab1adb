"""sweeps/strategies.yaml, cut to one prompt and a few tokens: nested speculation, the verify-length
schedules and expert-aware trees run from the one shipped sweep on the upcycled SmolLM2, every greedy
output equals the target's, and recommend and plot handle the axes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from specbench.records.store import load_records
from tests.cli_helpers import invoke, jsonl_workload, write_sweep_yaml

SWEEP = Path(__file__).resolve().parents[1] / "sweeps" / "strategies.yaml"


def test_the_strategies_sweep_runs_every_strategy_losslessly(tmp_path, prompts_file):
    raw = yaml.safe_load(SWEEP.read_text())
    raw.update(gammas=[2], max_new_tokens=6, ignore_eos=True, workloads=[jsonl_workload(prompts_file, count=1)])
    out = tmp_path / "res"
    result = invoke("sweep", write_sweep_yaml(tmp_path, raw), "--out", out)
    assert result.exit_code == 0, result.output
    df = load_records(out)
    assert df["output_sha1"].nunique() == 1, "greedy: every strategy reproduces the target's tokens"
    chains = df[(df["tree"] == "chain") & (df["gamma"] == 2)]
    assert set(chains["schedule"]) == {"fixed", "heuristic", "threshold(threshold=0.4)", "dspark"}
    nested = chains[chains["strategy"] == "nested"]
    assert len(nested) == 1 and nested["schedule"].iloc[0] == "fixed" and nested["prepared_drafts"].iloc[0] > 0
    trees = df[df["tree"] != "chain"]
    assert len(trees) == 2 and set(trees["schedule"]) == {"fixed"} and set(trees["strategy"]) == {"sequential"}
    assert (df[df["gamma"] > 0]["experts_per_verify"] > 0).all()  # the MoE target counts experts everywhere

    data = json.loads(invoke("recommend", out, "--json", "--bootstrap", "0").stdout)
    assert data and all("schedules" in d for d in data)
    report = invoke("plot", out, "--out", tmp_path / "report", "--format", "png")
    assert report.exit_code == 0, report.output
    drawn = {p.stem for p in (tmp_path / "report").glob("*.png")}
    assert {"nested_vs_sequential", "moe_experts"} <= drawn

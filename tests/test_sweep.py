"""`specbench sweep` and the results store, end to end on tiny models."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from specbench.records.store import COLUMNS, load_records, load_run_info
from tests.cli_helpers import assert_user_error, invoke, jsonl_workload, tiny_sweep_yaml


def sweep_yaml(tmp_path: Path, prompts_file: Path, **overrides) -> Path:
    workloads = [jsonl_workload(prompts_file), {"name": "mt-bench", "count": 2}]
    return tiny_sweep_yaml(tmp_path, prompts_file, **{"workloads": workloads, **overrides})


def test_small_grid_end_to_end(tmp_path, prompts_file):
    out = tmp_path / "res"
    # the other pytest worker shares a 2-core machine: interference is not what this test checks (the timing
    # protocol's tests do), so every unit's timing is kept and the speedups compare the same prompts
    quiet = {"warmup_s": 0, "order": "once", "retries": 0, "max_other_cores": 64}
    result = invoke("sweep", sweep_yaml(tmp_path, prompts_file, timing=quiet), "--out", out)
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(out / "records")  # plain pandas reads the folder
    df = load_records(out)
    assert list(df.columns) == list(COLUMNS)
    # 5 configurations (baseline + 2 drafters x 2 gammas) x (3 single-turn + 2 two-turn prompts -> 7 turns)
    assert len(df) == 5 * 7 and df["unit_id"].is_unique
    assert set(df[df.workload == "mt-bench"]["turn"]) == {1, 2}
    assert (df["accepted"] <= df["drafted"]).all()
    assert (df["new_tokens"] == 24).all()
    assert (df["tau"] - df["decode_tokens"] / df["rounds"]).abs().max() < 1e-12
    assert (df["decode_tokens"] == df["round_accepted"].apply(len) + df["round_accepted"].apply(sum)).all()
    assert (df["accept_hist"].apply(sum) == df["rounds"]).all()
    base = df[df.gamma == 0]
    assert (base["drafted"] == 0).all() and (base["tau"] == 1).all()
    # greedy is lossless: every configuration reproduces the baseline's tokens
    merged = df.merge(
        base[["workload", "prompt_id", "turn", "output_sha1"]],
        on=["workload", "prompt_id", "turn"],
        suffixes=("", "_base"),
    )
    assert (merged["output_sha1"] == merged["output_sha1_base"]).all()
    info = load_run_info(out)
    assert info["sweep"]["target"] == "tiny-random-llama" and info["versions"]["torch"]
    assert info["device_name"] and info["dtype"] == "fp32" and info["created"]

    from specbench.records.summary import configuration_table

    table = configuration_table(df)
    spec_rows = table[table.gamma > 0]
    assert (spec_rows["n_paired"] == spec_rows["n_units"]).all()  # speedups compare the same prompts
    assert spec_rows["speedup"].notna().all()

    shown = invoke("results", "show", out)
    assert shown.exit_code == 0 and "speedup" in shown.stdout and "mt-bench" in shown.stdout

    again = invoke("sweep", sweep_yaml(tmp_path, prompts_file), "--out", out)  # resume: nothing left
    assert again.exit_code == 0 and "0 unit(s) measured now" in again.stdout
    assert len(load_records(out)) == 35


def test_dry_run_loads_no_model(tmp_path, prompts_file):
    result = invoke("sweep", sweep_yaml(tmp_path, prompts_file), "--dry-run")
    assert result.exit_code == 0
    assert "35 units" in result.stdout and "target only" in result.stdout


def test_flags_alone_make_a_sweep(tmp_path, prompts_file):
    out = tmp_path / "flags"
    result = invoke(
        "sweep",
        "--name",
        "f",
        "--target",
        "tiny-random-llama",
        "--drafter",
        "ngram:n_max=2",
        "--gamma",
        "2",
        "--workload",
        f"jsonl:{prompts_file}:field=text",
        "--prompts",
        "2",
        "-n",
        "8",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    df = load_records(out)
    assert len(df) == 4 and set(df["drafter_label"]) == {"none", "ngram(n_max=2)"}


def test_shards_merge_into_the_full_grid(tmp_path, prompts_file):
    spec = sweep_yaml(tmp_path, prompts_file, drafters=[{"type": "ngram"}], gammas=[2])
    for i in range(2):
        assert invoke("sweep", spec, "--shard", f"{i}/2", "--out", tmp_path / f"s{i}").exit_code == 0
    full = tmp_path / "full"
    assert invoke("sweep", spec, "--out", full).exit_code == 0
    merged = tmp_path / "merged"
    result = invoke("results", "merge", tmp_path / "s0", tmp_path / "s1", "--out", merged)
    assert result.exit_code == 0, result.output
    assert set(load_records(merged)["unit_id"]) == set(load_records(full)["unit_id"])
    other = tmp_path / "other"
    assert (
        invoke("sweep", sweep_yaml(tmp_path, prompts_file, gammas=[1]), "--out", other, "--drafter", "ngram").exit_code
        == 0
    )
    assert_user_error(invoke("results", "merge", merged, other, "--out", tmp_path / "bad"), "different sweep specs")


def test_kill_and_resume_loses_nothing(tmp_path, prompts_file):
    spec = sweep_yaml(tmp_path, prompts_file, max_new_tokens=48)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "specbench", "sweep", str(spec), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        done = list((out / "records").glob("unit-*.parquet")) if (out / "records").exists() else []
        if len(done) >= 6:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = load_records(out)
    assert 6 <= len(partial) < 35, "the kill must land mid-sweep"
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    resumed = load_records(out)
    reference = tmp_path / "straight"
    assert invoke("sweep", spec, "--out", reference).exit_code == 0
    assert sorted(resumed["unit_id"]) == sorted(load_records(reference)["unit_id"])
    assert resumed["unit_id"].is_unique
    assert not [p for p in (out / "records").iterdir() if p.name.startswith(".")], "no temporary files left"
    # greedy outputs do not depend on being interrupted
    both = resumed.merge(load_records(reference), on="unit_id", suffixes=("", "_ref"))
    assert (both["output_sha1"] == both["output_sha1_ref"]).all()


@pytest.mark.parametrize(
    "content,needles",
    [
        ("name: x\ngammas: [1, 2\n", ["malformed YAML"]),
        ("- just\n- a list\n", ["mapping"]),
        ("name: x\ngamas: [1]\nworkloads: [mt-bench]\ndrafters: [ngram]\n", ["unknown key 'gamas'", "gammas"]),
        ("name: x\nworkloads: [mt-bench]\ndrafters: [{type: ngram}]\ngammas: [0]\n", ["empty grid"]),
        ("name: x\nworkloads: [mt-bench]\ngammas: [2]\n", ["empty grid"]),
        ("name: x\nworkloads: [mt-bnch]\ndrafters: [ngram]\n", ["unknown workload 'mt-bnch'", "mt-bench"]),
        ("name: x\nworkloads: [mt-bench]\ndrafters: [{type: medusaa}]\n", ["unknown drafter"]),
        ("name: x\nworkloads: [mt-bench]\ndrafters: [ngram]\ngammas: [-1]\n", ["gammas", "from 0 to 128"]),
        ("name: x\nworkloads: [mt-bench]\ndrafters: [ngram]\ntrees: [pyramid]\n", ["tree shape 'pyramid'"]),
    ],
)
def test_bad_sweep_files(tmp_path, content, needles):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    assert_user_error(invoke("sweep", path, "--out", tmp_path / "o"), *needles)


def test_missing_file_and_conflicting_folder(tmp_path, prompts_file):
    assert_user_error(invoke("sweep", tmp_path / "nope.yaml"), "not found")
    out = tmp_path / "c"
    assert (
        invoke(
            "sweep", sweep_yaml(tmp_path, prompts_file, gammas=[1], drafters=["ngram"]), "--out", out, "-n", "4"
        ).exit_code
        == 0
    )
    assert_user_error(
        invoke("sweep", sweep_yaml(tmp_path, prompts_file, gammas=[2], drafters=["ngram"]), "--out", out, "-n", "4"),
        "different sweep spec",
        "--force",
    )
    forced = invoke(
        "sweep", sweep_yaml(tmp_path, prompts_file, gammas=[2], drafters=["ngram"]), "--out", out, "-n", "4", "--force"
    )
    assert forced.exit_code == 0
    assert set(load_records(out)["gamma"]) == {0, 2}, "forcing sets the old spec's records aside"
    assert list((out / "records").glob("old-*/*.parquet")), "... in records/old-SPECHASH/"
    assert_user_error(invoke("results", "show", tmp_path / "missing"), "not found")


def test_schema_document_lists_every_column():
    text = (Path(__file__).resolve().parents[1] / "docs" / "results-schema.md").read_text()
    missing = [c for c in COLUMNS if f"`{c}`" not in text]
    assert not missing, f"docs/results-schema.md lacks {missing}"

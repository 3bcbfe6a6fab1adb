"""`specbench compare OLD NEW`: the regression gate. Synthetic folders with a known truth (equivalent, a planted
acceptance or speed regression, too few prompts to tell), real sweeps of the own engine (the same spec twice; a
weaker drafter checkpoint), and bad input."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.cli.shell.exit_codes import BAD_INPUT, INCONCLUSIVE_CODE, OK, REGRESSED_CODE
from specbench.records.store import ResultsStore
from tests.cli_helpers import TINY_SWEEP, invoke, jsonl_workload, write_sweep_yaml
from tests.synthetic_results import SyntheticDrafter, make_records, records_frame

DRAFTER = SyntheticDrafter(alpha=0.7, gammas=(3,), draft_step_s=0.002)
PROMPTS = 320  # enough for a 90 % interval of ±2-3 %: a true equality then lies inside the 5 % margin


def _folder(path, drafter=DRAFTER, *, seed: int, n_prompts: int = PROMPTS, info: dict | None = None, backend=None):
    records = make_records([drafter], n_prompts=n_prompts, seed=seed, max_new_tokens=64)
    for r in records:
        r["backend"] = backend
    run_info = {
        "sweep": {"name": "synthetic"},
        "versions": {"specbench": "0.1.0", "torch": "2.13.0"},
        "device_name": "cpu",
        "models": {"synthetic-target": "a" * 64},
        **(info or {}),
    }
    store = ResultsStore(path)  # one part file: a unit file per record would take a minute here
    store.write_run_info(run_info)
    store.replace_records(records_frame(records))
    return path


def _compare(old, new, *extra):
    return invoke("compare", old, new, *extra)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Synthetic folders, each made once for the module: ``old``; ``same`` (the same truth, other noise);
    ``weaker`` (α 0.7 → 0.5); ``slower`` (each draft step 6× dearer)."""
    root = tmp_path_factory.mktemp("compare")
    made = {}

    def get(name: str):
        if name not in made:
            drafter = {"weaker": replace(DRAFTER, alpha=0.5), "slower": replace(DRAFTER, draft_step_s=0.012)}.get(
                name, DRAFTER
            )
            made[name] = _folder(root / name, drafter, seed=1 if name == "old" else 2)
        return made[name]

    return get


def test_the_same_truth_measured_twice_is_equivalent(folders):
    old, new = folders("old"), folders("same")
    result = _compare(old, new, "--json")
    assert result.exit_code == OK, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "equivalent" and data["regressions"] == [] and data["margin"] == 0.05
    assert len(data["configurations"]) == 1  # γ 3
    for row in data["configurations"]:
        for name in ("tau", "alpha", "speedup"):
            q = row["quantities"][name]
            assert q["state"] == "equivalent" and 0.95 <= q["lo"] <= q["ratio"] <= q["hi"] <= 1.05, (name, q)


def test_a_planted_acceptance_regression_is_flagged_with_its_exit_code(folders):
    result = _compare(folders("old"), folders("weaker"))
    assert result.exit_code == REGRESSED_CODE, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("specbench: regression:")]
    # τ and α (and the speedup, which falls with them): one line each
    assert len(lines) == 3 and [line.split("γ=3: ")[1].split(" ")[0] for line in lines] == ["tau", "alpha", "speedup"]
    assert "verdict: regressed (exit 3)" in result.stdout


def test_a_slower_drafter_regresses_the_speedup_only(folders):
    old, new = folders("old"), folders("slower")
    data = json.loads(_compare(old, new, "--json").stdout)
    assert data["verdict"] == "regressed"
    for row in data["configurations"]:
        states = {name: q["state"] for name, q in row["quantities"].items()}
        assert states == {"tau": "equivalent", "alpha": "equivalent", "speedup": "regressed"}, states
    gated = _compare(old, new, "--quantities", "tau,alpha")  # acceptance alone: the speedup is shown, not gated
    assert gated.exit_code == OK, gated.output
    assert "not in the verdict: speedup" in gated.stdout


def test_too_few_prompts_is_inconclusive(tmp_path):
    old, new = _folder(tmp_path / "old", seed=1, n_prompts=3), _folder(tmp_path / "new", seed=2, n_prompts=3)
    result = _compare(old, new)
    assert result.exit_code == INCONCLUSIVE_CODE, result.output
    assert "verdict: inconclusive (exit 4)" in result.stdout


def test_it_names_what_changed(tmp_path):
    old = _folder(tmp_path / "old", seed=1, backend="vllm", n_prompts=3)
    new = _folder(
        tmp_path / "new",
        seed=2,
        backend="vllm",
        n_prompts=3,
        info={
            "versions": {"specbench": "0.2.0", "torch": "2.13.0"},
            "device_name": "NVIDIA H200",
            "models": {"synthetic-target": "b" * 64},
        },
    )
    (old / "backend.json").write_text(json.dumps({"backend": "vllm", "vllm_version": "0.31.0"}))
    (new / "backend.json").write_text(json.dumps({"backend": "vllm", "vllm_version": "0.32.0"}))
    data = json.loads(_compare(old, new, "--json").stdout)
    assert data["same_engine"] is False
    assert data["old"]["engine_version"] == "0.31.0" and data["new"]["text"].startswith("vllm (0.32.0) on NVIDIA H200")
    assert data["changes"] == [
        "engine: 0.31.0 → 0.32.0",
        "specbench: 0.1.0 → 0.2.0",
        "machine: cpu → NVIDIA H200",
        f"weights of synthetic-target: {'a' * 12} → {'b' * 12}",
    ]


def test_folders_of_different_sweeps_or_broken_files_are_one_line_exit_2(tmp_path, folders):
    old = folders("old")
    other = _folder(tmp_path / "other", replace(DRAFTER, gammas=(2, 6)), seed=2, n_prompts=3)
    result = _compare(old, other)
    assert result.exit_code == BAD_INPUT and len(result.stderr.strip().splitlines()) == 1
    assert "do not hold the same workloads" in result.stderr and "only in OLD" in result.stderr
    assert "only in NEW" in result.stderr
    broken = tmp_path / "broken"
    shutil.copytree(old, broken)
    next((broken / "records").glob("*.parquet")).write_bytes(b"not parquet")
    result = _compare(old, broken)
    assert result.exit_code == BAD_INPUT and "broken results file" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    result = _compare(old, tmp_path / "missing")
    assert result.exit_code == BAD_INPUT and "not found" in result.stderr
    result = _compare(old, old, "--margin", "0")
    assert result.exit_code == BAD_INPUT
    result = _compare(old, old, "--quantities", "tau,speed")
    assert result.exit_code == BAD_INPUT and "--quantities takes some of tau, alpha, speedup" in result.stderr


# ----------------------------------------------------------------------------- real sweeps of the own engine


def _sweep(tmp_path, prompts_file, name: str, draft_model: str):
    """The tiny target with a draft model at γ 3 on 2 prompts; timing tolerant of a busy machine."""
    spec = {
        **TINY_SWEEP,
        "drafters": [{"type": "draft-model", "params": {"model": draft_model}}],
        "gammas": [3],
        "max_new_tokens": 12,
        "workloads": [jsonl_workload(prompts_file, 2)],
        "timing": {"warmup_s": 0, "order": "once", "retries": 0, "max_other_cores": 64},
    }
    folder = tmp_path / name
    result = invoke("sweep", write_sweep_yaml(tmp_path, spec), "--out", folder)
    assert result.exit_code == 0, result.output
    return folder


def test_real_sweeps_the_same_spec_passes_and_a_weaker_drafter_checkpoint_fails(tmp_path, prompts_file):
    """The target drafting for itself accepts every draft (τ = γ + 1); a random drafter checkpoint almost none."""
    first = _sweep(tmp_path, prompts_file, "first", "tiny-random-llama")
    again = _sweep(tmp_path, prompts_file, "again", "tiny-random-llama")
    weaker = _sweep(tmp_path, prompts_file, "weaker", "tiny-random-llama-draft")
    same = _compare(first, again, "--json", "--quantities", "tau,alpha")  # two timings of a busy machine differ
    assert same.exit_code == OK, same.output
    data = json.loads(same.stdout)
    assert data["same_engine"] is True and data["changes"] == []
    for name in ("tau", "alpha"):
        assert data["configurations"][0]["quantities"][name]["state"] == "identical"  # greedy, same engine
    result = _compare(first, weaker)
    assert result.exit_code == REGRESSED_CODE, result.output
    assert (
        "changed: drafter: draft-model(model=tiny-random-llama) → draft-model(model=tiny-random-llama-draft)"
        in result.stdout
    )
    regressions = [line for line in result.stderr.splitlines() if line.startswith("specbench: regression:")]
    tau = [line for line in regressions if ": tau " in line]
    assert len(tau) == 1 and float(tau[0].split(": tau ")[1].split(" ")[0]) > 3, regressions  # τ ≈ γ + 1 before


@pytest.mark.parametrize("flag", ["--json", None])
def test_help_documents_the_exit_codes(flag):
    result = invoke("compare", "--help")
    assert result.exit_code == 0
    assert "3 NEW regressed beyond the margin" in " ".join(result.output.split())


# ----------------------------------------------------------------------------- properties of the test itself


def _side_of(records: list[dict], name: str):
    from specbench.analysis.compare import side

    return side(name, records_frame(records), {"models": {"synthetic-target": "a" * 64}}, {})


@settings(max_examples=8, deadline=None)
@given(
    seed_a=st.integers(0, 10_000),
    seed_b=st.integers(0, 10_000),
    alpha=st.floats(0.2, 0.9),
    step=st.floats(0.0005, 0.02),
)
def test_a_folder_equals_itself_and_a_regression_reads_back_as_an_improvement(seed_a, seed_b, alpha, step):
    from specbench.analysis.compare import IDENTICAL, IMPROVED, REGRESSED, compare

    a = make_records([DRAFTER], n_prompts=6, seed=seed_a, max_new_tokens=16)
    b = make_records([replace(DRAFTER, alpha=alpha, draft_step_s=step)], n_prompts=6, seed=seed_b, max_new_tokens=16)
    itself = compare(_side_of(a, "a"), _side_of(a, "a"), n_boot=100)
    assert itself.verdict == "equivalent"
    assert {q["state"] for r in itself.rows for q in r["quantities"].values()} <= {IDENTICAL, "equivalent"}
    forward = compare(_side_of(a, "a"), _side_of(b, "b"), n_boot=100, seed=1)
    backward = compare(_side_of(b, "b"), _side_of(a, "a"), n_boot=100, seed=1)
    for row, back in zip(forward.rows, backward.rows):
        for name, q in row["quantities"].items():
            if q["state"] == REGRESSED:  # NEW worse than OLD beyond the margin: OLD better than NEW beyond it
                assert back["quantities"][name]["state"] == IMPROVED, (name, q, back["quantities"][name])

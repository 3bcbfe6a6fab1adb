"""`results merge` checks what it merges and carries the stopping history of adaptive shards.

The root fix: `specbench.records.merge` checks each source's kind (a cost profile is not sweep results), spec,
device and run.json ``shards`` before anything is written, refuses a mix of adaptive and fixed-grid folders,
and merges the shards' ``adaptive.json`` (`merge_histories`: the planned looks summed), so that `recommend`
adjusts a merged adaptive sweep's verdict for its looks as it did for each shard.

* the property: any split of an adaptive sweep's records into shards, each with its stopping history planned
  over its share of the prompts, merges into the records and the planned looks of the whole;
* the end-to-end case: a sharded adaptive sweep (two shards, a deterministic fake vLLM engine) merged gives
  the same verdict text as the same sweep unsharded.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from specbench.records.adaptive_history import read_history, write_history
from specbench.records.store import load_records
from tests.cli_helpers import assert_user_error, invoke, write_sweep_yaml
from tests.synthetic_results import SyntheticDrafter, make_records, write_results
from tests.test_fuzz import fuzz


def _history(prompts: int, looks: int = 3) -> dict:
    """A stopping history of one workload whose looks are planned over ``prompts`` prompts."""
    planned = sorted({max(1, round(prompts * (k + 1) / looks)) for k in range(looks)})
    return {
        "plan": {"batch": 2},
        "elapsed_s": 1.0,
        "finished": True,
        "workloads": {
            "mt-bench": {
                "planned": planned,
                "calibration": [],
                "status": "decided",
                "dropped": [],
                "looks": [{"look": i + 1, "prompts": n, "answer": "yes"} for i, n in enumerate(planned)],
            }
        },
    }


def _folder(path: Path, records: list[dict], history: dict | None, **info) -> Path:
    write_results(path, records, {"sweep": "s", "spec_hash": "h", "device_name": "cpu", **info})
    if history is not None:
        write_history(path, history)
    return path


_COUNTER = iter(range(10**9))
_TMP = Path(__import__("tempfile").mkdtemp(prefix="specbench-merge-"))


@fuzz(st.tuples(st.integers(2, 4), st.integers(0, 2**16), st.integers(2, 3)), short=6, long=120)
def _shards_merge(case):
    shards, seed, looks = case
    base = _TMP / f"case-{next(_COUNTER)}"
    records = make_records([SyntheticDrafter(gammas=(2,))], n_prompts=12, max_new_tokens=16, seed=seed)
    prompts = sorted({r["prompt_id"] for r in records})
    owner = dict(zip(prompts, np.random.default_rng(seed).permutation(np.arange(len(prompts)) % shards)))
    folders = []
    for k in range(shards):
        mine = [r for r in records if owner[r["prompt_id"]] == k]
        share = len({r["prompt_id"] for r in mine})
        folders.append(_folder(base / f"shard{k}", mine, _history(share, looks), shards=[[k, shards]]))
    result = invoke("results", "merge", *folders, "--out", base / "merged")
    assert result.exit_code == 0, result.output
    merged = load_records(base / "merged")
    assert sorted(merged["unit_id"]) == sorted(r["unit_id"] for r in records)
    history = read_history(base / "merged")
    assert history is not None, "the merged folder lost the shards' stopping history"
    shares = [len({p for p in prompts if owner[p] == k}) for k in range(shards)]
    planned = [
        sum(
            _history(n, looks)["workloads"]["mt-bench"]["planned"][
                min(i, len(_history(n, looks)["workloads"]["mt-bench"]["planned"]) - 1)
            ]
            for n in shares
        )
        for i in range(max(len(_history(n, looks)["workloads"]["mt-bench"]["planned"]) for n in shares))
    ]
    assert history["workloads"]["mt-bench"]["planned"] == planned
    assert planned[-1] == len(prompts)  # the last look of the merged plan covers every prompt
    info = json.loads((base / "merged" / "run.json").read_text())
    assert sorted(map(tuple, info["shards"])) == [(k, shards) for k in range(shards)]


test_shards_of_an_adaptive_sweep_merge_into_its_records_and_its_planned_looks, test_shards_merge_long = _shards_merge


# ----------------------------------------------------------------------------- what a merge refuses


@pytest.fixture()
def two_folders(tmp_path):
    records = make_records([SyntheticDrafter(gammas=(2,))], n_prompts=4, max_new_tokens=16)
    half = len(records) // 2
    return (
        _folder(tmp_path / "a", records[:half], None, shards=[[0, 2]]),
        _folder(tmp_path / "b", records[half:], None, shards=[[1, 2]]),
    )


def _profile_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"kind": "specbench-cost-profile", "schema_version": 1}))
    return path


def test_a_cost_profile_is_refused_as_a_source_and_as_the_output(tmp_path, two_folders):
    a, b = two_folders
    profile = _profile_folder(tmp_path / "profile")
    assert_user_error(invoke("results", "merge", a, profile, "--out", tmp_path / "m1"), "holds a cost profile")
    assert not (tmp_path / "m1" / "run.json").exists()
    result = invoke("results", "merge", a, b, "--out", profile)
    assert_user_error(result, "holds a cost profile")
    assert "different sweep specs" not in result.stderr


@pytest.mark.parametrize("shards,ok", [(None, True), ([], True), ("x", False), ([[0]], False), ([[3, 2]], False)])
def test_shards_in_run_json_are_checked(tmp_path, two_folders, shards, ok):
    a, b = two_folders
    info = json.loads((a / "run.json").read_text())
    info["shards"] = shards
    (a / "run.json").write_text(json.dumps(info))
    result = invoke("results", "merge", a, b, "--out", tmp_path / "m")
    if ok:
        assert result.exit_code == 0, result.output
    else:
        assert_user_error(result, "'shards' must be a list of [index, count] pairs")


def test_adaptive_and_fixed_grid_folders_do_not_merge(tmp_path, two_folders):
    a, b = two_folders
    write_history(a, _history(2))
    assert_user_error(invoke("results", "merge", a, b, "--out", tmp_path / "m"), "adaptive and fixed-grid")


# ----------------------------------------------------------------------------- a real sharded adaptive sweep


def _verdicts(folder: Path) -> list[dict]:
    """Each workload's verdict as `recommend --json` gives it: the answer, its text, the configuration it names,
    and the looks it was adjusted for."""
    result = invoke("recommend", folder, "--bootstrap", 50, "--json")
    assert result.exit_code == 0, result.output
    return [
        {
            "workload": r["workload"],
            "verdict": r["verdict"],
            "recommended": r["recommended"],
            "decision": (r["decision"] or {}).get("text"),
            "planned": (r["stopping_history"] or {}).get("planned"),
        }
        for r in json.loads(result.stdout)
    ]


def test_a_sharded_adaptive_sweep_merged_gives_the_unsharded_verdict(tmp_path, monkeypatch):
    """The shards plan their share of the unsharded sweep's looks (`measure.run.adaptive.shard_looks`), the merge carries
    that plan (`planned_whole`), and `recommend` on the merged folder adjusts for the same two looks."""
    monkeypatch.setenv("SPECBENCH_VLLM_WORKER_ENGINE", "tests.fake_vllm_engine:FakeEngine")
    monkeypatch.setenv("PYTHONPATH", os.getcwd())
    spec = write_sweep_yaml(
        tmp_path,
        {
            "name": "shards",
            "target": "smollm2-135m",
            "drafters": ["ngram"],
            "gammas": [2],
            "workloads": [{"name": "mt-bench", "count": 3}],
            "max_new_tokens": 12,
            "backend": {"name": "vllm", "python": sys.executable},
            # looks at 2 and 3 prompts: the unsharded sweep can tell only at its last look (3 prompts is the least a
            # verdict rests on), so every shard runs its share of both looks too, and the union is the same records
            "adaptive": {"first": 2, "batch": 1, "max_prompts": 3},
            "timing": {"max_other_cores": 4096, "warmup_s": 0},
        },
    )
    whole = tmp_path / "whole"
    assert invoke("sweep", spec, "--out", whole).exit_code == 0
    shards = []
    for k in range(2):
        out = tmp_path / f"shard{k}"
        result = invoke("sweep", spec, "--shard", f"{k}/2", "--out", out)
        assert result.exit_code == 0, result.output
        shards.append(out)
    merged = tmp_path / "merged"
    assert invoke("results", "merge", *shards, "--out", merged).exit_code == 0
    assert read_history(merged) is not None
    verdicts = _verdicts(whole)
    assert verdicts[0]["planned"] == [2, 3] and "2 planned looks" in verdicts[0]["verdict"], verdicts
    assert _verdicts(merged) == verdicts

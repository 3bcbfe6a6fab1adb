"""A results folder knows what it is, and every command that reads two folders asks one function whether they go
together (`specbench.records.identity`: `identify`, `check_together`).

* `results merge SWEEP SWEEP/confirm` is refused in one line: a confirmation carries the sweep's spec hash, yet
  its fresh prompts are never a shard (before, the merge was accepted and `recommend` counted them as sweep
  prompts);
* `compare` on two folders that differ in any spec key that changes what is generated exits 2 naming the key
  (a property over every generation key and backend option; before, a different max_new_tokens said
  "nothing recorded differs" and exited 4);
* a merged run.json's dates are dates or null, never the text "None";
* old folders without the role key still read: the role is inferred;
* `confirm` refuses a folder that is not a sweep's, and a RESULTS/confirm that holds something else.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import strategies as st

from specbench.records import identity
from specbench.records.identity import CONFIRMATION, MERGED, PROFILE, SHARD, SWEEP, identify
from tests.cli_helpers import assert_user_error, invoke
from tests.synthetic_results import SyntheticDrafter, make_records, write_results
from tests.test_fuzz import fuzz

SPEC = {
    "name": "s",
    "target": "tiny-random-llama",
    "dtype": "fp32",
    "seed": 0,
    "max_new_tokens": 24,
    "ignore_eos": True,
    "temperatures": [0.0],
    "top_p": 1.0,
    "top_k": 0,
    "compile": False,
    "kernels": "auto",
    "workloads": [{"name": "mt-bench", "count": 4, "split": "eval"}],
}


def _records(seed: int = 0, n_prompts: int = 4):
    return make_records([SyntheticDrafter(gammas=(2,))], n_prompts=n_prompts, max_new_tokens=16, seed=seed)


def _folder(path: Path, records=None, **info) -> Path:
    run = {"kind": "sweep", "sweep": dict(SPEC), "spec_hash": "h", "device_name": "cpu", **info}
    return write_results(path, _records() if records is None else records, run)


def _confirmation(sweep: Path, **info) -> Path:
    """RESULTS/confirm as `specbench confirm` leaves it: run.json of kind sweep with the sweep's spec hash, records
    of fresh prompts, and its state file."""
    folder = _folder(sweep / "confirm", _records(seed=9), **info)
    (folder / identity.CONFIRMATION_STATE).write_text(json.dumps({"targets": {}}))
    return folder


# ----------------------------------------------------------------------------- merge


@pytest.mark.parametrize("recorded", [None, CONFIRMATION, SWEEP, SHARD])
def test_merging_a_confirmation_into_its_sweep_is_refused_in_one_line(tmp_path, recorded):
    """Whatever run.json says (old folders have no role; a damaged one may say sweep), a confirmation's state file
    makes it one, and a confirmation is never a shard."""
    sweep = _folder(tmp_path / "sweep")
    extra = {} if recorded is None else {"role": recorded}
    confirm = _confirmation(sweep, **extra)
    result = invoke("results", "merge", sweep, confirm, "--out", tmp_path / "merged")
    assert_user_error(result, "confirmation", "never a shard")
    assert not (tmp_path / "merged" / "run.json").exists()
    result = invoke("results", "merge", confirm, "--out", sweep)  # into the sweep: the same refusal
    assert_user_error(result, "confirmation")


def test_a_recorded_confirmation_without_its_state_file_is_refused_too(tmp_path):
    sweep = _folder(tmp_path / "sweep")
    confirm = _folder(sweep / "confirm", _records(seed=9), role=CONFIRMATION)
    assert_user_error(invoke("results", "merge", sweep, confirm, "--out", tmp_path / "m"), "confirmation")


_DATES = st.sampled_from([None, "absent", "", 7, "2026-01-02T00:00:00+00:00", "2026-03-04T00:00:00+00:00"])
_MERGE_TMP = Path(tempfile.mkdtemp(prefix="specbench-identity-"))
_MERGE_CASES = iter(range(10**9))


@fuzz(st.tuples(_DATES, _DATES, _DATES, _DATES), short=4, long=40)
def _merged_dates(case):
    base = _MERGE_TMP / f"case-{next(_MERGE_CASES)}"
    records = _records()
    half = len(records) // 2
    folders = []
    for k, (created, updated) in enumerate((case[:2], case[2:])):
        dates = {key: value for key, value in (("created", created), ("updated", updated)) if value != "absent"}
        part = records[:half] if k == 0 else records[half:]
        folders.append(_folder(base / f"part{k}", part, shards=[[k, 2]], **dates))
    result = invoke("results", "merge", *folders, "--out", base / "merged")
    assert result.exit_code == 0, result.output
    info = json.loads((base / "merged" / "run.json").read_text())
    assert info["role"] == MERGED and identify(base / "merged").role == MERGED
    for key, pick in (("created", min), ("updated", max)):
        given = [v for v in (case[0], case[2]) if key == "created"] + [
            v for v in (case[1], case[3]) if key == "updated"
        ]
        dates = [v for v in given if isinstance(v, str) and v and v != "absent"]
        assert info[key] == (pick(dates) if dates else None), (key, case, info[key])
        assert info[key] != "None"


test_a_merged_run_json_keeps_dates_or_null_never_the_text_none, test_merged_dates_long = _merged_dates


# ----------------------------------------------------------------------------- compare


_COMPARE_TMP = Path(tempfile.mkdtemp(prefix="specbench-identity-compare-"))

# one changed value per generation key, and per backend option that changes what is generated
CHANGES = {
    "target": "tiny-random-qwen2",
    "dtype": "bf16",
    "seed": 1,
    "max_new_tokens": 32,
    "ignore_eos": False,
    "temperatures": [0.0, 0.7],
    "top_p": 0.9,
    "top_k": 40,
    "compile": True,
    "kernels": "torch",
    "layout": "blocked",
    "workloads": [{"name": "mt-bench", "count": 4, "split": "eval", "max_new_tokens": 8}],
    **{f"backend.{option}": "other" for option in identity.GENERATION_OPTIONS},
}


def _pair() -> tuple[Path, Path]:
    old, new = _COMPARE_TMP / "old", _COMPARE_TMP / "new"
    if not old.exists():
        _folder(old, _records(n_prompts=3))
        shutil.copytree(old, new)
    return old, new


@fuzz(st.sampled_from(sorted(CHANGES)), short=6, long=len(CHANGES) * 2)
def _one_generation_key_changed(key):
    old, new = _pair()
    spec = json.loads(json.dumps(SPEC))
    if key.startswith("backend."):  # old: vllm-server with no options (the name itself: the own engine, unset)
        base = {} if key == "backend.name" else {"backend": {"name": "vllm-server"}}
        spec["backend"] = {**base.get("backend", {}), key.split(".", 1)[1]: CHANGES[key]}
        (old / "run.json").write_text(json.dumps({**_info(old), "sweep": {**SPEC, **base}}))
    else:
        spec[key] = CHANGES[key]
        (old / "run.json").write_text(json.dumps({**_info(old), "sweep": SPEC}))
    (new / "run.json").write_text(json.dumps({**_info(new), "sweep": spec, "spec_hash": "other"}))
    result = invoke("compare", old, new)
    assert_user_error(result, "generated differently", f"{key} (")


def _info(folder: Path) -> dict:
    return json.loads((folder / "run.json").read_text())


test_compare_names_any_generation_key_that_differs, test_generation_keys_long = _one_generation_key_changed


def test_compare_accepts_what_does_not_change_generation(tmp_path):
    """Another drafter checkpoint, other prompt counts, another server address or engine install: the same
    generation, so compare goes on to its verdict (never exit 2)."""
    old = _folder(tmp_path / "old", _records(n_prompts=3), sweep={**SPEC, "backend": {"name": "vllm", "venv": "a"}})
    spec = {**SPEC, "backend": {"name": "vllm", "venv": "b"}, "workloads": [{**SPEC["workloads"][0], "count": 9}]}
    new = _folder(tmp_path / "new", _records(seed=1, n_prompts=3), sweep=spec, spec_hash="other")
    result = invoke("compare", old, new)
    assert result.exit_code in (0, 3, 4), result.output


def test_compare_refuses_a_confirmation_against_a_sweep_and_a_profile(tmp_path):
    sweep = _folder(tmp_path / "sweep")
    confirm = _confirmation(sweep)
    assert_user_error(invoke("compare", sweep, confirm), "confirmation", "compare runs of one sweep spec")
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "run.json").write_text(json.dumps({"kind": "specbench-cost-profile", "schema_version": 1}))
    result = invoke("compare", sweep, profile)
    assert result.exit_code == 2 and "Traceback" not in result.output


# ----------------------------------------------------------------------------- what a folder is


def test_old_folders_without_a_role_are_identified(tmp_path):
    sweep = _folder(tmp_path / "sweep", shards=[[0, 1]])
    assert identify(sweep).role == SWEEP and identify(sweep).inferred
    assert identify(_folder(tmp_path / "shard", shards=[[1, 3]])).role == SHARD
    assert identify(_folder(tmp_path / "both", shards=[[0, 2], [1, 2]])).role == SWEEP
    assert identify(_folder(tmp_path / "merged", merged_from=["a", "b"])).role == MERGED
    assert identify(_confirmation(sweep, shards=[[0, 2]])).role == CONFIRMATION  # never a shard
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "run.json").write_text(json.dumps({"kind": "specbench-cost-profile", "schema_version": 1}))
    assert identify(profile).role == PROFILE
    recorded = identify(_folder(tmp_path / "recorded", role=SHARD))
    assert recorded.role == SHARD and not recorded.inferred


def test_a_role_that_is_not_one_is_one_line(tmp_path):
    folder = _folder(tmp_path / "odd", role="banana")
    assert_user_error(invoke("results", "merge", folder, "--out", tmp_path / "m"), "'role' must be one of")


def test_every_backend_option_is_classified():
    """A new backend option must say whether it changes what is generated: compare's matching reads the list."""
    from specbench.backends.options import BACKEND_OPTIONS

    setup = {
        "url", "baseline_url", "api_key", "timeout_s", "warmup", "port", "venv", "python", "binary",
        "server_command", "log_dir", "env", "startup_timeout_s", "stop_grace_s", "engines_kept", "warmup_tokens",
        "threads", "verify_tokens", "max_num_seqs", "kv_cache_gib", "gpu_memory_utilization",
        "tensor_parallel_size", "draft_tensor_parallel_size", "pipeline_parallel_size",
        "distributed_executor_backend", "parallel",
    }  # fmt: skip
    options = {name for table in BACKEND_OPTIONS.values() for name in table}
    unclassified = options - setup - set(identity.GENERATION_OPTIONS)
    assert not unclassified, f"say whether these change what is generated: {sorted(unclassified)}"


def test_the_state_file_name_is_the_confirmations():
    from specbench.analysis.recommendation.confirm_report import STATE_FILE

    assert identity.CONFIRMATION_STATE == STATE_FILE


def test_confirm_refuses_a_confirmation_and_a_confirm_folder_that_holds_a_sweep(tmp_path):
    sweep = _folder(tmp_path / "sweep")
    confirm = _confirmation(sweep)
    assert_user_error(invoke("confirm", confirm, "--dry-run"), "confirmation", "sweep's folder")
    other = _folder(tmp_path / "other")
    _folder(other / "confirm", _records(seed=3))  # a sweep someone wrote there with --out
    assert_user_error(invoke("confirm", other, "--force"), "not a confirmation", "move it away")

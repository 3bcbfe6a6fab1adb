"""The vLLM backend without vLLM: worker protocol, counter mapping, grouping, spec keys, registry.

The worker runs with a fake engine (tests/fake_vllm_engine.py), in-process and as a real
subprocess started by `VLLMBackend`; tests that need `.venv-vllm` are in test_vllm_engine.py.
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specbench.backends import vllm_worker
from specbench.backends.base import Request
from specbench.backends.registry import make_backend
from specbench.backends.vllm.config import speculative_config
from specbench.backends.vllm.results import check_counters, counter_delta, result_from_output, rounds_from_output
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep import build_spec
from specbench.measure.grid.units import expand_units, load_workloads
from specbench.measure.serving.groups import group_units
from tests.fake_vllm_engine import FakeEngine

ROOT = Path(__file__).resolve().parents[1]
FAKE = "tests.fake_vllm_engine:FakeEngine"


def _spec(prompts_file, **extra):
    raw = {
        "name": "t",
        "drafters": ["ngram"],
        "gammas": [2],
        "workloads": [f"jsonl:{prompts_file}:field=text:id=id"],
        "max_new_tokens": 8,
        **extra,
    }
    return build_spec(raw)


# ----------------------------------------------------------------------------- worker protocol


def test_worker_handles_start_generate_shutdown_with_a_fake_engine():
    worker = vllm_worker.Worker(FakeEngine)
    assert worker.handle({"op": "generate", "requests": []})["error"] == "generate before start"
    started = worker.handle(
        {
            "op": "start",
            "model": "/m",
            "engine": {},
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 2},
            "warmup_tokens": 4,
        }
    )
    assert started["ok"] and started["vllm_version"] == "fake-0"
    answer = worker.handle(
        {
            "op": "generate",
            "concurrency": 2,
            "requests": [{"prompt_token_ids": [5, 6], "max_tokens": 6}, {"prompt_token_ids": [9], "max_tokens": 3}],
        }
    )
    assert answer["ok"] and [len(o["token_ids"]) for o in answer["outputs"]] == [6, 3]
    assert check_counters(answer["outputs"], answer["counters_before"], answer["counters_after"]) == []
    assert worker.handle({"op": "start", "model": "/m"})["kind"] == "protocol"  # one engine per worker
    assert worker.handle({"op": "bogus"})["error"] == "unknown op 'bogus'"
    assert worker.handle({"op": "shutdown"}) == {"ok": True, "op": "shutdown"} and worker.done


def test_worker_start_failure_is_one_line_and_ends_the_worker(monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_FAIL_START", "1")
    worker = vllm_worker.Worker(FakeEngine)
    answer = worker.handle({"op": "start", "model": "/m"})
    assert answer == {"ok": False, "kind": "start", "error": "ValueError: fake engine refused to start"}
    assert worker.done


def test_worker_serve_reads_and_writes_json_lines():
    lines = io.StringIO('{"op": "start", "model": "/m"}\nnot json\n\n{"op": "shutdown"}\n{"op": "never read"}\n')
    out = io.StringIO()
    vllm_worker.Worker(FakeEngine).serve(lines, out)
    answers = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [a["ok"] for a in answers] == [True, False, True]
    assert answers[1]["error"].startswith("not JSON")


def test_worker_subprocess_keeps_stdout_for_the_protocol():
    env = {**os.environ, "SPECBENCH_VLLM_WORKER_ENGINE": FAKE, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "specbench/backends/vllm_worker.py")],
        cwd=ROOT,
        env=env,
        input='{"op": "start", "model": "/m"}\n{"op": "shutdown"}\n',
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["ok"] for x in proc.stdout.splitlines()] == [True, True]  # the engine's print went to stderr
    assert "must not reach the protocol" in proc.stderr


def test_the_worker_run_as_a_file_imports_the_real_vllm_not_specbenchs_backend_package():
    """Run as a file, the worker's folder (specbench/backends, which holds specbench's `vllm`
    package) must not shadow vLLM: here, without vLLM installed, the start fails because vLLM is
    missing, never by importing specbench's package in its place."""
    env = {key: value for key, value in os.environ.items() if key != "SPECBENCH_VLLM_WORKER_ENGINE"}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "specbench/backends/vllm_worker.py")],
        cwd=ROOT / "specbench/backends",
        env=env,
        input='{"op": "start", "model": "/m"}\n',
        capture_output=True,
        text=True,
        timeout=120,
    )
    answer = json.loads(proc.stdout.splitlines()[0])
    assert answer["ok"] is False
    assert "specbench" not in answer["error"], answer["error"]


# ----------------------------------------------------------------------------- counters → records


def test_rounds_map_drafted_steps_undrafted_steps_and_the_length_cut():
    out = {"token_ids": list(range(10)), "spec": {"per_step_accepted": [2, 0, 3], "per_step_drafted": [3, 3, 3]}}
    rounds = rounds_from_output(out, speculative=True)
    # 9 decode tokens: 3 + 1 + 4 = 8 from drafted steps, 1 from a step without a draft
    assert rounds.accepted == [2, 0, 3, 0] and rounds.drafted == [3, 3, 3, 0] and rounds.emitted == [3, 1, 4, 1]
    cut = rounds_from_output({"token_ids": list(range(6)), "spec": out["spec"]}, speculative=True)
    assert cut.emitted == [3, 1, 1] and sum(cut.emitted) == 5  # the last step was cut at max_tokens
    base = rounds_from_output({"token_ids": list(range(4))}, speculative=False)
    assert base.emitted == [1, 1, 1] and base.drafted == [0, 0, 0]
    assert all(math.isnan(x) for x in rounds.draft_s + rounds.verify_s)  # not observable: NaN, never invented


def test_result_from_output_timings_and_metrics():
    out = {
        "token_ids": [1, 2, 3, 4, 5],
        "finish_reason": "length",
        "token_times_s": [0.5, 0.7, 0.9],
        "token_counts": [1, 3, 1],
        "spec": {"per_step_accepted": [2, 0], "per_step_drafted": [2, 2]},
    }
    result = result_from_output(out, prompt_tokens=7, speculative=True, draft_steps_per_round=2)
    assert result.ttft_s == 0.5 and result.prefill_s == 0.5
    assert result.decode_s == pytest.approx(0.4) and result.itl_s == pytest.approx(0.1)
    assert result.tau == pytest.approx(4 / 2) and result.alpha == pytest.approx(2 / 4)
    assert result.tokens_per_s == pytest.approx(10.0) and result.stop_reason == "length"
    assert list(result.rounds.draft_steps) == [2, 2]


def test_check_counters_agree_and_disagree():
    outputs = [
        {
            "spec": {
                "num_spec_steps": 2,
                "num_draft_tokens": 4,
                "num_accepted_draft_tokens": 3,
                "per_step_accepted": [2, 1],
            }
        }
    ]
    before = {
        "vllm:spec_decode_num_drafts": 10,
        "vllm:spec_decode_num_draft_tokens": 20,
        "vllm:spec_decode_num_accepted_tokens": 5,
        "vllm:spec_decode_num_accepted_tokens_per_pos": [3, 2],
    }
    after = {
        "vllm:spec_decode_num_drafts": 12,
        "vllm:spec_decode_num_draft_tokens": 24,
        "vllm:spec_decode_num_accepted_tokens": 8,
        "vllm:spec_decode_num_accepted_tokens_per_pos": [5, 3],
    }
    assert counter_delta(before, after)["vllm:spec_decode_num_accepted_tokens_per_pos"] == [2, 1]
    assert check_counters(outputs, before, after) == []
    after["vllm:spec_decode_num_accepted_tokens"] = 9
    assert check_counters(outputs, before, after) == [
        "vllm:spec_decode_num_accepted_tokens: counter +4, per-request sum 3"
    ]
    assert check_counters([{}], {}, {"vllm:generation_tokens": 4}) == []  # no speculation, nothing to check


# ----------------------------------------------------------------------------- spec, units, groups


def test_spec_backend_and_concurrency_keys(prompts_file):
    plain = _spec(prompts_file)
    assert plain.backend == "own" and plain.concurrency == [1]
    assert "backend" not in plain.to_dict() and "concurrency" not in plain.to_dict()
    spec = _spec(prompts_file, backend={"name": "vllm", "max_num_seqs": 8}, concurrency=[4, 1])
    assert spec.backend == "vllm" and spec.backend_options == {"max_num_seqs": 8} and spec.concurrency == [1, 4]
    assert spec.spec_hash != plain.spec_hash  # another engine measures something else
    more = _spec(prompts_file, backend="vllm", concurrency=[1, 4, 16])
    assert more.spec_hash == _spec(prompts_file, backend="vllm").spec_hash  # concurrency only adds units


def test_spec_hash_of_existing_specs_is_unchanged():
    from specbench.measure.grid.sweep import load_spec_file

    # sweeps/demo-live.yaml is the former demo (its name aside, which the hash leaves out)
    spec = build_spec(load_spec_file(ROOT / "sweeps" / "demo-live.yaml"))
    assert spec.spec_hash == DEMO_HASH_BEFORE_BACKENDS


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"backend": "vlm"}, "unknown backend 'vlm' (did you mean 'vllm'?)"),
        ({"concurrency": [1, 4]}, "backend own runs one request at a time"),
        (
            {"backend": {"name": "vllm", "max_num_seq": 4}},
            "unknown option 'max_num_seq' (did you mean 'max_num_seqs'?)",
        ),
        ({"backend": "vllm", "trees": ["chain", "2x2"]}, "tree '2x2' cannot run on vLLM"),
        ({"backend": "vllm", "drafters": ["mtp"]}, "drafter mtp cannot run on vLLM"),
        ({"backend": "vllm", "drafters": ["eagle"]}, "drafter eagle cannot run on vLLM"),
        ({"backend": "vllm", "mode": "replay"}, "needs mode: live"),
        ({"backend": "vllm", "concurrency": [0]}, "'concurrency' must be an integer from 1 to 4096"),
    ],
)
def test_spec_rejects_what_the_backend_cannot_run(prompts_file, extra, message):
    with pytest.raises(SpecbenchError, match=None) as err:
        _spec(prompts_file, **extra)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_speculative_config_mapping(prompts_file):
    spec = _spec(
        prompts_file, backend="vllm", drafters=["ngram:n_min=2,n_max=4", "draft-model:model=smollm2-135m"], gammas=[3]
    )
    configs = {c.drafter.type: c for c in spec.configs if c.drafter}
    assert speculative_config(configs["ngram"]) == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_min": 2,
        "prompt_lookup_max": 4,
    }
    assert speculative_config(configs["draft-model"], lambda m: f"/cache/{m}", {"draft_tensor_parallel_size": 2}) == {
        "method": "draft_model",
        "model": "/cache/smollm2-135m",
        "num_speculative_tokens": 3,
        "draft_tensor_parallel_size": 2,
    }
    assert speculative_config(spec.configs[0]) is None  # the baseline


def test_unit_ids_unchanged_for_own_concurrency_1_and_distinct_otherwise(prompts_file):
    own = _spec(prompts_file)
    units = expand_units(own, load_workloads(own))
    served = _spec(prompts_file, backend="vllm", concurrency=[1, 4])
    served_units = expand_units(served, load_workloads(served))
    assert len(served_units) == 2 * len(units)
    ids = {u.unit_id for u in served_units}
    assert len(ids) == len(served_units) and not ids & {u.unit_id for u in units}
    from specbench.measure.grid.units import Unit

    u = units[0]
    assert u.unit_id == Unit(u.config, u.workload, u.prompt, u.turn, u.repeat, u.max_new_tokens, u.base_seed).unit_id


def test_group_units_runs_baselines_first_then_each_configuration_once(prompts_file):
    spec = _spec(prompts_file, backend="vllm", concurrency=[1, 4], gammas=[1, 2])
    groups = group_units(expand_units(spec, load_workloads(spec)))
    labels = [(g.config.label, g.concurrency) for g in groups]
    assert labels[:2] == [("target only T=0", 1), ("target only T=0", 4)]
    assert [c for _, c in labels] == [1, 4] * 3
    configs_in_order = list(dict.fromkeys(g.config for g in groups))
    assert len(configs_in_order) == 3  # each configuration's groups are contiguous: one engine start each
    assert all(len(g.units) == 4 for g in groups)  # every prompt of the workload in one batch


# ----------------------------------------------------------------------------- registry


def test_registry_errors_are_one_line():
    with pytest.raises(SpecbenchError, match="unknown backend 'owm' \\(did you mean 'own'\\?\\)"):
        make_backend("owm", {}, target="x", device="cpu", dtype="fp32", seed=0)
    import dataclasses

    import specbench.backends.registry as registry

    original = registry.get("openai")
    registry.BACKENDS.register(
        dataclasses.replace(original, cls="specbench.backends.no_such_module:Backend"), replace=True
    )
    try:
        with pytest.raises(SpecbenchError, match="^backend openai is not available"):
            make_backend("openai", {}, target="x", device="cpu", dtype="fp32", seed=0)
    finally:
        registry.BACKENDS.register(original, replace=True)
    with pytest.raises(SpecbenchError, match="backend own: unknown option 'kernel'"):
        make_backend("own", {"kernel": "torch"}, target="x", device="cpu", dtype="fp32", seed=0)


def test_missing_vllm_environment_is_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv("SPECBENCH_VLLM_PYTHON", raising=False)
    monkeypatch.delenv("SPECBENCH_VLLM_VENV", raising=False)
    with pytest.raises(SpecbenchError, match="vLLM is not installed .* run `make install-vllm`"):
        make_backend(
            "vllm", {"python": str(tmp_path / "nope" / "python")}, target="x", device="cpu", dtype="fp32", seed=0
        )


# ----------------------------------------------------------------------------- the backend and a sweep, fake engine


@pytest.fixture()
def fake_worker_env(monkeypatch):
    monkeypatch.setenv("SPECBENCH_VLLM_WORKER_ENGINE", FAKE)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    return {"python": sys.executable}


def _run_sweep(prompts_file, out, options):
    from specbench.measure.run.runner import SweepRunner

    spec = _spec(
        prompts_file,
        backend={"name": "vllm", **options},
        concurrency=[1, 2],
        drafters=["ngram", "draft-model:model=smollm2-135m"],
        gammas=[2],
        ignore_eos=True,
    )
    runner = SweepRunner(spec, out)
    return runner, runner.run()


def test_sweep_through_the_worker_resumes_after_the_worker_dies(prompts_file, tmp_path, fake_worker_env, monkeypatch):
    from specbench.records.store import load_records

    out = tmp_path / "res"
    monkeypatch.setenv("FAKE_VLLM_DIE_ON", "draft_model")
    with pytest.raises(SpecbenchError, match=r"the vLLM worker stopped \(exit 3\) during 'generate'"):
        _run_sweep(prompts_file, out, fake_worker_env)
    done = load_records(out)
    assert len(done) == 16 and set(done["drafter"]) == {"none", "ngram"}  # baseline and ngram groups kept
    monkeypatch.delenv("FAKE_VLLM_DIE_ON")
    runner, measured = _run_sweep(prompts_file, out, fake_worker_env)
    assert measured == 8  # only the draft-model groups ran again
    frame = load_records(out)
    assert len(frame) == 24 and set(frame["backend"]) == {"vllm"} and set(frame["concurrency"]) == {1, 2}
    ngram = frame[frame["drafter"] == "ngram"].iloc[0]
    assert ngram["decode_tokens"] == 7 and ngram["rounds"] == len(ngram["round_accepted"])
    assert math.isnan(ngram["draft_s"]) and ngram["ttft_s"] == pytest.approx(0.01) and ngram["itl_s"] > 0
    assert list(ngram["accept_hist"]) == list(__import__("numpy").bincount(ngram["round_accepted"], minlength=3)[:3])
    assert runner.backend._worker is None  # closed: no worker left behind
    ran = json.loads((out / "backend.json").read_text())
    assert ran["vllm_version"] == "fake-0" and ran["engine"]["max_num_seqs"] == 2
    assert ran["configs"]["target only T=0"] is None
    assert ran["configs"]["ngram γ=2 T=0"] == {
        "method": "ngram",
        "num_speculative_tokens": 2,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
    }
    assert ran["configs"]["draft-model(model=smollm2-135m) γ=2 T=0"]["model"].endswith("smollm2-135m")


DEMO_HASH_BEFORE_BACKENDS = "aea0da12516b31fa"  # sweeps/demo.yaml before backend/concurrency existed


def test_an_engine_that_cannot_start_is_one_line_with_its_log(prompts_file, fake_worker_env, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_FAIL_START", "1")
    spec = _spec(prompts_file, backend="vllm")
    backend = make_backend("vllm", fake_worker_env, target="smollm2-135m", device="cpu", dtype="fp32", seed=0)
    backend.start(lambda message: None)
    try:
        with pytest.raises(
            SpecbenchError,
            match=r"^vLLM could not start target only T=0: ValueError: fake engine "
            r"refused to start \(log: .*worker-000.log\)$",
        ):
            backend.generate_batch(spec.configs[0], [Request([1, 2, 3], 4, 0, False)], 1)
    finally:
        backend.close()
    assert backend.log_dir.is_dir()  # kept: the error names it
    monkeypatch.delenv("FAKE_VLLM_FAIL_START")
    ok = make_backend("vllm", fake_worker_env, target="smollm2-135m", device="cpu", dtype="fp32", seed=0)
    ok.start(lambda message: None)
    try:
        (result,) = ok.generate_batch(spec.configs[1], [Request([1, 2, 3], 6, 0, False)], 1)
    finally:
        ok.close()
    assert result.new_tokens == 6 and result.drafted > 0 and not ok.log_dir.exists()


@pytest.mark.parametrize(
    "flags, needles",
    [
        (["--backend", "vllm"], ["vLLM is not installed", "make install-vllm"]),
        (["--backend", "vllm", "--tree", "chain,2x2"], ["tree '2x2' cannot run on vLLM"]),
        (["--concurrency", "1,4"], ["backend own runs one request at a time"]),
        (["--backend", "vlm"], ["unknown backend 'vlm' (did you mean 'vllm'?)"]),
    ],
)
def test_cli_bad_backend_input_is_one_line_exit_2(tmp_path, prompts_file, monkeypatch, flags, needles):
    from tests.cli_helpers import TINY_SWEEP, assert_user_error, invoke, jsonl_workload, write_sweep_yaml

    monkeypatch.setenv("SPECBENCH_VLLM_VENV", str(tmp_path / "no-venv"))
    spec = {**TINY_SWEEP, "drafters": [{"type": "ngram"}], "workloads": [jsonl_workload(prompts_file)]}
    result = invoke("sweep", write_sweep_yaml(tmp_path, spec), "--out", tmp_path / "out", *flags)
    assert_user_error(result, *needles)


def test_records_written_before_backends_read_back_with_null_backend_and_concurrency(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from specbench.records import store
    from tests.synthetic_results import SyntheticDrafter, make_records

    records = make_records([SyntheticDrafter()], n_prompts=2, max_new_tokens=8)
    old = [c for c in store.COLUMNS if c not in store.LATER_DEFAULTS]
    (tmp_path / "records").mkdir()
    pq.write_table(
        pa.Table.from_pylist(
            [{c: r[c] for c in old} for r in records], schema=pa.schema([pa.field(c, store.COLUMNS[c][0]) for c in old])
        ),
        tmp_path / "records" / "part-0001.parquet",
    )
    store.ResultsStore(tmp_path).write_unit({**records[0], "unit_id": "new"})  # a writer that omits them too
    frame = store.load_records(tmp_path)
    assert len(frame) == len(records) + 1
    assert frame["backend"].isna().all() and frame["concurrency"].isna().all()


def test_the_old_vllm_variable_still_works_with_one_plain_note(monkeypatch, capsys):
    from specbench.backends.vllm import env as vllm_env

    monkeypatch.delenv("SPECBENCH_VLLM_VENV", raising=False)
    monkeypatch.setenv("SPECBENCH_VLLM_PYTHON", sys.executable)
    monkeypatch.setattr(vllm_env, "_NOTED", set())
    assert vllm_env.vllm_python() == Path(sys.executable)
    assert vllm_env.vllm_python() == Path(sys.executable)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("note: SPECBENCH_VLLM_PYTHON is deprecated: set SPECBENCH_VLLM_VENV")

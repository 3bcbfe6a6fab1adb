"""The confirmation's vLLM contenders on a real engine (marker ``vllm``): a per-batch-size schedule runs in vLLM
and its greedy outputs equal target-only decoding; the installed vLLM's acceptance-adaptive K is detected by
feature. The speculative_config the contenders build is checked without vLLM in tests/test_confirm.py."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from specbench.backends.adaptive_mechanisms import vllm_features, vllm_mechanisms
from specbench.backends.vllm.env import default_venv
from specbench.engine.strategies.schedule import batch_size_schedule
from specbench.measure.grid.sweep import build_spec
from specbench.measure.run.runner import SweepRunner
from specbench.records.store import load_records

VLLM_PYTHON = default_venv() / "bin" / "python"  # $SPECBENCH_VLLM_VENV, else .venv-vllm

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not VLLM_PYTHON.is_file(), reason=f"needs the vLLM environment {VLLM_PYTHON}"),
]

PROMPTS = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
]


def test_the_installed_vllm_is_asked_for_its_adaptive_k():
    found = vllm_features(VLLM_PYTHON)
    assert "num_speculative_tokens_per_batch_size" in found["fields"]
    (mechanism,) = vllm_mechanisms({"python": str(VLLM_PYTHON)}, "ngram", 4)
    if "enable_adaptive_verification" in found["fields"]:  # vLLM 0.32: for method dspark only
        assert mechanism.absent and "dspark" in mechanism.absent
    else:
        assert mechanism.absent and "has no acceptance-adaptive K" in mechanism.absent


def test_a_per_batch_size_schedule_runs_in_vllm_and_is_greedy_lossless(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS)))
    spec = build_spec(
        {
            "name": "vllm-schedule",
            "target": "smollm2-135m",
            "gammas": [4],
            "max_new_tokens": 16,
            "ignore_eos": True,
            "workloads": [f"jsonl:{prompts}:field=text:id=id"],
            "drafters": ["ngram"],
            "concurrency": [2],
            "backend": {"name": "vllm", "python": str(VLLM_PYTHON), "max_model_len": 512, "kv_cache_gib": 1},
        }
    )
    base, static = spec.configs
    schedule = replace(static, schedule=batch_size_schedule([[1, 1, 4], [2, 8, 2]]))
    spec.configs = [base, static, schedule]
    SweepRunner(spec, tmp_path / "results").run()
    frame = load_records(tmp_path / "results")
    outputs = {
        label: part.set_index("prompt_id")["output_sha1"].to_dict()
        for label, part in frame.groupby(frame["schedule"].fillna("fixed") + frame["gamma"].astype(str))
    }
    reference = outputs.pop("fixed0")
    assert len(reference) == 2 and all(o == reference for o in outputs.values()), outputs
    ran = json.loads((tmp_path / "results" / "backend.json").read_text())
    ranges = [c.get("num_speculative_tokens_per_batch_size") for c in _configs(ran)]
    assert [[1, 1, 4], [2, 8, 2]] in ranges, ranges


def _configs(backend_json: dict) -> list:
    """Every speculative_config backend.json says ran (its layout nests them per configuration label)."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            if "num_speculative_tokens" in value:
                found.append(value)
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(backend_json)
    return found

"""The vLLM backend on a real engine (marker ``vllm``; needs ``.venv-vllm`` from `make install-vllm`).

One tiny sweep (SmolLM2-135M, 2 prompts × 16 tokens, greedy, γ 2) runs once for the module:
the target-only baseline, ngram and draft_model with the target drafting for itself. vLLM fixes
the speculative config when an engine is built, so that is three engine starts (about 1.5–2.5
minutes each on a busy 2-core CPU); everything below reads the same records.
"""

from __future__ import annotations

import json

import pytest

from specbench.backends.vllm.env import default_venv

VLLM_PYTHON = default_venv() / "bin" / "python"  # $SPECBENCH_VLLM_VENV, else .venv-vllm

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not VLLM_PYTHON.is_file(), reason=f"needs the vLLM environment {VLLM_PYTHON} (make install-vllm)"
    ),
]

PROMPTS = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. The quick",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
]


@pytest.fixture(scope="module")
def vllm_sweep(tmp_path_factory):
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner
    from specbench.records.store import load_records

    folder = tmp_path_factory.mktemp("vllm")
    prompts = folder / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS)))
    spec = build_spec(
        {
            "name": "vllm-e2e",
            "target": "smollm2-135m",
            "gammas": [2],
            "max_new_tokens": 16,
            "ignore_eos": True,
            "workloads": [f"jsonl:{prompts}:field=text:id=id"],
            "drafters": ["ngram", "draft-model:model=smollm2-135m"],
            "backend": {"name": "vllm", "python": str(VLLM_PYTHON), "max_model_len": 512, "kv_cache_gib": 1},
        }
    )
    runner = SweepRunner(spec, folder / "results")
    assert runner.run() == 6
    return runner, load_records(folder / "results")


def test_greedy_outputs_equal_vllm_target_only(vllm_sweep):
    _, frame = vllm_sweep
    base = frame[frame["drafter"] == "none"].set_index("prompt_id")["output_sha1"]
    assert len(base) == 2
    for drafter in ("ngram", "draft-model"):
        rows = frame[frame["drafter"] == drafter].set_index("prompt_id")["output_sha1"]
        assert rows.to_dict() == base.to_dict(), drafter
    assert set(frame["new_tokens"]) == {16} and set(frame["backend"]) == {"vllm"}


def test_draft_model_drafting_for_itself_accepts_everything(vllm_sweep):
    runner, frame = vllm_sweep
    rows = frame[frame["drafter"] == "draft-model"]
    assert (rows["drafted"] > 0).all() and (rows["accepted"] == rows["drafted"]).all()
    assert (rows["alpha"] == 1.0).all()
    assert runner.backend.counter_problems == []  # per-request sums equal vLLM's aggregate counters


def test_records_carry_vllm_timings_and_rounds(vllm_sweep):
    _, frame = vllm_sweep
    assert (frame["ttft_s"] > 0).all() and (frame["itl_s"] > 0).all() and (frame["tokens_per_s"] > 0).all()
    for row in frame.itertuples():
        assert sum(1 + a for a in row.round_accepted) >= row.decode_tokens  # the last round may be cut
        assert len(row.round_accepted) == row.rounds


def test_per_load_settings_are_built_and_their_schedule_checked_by_vllm(tmp_path, monkeypatch):
    """Every per-load config `recommend` emits (a confident-yes-only schedule) is built by vLLM's SpeculativeConfig
    and its num_speculative_tokens_per_batch_size passes vLLM's own schedule check; a malformed schedule fails."""
    from specbench.analysis.load.verdicts import settings_of, summary
    from specbench.analysis.recommendation.recommend import recommend
    from specbench.analysis.settings.engine_settings import EngineSetting
    from specbench.cli.shell import engine_checks
    from tests.synthetic_serving import serving_records

    monkeypatch.setattr(engine_checks, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.delenv(engine_checks.SKIP_ENV, raising=False)
    frame = serving_records((1, 2, 4, 8, 16), lambda load, g: 1.6 * load**-0.25, n_prompts=12)
    load = summary(frame, recommend(frame, n_boot=0), n_boot=0)
    (setting,) = settings_of(load)
    bad = EngineSetting("vllm", True, {**setting.config, "num_speculative_tokens_per_batch_size": [[2, 4, 2]]}, "")
    engine_checks.validate_settings([({"vllm": setting}, None), ({"vllm": bad}, None)], vllm_python=VLLM_PYTHON)
    assert setting.checked.startswith("built as SpeculativeConfig by vLLM") and setting.supported
    assert "per-batch-size schedule validated by vLLM's scheduler check" in setting.checked
    assert not bad.supported and "must start at 1" in bad.notes[-1]

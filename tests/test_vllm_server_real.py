"""Opt-in (marker ``vllm``): one real vLLM server, launched by the vllm-server backend on
SmolLM2-135M with ngram γ = 2, and the settings check against vLLM's SpeculativeConfig.

Run: SPECBENCH_VLLM_VENV=/path/.venv-vllm [SPECBENCH_VLLM_MODEL=/path/smollm2-folder] pytest -m vllm
Start-up takes 1–3 minutes on a small CPU.
"""

from __future__ import annotations

import os

import pytest

from specbench.backends.base import Request
from specbench.backends.servers.server_process import group_alive
from specbench.backends.vllm.env import default_venv
from specbench.backends.vllm.server import VLLMServerBackend
from specbench.cli.shell.engine_checks import check_vllm_configs
from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig

pytestmark = pytest.mark.vllm

VENV = default_venv()
needs_venv = pytest.mark.skipif(
    not (VENV / "bin" / "python").exists(),
    reason=f"no vLLM environment at {VENV} (make install-vllm, or set SPECBENCH_VLLM_VENV)",
)


def _model() -> str:
    return os.environ.get("SPECBENCH_VLLM_MODEL") or "smollm2-135m"


@needs_venv
def test_settings_check_builds_speculative_config():
    version, results = check_vllm_configs(
        [
            {
                "config": {
                    "method": "ngram",
                    "num_speculative_tokens": 2,
                    "prompt_lookup_min": 1,
                    "prompt_lookup_max": 3,
                },
                "target": None,
            },
            {
                "config": {
                    "method": "eagle",
                    "num_speculative_tokens": 6,
                    "model": "m",
                    "speculative_token_tree": "[(0,), (1,)]",
                },
                "target": None,
            },
        ],
        VENV / "bin" / "python",
    )
    assert version
    assert results[0]["ok"] is True
    assert results[1]["ok"] is False and "speculative_token_tree" in results[1]["error"]


@needs_venv
def test_real_server_ngram_counters_move(tmp_path):
    backend = VLLMServerBackend(
        {"model": _model(), "max_model_len": 1024, "startup_timeout_s": 900, "log_dir": str(tmp_path)},
        target=_model(),
        device="cpu",
        dtype="fp32",
        seed=0,
    )
    backend.start(print)
    try:
        text = "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox"
        ids = backend.tokenizer.encode(text)
        config = RunConfig(DrafterConfig("ngram", (("n_max", 3), ("n_min", 1))), 2, "chain", 0.0, 1.0, 0)
        results = backend.generate_batch(config, [Request(ids, 32, 0, False), Request(ids[:-3], 32, 1, False)], 2)
        group = backend.server.pgid
        window = backend.run_info()["aggregates"][-1]["window"]
        # ngram drafts up to γ tokens per step (fewer when the match's continuation is shorter)
        assert window["drafts"] > 0 and window["drafts"] <= window["draft_tokens"] <= 2 * window["drafts"]
        assert window["draft_tokens"] == sum(r.drafted for r in results)
        per_request_accepted = sum(r.accepted for r in results)
        assert window["accepted"] == per_request_accepted  # the counters move by exactly the requests' figures
        for r in results:
            assert len(r.tokens) == 32 and r.spec_source == "per-request" and r.timing_source == "server"
            assert r.decode_tokens == 31 and r.prefill_s > 0 and r.decode_s > 0
            assert max(r.rounds.accepted) <= 2
        print("window", window, "tau", [r.tau for r in results])
    finally:
        backend.close()
    assert not group_alive(group)


@needs_venv
@pytest.mark.parametrize("kind", ["eagle3"])
def test_exported_drafter_is_served_by_vllm(tmp_path, kind):
    """An exported shipped head loads in vLLM and drafts: its spec-decode counters move and it accepts tokens."""
    from specbench.training.vllm_export import export_drafter

    folder = tmp_path / kind
    export_drafter(kind, folder, target="smollm2-135m")
    backend = VLLMServerBackend(
        {"model": _model(), "max_model_len": 1024, "startup_timeout_s": 900, "log_dir": str(tmp_path)},
        target=_model(),
        device="cpu",
        dtype="fp32",
        seed=0,
    )
    backend.start(print)
    try:
        ids = backend.tokenizer.encode("Write a short poem about the sea.")
        config = RunConfig(DrafterConfig(kind, (("model", str(folder)),)), 2, "chain", 0.0, 1.0, 0)
        results = backend.generate_batch(config, [Request(ids, 32, 0, False)], 1)
        window = backend.describe()["aggregates"][-1]["window"]
        print(kind, "window", window, "alpha", results[0].alpha)
        assert window["drafts"] > 0 and window["accepted"] > 0
        assert len(results[0].tokens) == 32
    finally:
        backend.close()
    # The same head in specbench's own engine on the same prompt (greedy, fp32). EAGLE-3's export is
    # exact, so the accepted counts should agree; a tolerance of 2 tokens (of ~10) covers fp32
    # rounding differences between the two engines' kernels flipping a near-tie argmax.
    from specbench.engine.drafters import make_drafter
    from specbench.engine.loop import SpeculativeEngine
    from specbench.models.resolve import load_model

    target = load_model("smollm2-135m")
    own = SpeculativeEngine(target, make_drafter(kind, target), gamma=2).generate(ids, 32, seed=0, stop_at_eos=False)
    print("own engine: rounds", own.target_forwards, "accepted", own.accepted, "tau", own.tau)
    assert own.tokens == results[0].tokens  # both lossless greedy: the target's own output
    assert abs(own.accepted - results[0].accepted) <= 2

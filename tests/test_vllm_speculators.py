"""Speculators-format heads on a real vLLM (marker ``vllm``; needs ``.venv-vllm`` from `make install-vllm`).

Two checks, each against specbench's own engine on the same prompts (greedy, γ 2, 16 new tokens):

* a tiny speculators EAGLE-3 head (written by hand in the format, reduced draft vocabulary) for a tiny
  random Llama runs on the vLLM backend: outputs equal vLLM's target-only outputs and the own engine's,
  and vLLM drafts with it;
* the shipped SmolLM2 EAGLE-3 head exported with ``export-drafter --format speculators`` is served by
  vLLM with the acceptance the own engine measures (two engines' fp32 kernels may flip a near-tie
  argmax, so 2 accepted tokens of difference per prompt are allowed).

The tiny target is tiny-random-llama's shape with 2 heads of 32 dimensions: vLLM's CPU attention
supports head sizes from 32 up (tiny-random-llama's are 16). About 3 engine starts (1.5-2.5 minutes
each on a busy 2-core CPU).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from specbench.backends.vllm.env import default_venv
from tests.speculators_checkpoints import reduced_vocabulary, write_speculators_eagle3

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
BACKEND = {"name": "vllm", "python": str(VLLM_PYTHON), "max_model_len": 512, "kv_cache_gib": 1}


def _prompts(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "prompts.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS)))
    return f"jsonl:{path}:field=text:id=id:chat=false"


def _sweep(folder: Path, target: str, drafter: str, backend) -> pd.DataFrame:  # noqa: F821
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner
    from specbench.records.store import load_records

    raw = {
        "name": "speculators",
        "target": target,
        "gammas": [2],
        "max_new_tokens": 16,
        "ignore_eos": True,
        "workloads": [_prompts(folder)],
        "drafters": [drafter],
    }
    if backend is not None:
        raw["backend"] = backend
    runner = SweepRunner(build_spec(raw), folder / "results")
    runner.run()
    return load_records(folder / "results")


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory) -> Path:
    """tiny-random-llama's shape with head_dim 32, saved with its byte tokenizer as a model folder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from specbench.models.byte_tokenizer import byte_tokenizer
    from specbench.models.resolve import aliases

    config = dict(aliases()["tiny-random-llama"]["config"])
    config.update(num_attention_heads=2, num_key_value_heads=1, bos_token_id=1, eos_token_id=2, pad_token_id=3)
    config.pop("model_type")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**config)).float()
    folder = tmp_path_factory.mktemp("vllm-spec") / "tiny-llama-hd32"
    model.save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder


def test_a_tiny_speculators_head_runs_on_vllm_losslessly(tiny_target, tmp_path):
    from specbench.models.resolve import load_model

    target = load_model(str(tiny_target))
    # three fused layers (embeddings and both decoder layers): vLLM 0.32 sizes a speculators head's fc for
    # three unless its layer config says otherwise (num_aux_hidden_states), as every published head has
    head = write_speculators_eagle3(
        tmp_path / "head",
        target,
        draft_ids=reduced_vocabulary(target.vocab_size, 200),
        layers=[0, 1, 2],
        seed=0,
        verifier=str(tiny_target),
    )
    drafter = f"eagle3:checkpoint={head}"
    on_vllm = _sweep(tmp_path / "vllm", str(tiny_target), drafter, BACKEND)
    own = _sweep(tmp_path / "own", str(tiny_target), drafter, None)
    base = on_vllm[on_vllm["drafter"] == "none"].set_index("prompt_id")["output_sha1"]
    rows = on_vllm[on_vllm["drafter"] == "eagle3"].set_index("prompt_id")
    assert len(base) == 2 and rows["output_sha1"].to_dict() == base.to_dict(), "lossless on vLLM"
    assert own[own["drafter"] == "eagle3"].set_index("prompt_id")["output_sha1"].to_dict() == base.to_dict()
    assert (rows["drafted"] > 0).all(), "vLLM drafted with the head"


def test_the_smollm2_export_is_served_by_vllm_with_the_own_engines_acceptance(tmp_path):
    from specbench.training.vllm_export import export_drafter

    export_drafter("eagle3", tmp_path / "export", fmt="speculators")
    drafter = f"eagle3:checkpoint={tmp_path / 'export'}"
    on_vllm = _sweep(tmp_path / "vllm", "smollm2-135m", drafter, BACKEND)
    own = _sweep(tmp_path / "own", "smollm2-135m", drafter, None)
    served = on_vllm[on_vllm["drafter"] == "eagle3"].set_index("prompt_id")
    measured = own[own["drafter"] == "eagle3"].set_index("prompt_id")
    assert len(served) == len(measured) == 2
    assert served["output_sha1"].to_dict() == measured["output_sha1"].to_dict()
    assert measured["accepted"].sum() > 0, "the head is accepted at times: the comparison means something"
    for prompt, row in measured.iterrows():
        assert abs(int(served.loc[prompt, "accepted"]) - int(row["accepted"])) <= 2, (prompt, served, measured)

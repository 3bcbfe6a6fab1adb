"""Run inside the speculators environment (.venv-speculators, never specbench's): load a speculators-format
EAGLE-3 folder with the speculators package itself and compute its first-step logits.

    python tests/speculators_reference.py FOLDER INPUTS OUTPUT

INPUTS (safetensors): ``hidden`` [1, T, k·H] (the fused target layers of entries 0..T−1), ``ids`` [1, T] (the
token each entry is paired with), ``embedding`` [V, H] (the target's; the head shares it). OUTPUT
(safetensors): ``logits`` [T, Vd], the head's draft-vocabulary logits of every entry, and the loading
report in its metadata (``missing`` and ``unexpected`` weights). Uses only torch, safetensors and speculators.
"""

from __future__ import annotations

import json
import sys

import torch
from safetensors.torch import load_file, save_file
from speculators.models.eagle3 import Eagle3DraftModel, Eagle3SpeculatorConfig

# tensors a speculators checkpoint may leave out: the embedding is the verifier's, the verifier's head and
# norm serve training only
OPTIONAL = ("embed_tokens.weight", "verifier_lm_head.weight", "verifier_norm.weight")


def main(folder: str, inputs: str, output: str) -> None:
    config = Eagle3SpeculatorConfig.from_pretrained(folder)
    config.transformer_layer_config._attn_implementation = "eager"  # a float mask: runs on any CPU
    model = Eagle3DraftModel(config).eval()
    missing, unexpected = model.load_state_dict(load_file(f"{folder}/model.safetensors"), strict=False)
    data = load_file(inputs)
    model.embed_tokens.weight.data = data["embedding"].float()
    logits = []
    hook = model.lm_head.register_forward_hook(lambda _m, _i, out: logits.append(out.detach()))
    ids = data["ids"].long()
    with torch.no_grad():
        model(hidden_states=data["hidden"].float(), input_ids=ids, document_ids=torch.zeros_like(ids), ttt_steps=1)
    hook.remove()
    report = {
        "missing": sorted(k for k in missing if k not in OPTIONAL),
        "unexpected": sorted(unexpected),
        "speculators_model_type": config.speculators_model_type,
        "draft_vocab_size": config.draft_vocab_size,
    }
    save_file({"logits": logits[0][0].contiguous()}, output, metadata={"report": json.dumps(report)})


if __name__ == "__main__":
    main(*sys.argv[1:4])

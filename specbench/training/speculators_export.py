"""``specbench export-drafter --format speculators``: an EAGLE-3 / EAGLE-3.1 head in the speculators format.

The format (vllm-project/speculators; field by field in `specbench.engine.drafters.checkpoints.speculators_format`,
which reads it back) is what vLLM loads with no further configuration (``vllm serve FOLDER`` takes the
target from ``speculators_config.verifier``) and what the speculators library trains and publishes.
What the export writes, from the drafter the engine drafts with (so the weights are the ones measured):

* ``config.json`` — ``speculators_model_type: eagle3``; ``transformer_layer_config`` a one-layer Llama
  config of the head's shape (the target's vocabulary, RoPE θ, norm ε; ``num_aux_hidden_states`` when the
  head fuses other than 3 target layers, which vLLM 0.32 reads there); ``draft_vocab_size``;
  ``eagle_aux_hidden_state_layer_ids`` = the drafter's feature layers (the same indexing);
  ``norm_before_residual`` as the network runs (false for specbench's own heads), ``norm_before_fc``
  false, ``fc_norm`` / ``norm_output`` (true for EAGLE-3.1), ``target_hidden_size`` null (the head has
  the target's width); ``speculators_config`` with one greedy proposal method of
  `EAGLE_STEPS` tokens and the verifier (the target's hub id when specbench knows one);
* ``model.safetensors`` (float32) — ``fc.weight``, ``layers.0.*``, ``norm.weight``, ``fc_norm.{i}.weight``
  (3.1), ``lm_head.weight`` = the rows of the head the drafter scores, and for a reduced draft vocabulary
  ``d2t`` / ``t2d``, with the draft ids in increasing target-id order (the order ``t2d`` implies); the
  target's embedding is not copied (vLLM and specbench share the target's);
* ``specbench-export.json`` — what was exported from what, and the speculative_config that serves it.

Exact: the network and the head rows are written as they are, so reading the export back
(``--drafter eagle3:checkpoint=FOLDER``) drafts the same proposals (a test checks it on the shipped
SmolLM2 head). Any target: the layer described is the drafter's own, a Llama layer whatever the target
(vLLM's Eagle3LlamaForCausalLM runs it beside a Qwen target as well).
"""

from __future__ import annotations

import torch

from specbench.catalogue import drafters as catalogue
from specbench.engine.drafters.checkpoints.speculators_format import LAYER_PREFIX, NET_LAYER_PREFIX, TYPE_KEY
from specbench.errors import SpecbenchError
from specbench.models.resolve import aliases
from specbench.training.draft_layer_config import draft_llama_config

SCHEMA_VERSION = "0.9.0"  # the speculators release whose config schema this follows (speculators_version)
EAGLE_STEPS = 3  # the greedy proposal method's speculative_tokens (what `vllm serve FOLDER` drafts)
ARCHITECTURE = "Eagle3Speculator"  # speculators' model class for its eagle3 type
VLLM_FUSED_LAYERS = 3  # vLLM 0.32 sizes a speculators head's fc for 3 fused layers unless num_aux_hidden_states says


def verifier_of(target) -> str:
    """The verifier the config names: the target's hub id when the alias has one, else the spec as given."""
    entry = aliases().get(target.name) or {}
    return str(entry.get("hub") or target.name)


def _vocabulary(head) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(target ids in increasing order [Vd] | None for the whole vocabulary, head rows in that order [Vd, H])."""
    weight = head.weight.detach().float().cpu()
    if head.ids is None:
        return None, weight
    ids = head.ids.detach().long().cpu()
    order = torch.argsort(ids)
    return ids[order], weight[order]


def export_speculators(kind: str, drafter, target, *, verifier: str | None = None) -> tuple[dict, dict, list[str]]:
    """(config.json, tensors, notes) of ``drafter`` (a built EAGLE-3 / EAGLE-3.1 drafter of kind ``kind``)
    in the speculators format; ``verifier``: the target the config names (default `verifier_of`)."""
    entry = catalogue.get(kind)
    if entry.speculators is None:
        raise SpecbenchError(
            f"'{kind}' has no speculators format (kinds with one: {', '.join(catalogue.speculators_kinds())})"
        )
    net, head = drafter.net, drafter.head
    ids, rows = _vocabulary(head)
    vocab = int(target.vocab_size)
    layer = draft_llama_config(target, net.shape.to_dict(), any_target=True)
    layer.update(
        {
            "attention_bias": False,
            "mlp_bias": False,
            "tie_word_embeddings": False,
            "hidden_act": "silu",
            "vocab_size": vocab,
        }
    )
    if len(net.feature_layers) != VLLM_FUSED_LAYERS:  # vLLM sizes fc by this, not by the layer ids
        layer["num_aux_hidden_states"] = len(net.feature_layers)
    flags = {
        flag: bool(getattr(net, flag, False) if flag != "fc_norm" else hasattr(net, "fc_norm"))
        for flag in entry.speculators_flags
    }
    config = {
        "architectures": [ARCHITECTURE],
        TYPE_KEY: entry.speculators,
        "speculators_version": SCHEMA_VERSION,
        "speculators_config": {
            "algorithm": entry.speculators,
            "proposal_methods": [
                {
                    "proposal_type": "greedy",
                    "speculative_tokens": EAGLE_STEPS,
                    "verifier_accept_k": 1,
                    "accept_tolerance": 0.0,
                }
            ],
            "default_proposal_method": "greedy",
            "verifier": {
                "name_or_path": verifier or verifier_of(target),
                "architectures": list(
                    getattr(target.model.config, "architectures", None) or [type(target.model).__name__]
                ),
            },
        },
        "transformer_layer_config": layer,
        "draft_vocab_size": vocab if ids is None else int(ids.numel()),
        "norm_before_residual": bool(getattr(net, "norm_before_residual", False)),
        "norm_before_fc": False,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": [int(i) for i in net.feature_layers],
        "embed_requires_grad": False,
        **flags,
        "torch_dtype": "float32",
    }
    if catalogue.from_speculators(config) != kind:  # the flags must name this kind back
        raise SpecbenchError(f"the {kind} drafter's network does not have the flags of its kind ({flags})")
    tensors = {}
    for name, tensor in net.state_dict().items():
        if name.startswith(NET_LAYER_PREFIX):
            name = LAYER_PREFIX + name[len(NET_LAYER_PREFIX) :]
        tensors[name] = tensor.detach().float().cpu()
    tensors["lm_head.weight"] = rows
    if ids is not None:
        tensors["d2t"] = ids - torch.arange(ids.numel(), dtype=torch.long)
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[ids] = True
        tensors["t2d"] = t2d
    return config, tensors, []

"""Tiny speculators-format EAGLE-3 checkpoints, written the way the speculators library lays them out.

Written here by hand from the format's published description (config fields and tensor names of
speculators' ``Eagle3SpeculatorConfig`` and its saved weights, as vLLM 0.32's loader reads them), not
with specbench's exporter: the tests that load these check the reader against the format, not
against specbench's own writer.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file


def speculators_config(
    target, *, draft_size: int, layers: list[int], intermediate: int, verifier: str, **fields
) -> dict:
    """config.json of a one-layer speculators EAGLE-3 head for ``target``; ``fields`` override top-level keys."""
    cfg = target.model.config
    heads = int(cfg.num_attention_heads)
    layer = {
        "model_type": "llama",
        "vocab_size": int(target.vocab_size),
        "hidden_size": int(cfg.hidden_size),
        "intermediate_size": intermediate,
        "num_hidden_layers": 1,
        "num_attention_heads": heads,
        "num_key_value_heads": int(cfg.num_key_value_heads),
        "head_dim": int(cfg.hidden_size) // heads,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
    }
    config = {
        "architectures": ["Eagle3Speculator"],
        "speculators_model_type": "eagle3",
        "speculators_version": "0.9.0",
        "speculators_config": {
            "algorithm": "eagle3",
            "proposal_methods": [
                {"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1, "accept_tolerance": 0.0}
            ],
            "default_proposal_method": "greedy",
            "verifier": {"name_or_path": verifier, "architectures": ["LlamaForCausalLM"]},
        },
        "transformer_layer_config": layer,
        "draft_vocab_size": draft_size,
        "norm_before_residual": False,
        "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": layers,
        "norm_before_fc": False,
        "fc_norm": False,
        "norm_output": False,
        "embed_requires_grad": False,
        "torch_dtype": "float32",
    }
    config.update(fields)
    return config


def speculators_tensors(
    target, config: dict, draft_ids: torch.Tensor | None, *, seed: int, scale: float = 0.25, embedding: bool = True
) -> dict[str, torch.Tensor]:
    """Seeded random weights under the format's names; ``lm_head`` = the target head's rows of the draft
    vocabulary (speculators starts its head from the verifier's), ``d2t`` / ``t2d`` for a reduced one."""
    layer = config["transformer_layer_config"]
    hidden, inner = layer["hidden_size"], layer["intermediate_size"]
    q = layer["num_attention_heads"] * layer["head_dim"]
    kv = layer["num_key_value_heads"] * layer["head_dim"]
    fused = len(config["eagle_aux_hidden_state_layer_ids"]) * hidden
    generator = torch.Generator().manual_seed(seed)

    def weight(*shape):
        return torch.randn(*shape, generator=generator) * scale

    def norm(size):
        return 1.0 + 0.1 * torch.randn(size, generator=generator)

    prefix = "layers.0."
    tensors = {
        "fc.weight": weight(hidden, fused),
        f"{prefix}input_layernorm.weight": norm(hidden),
        f"{prefix}hidden_norm.weight": norm(hidden),
        f"{prefix}post_attention_layernorm.weight": norm(hidden),
        f"{prefix}self_attn.q_proj.weight": weight(q, 2 * hidden),
        f"{prefix}self_attn.k_proj.weight": weight(kv, 2 * hidden),
        f"{prefix}self_attn.v_proj.weight": weight(kv, 2 * hidden),
        f"{prefix}self_attn.o_proj.weight": weight(hidden, q),
        f"{prefix}mlp.gate_proj.weight": weight(inner, hidden),
        f"{prefix}mlp.up_proj.weight": weight(inner, hidden),
        f"{prefix}mlp.down_proj.weight": weight(hidden, inner),
        "norm.weight": norm(hidden),
    }
    if config.get("fc_norm"):
        for i in range(len(config["eagle_aux_hidden_state_layer_ids"])):
            tensors[f"fc_norm.{i}.weight"] = norm(hidden)
    lm = target.model.get_output_embeddings().weight.detach().float()
    vocab = int(target.vocab_size)
    ids = torch.arange(vocab) if draft_ids is None else draft_ids
    tensors["lm_head.weight"] = lm[ids].clone()
    if draft_ids is not None:
        tensors["d2t"] = draft_ids - torch.arange(draft_ids.numel())
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[draft_ids] = True
        tensors["t2d"] = t2d
    if embedding:
        tensors["embed_tokens.weight"] = target.model.get_input_embeddings().weight.detach().float().clone()
    return tensors


def write_speculators_eagle3(
    folder: Path,
    target,
    *,
    draft_ids: torch.Tensor | None,
    layers: list[int],
    intermediate: int = 96,
    seed: int = 0,
    verifier: str = "tiny-random-llama",
    tensors: dict | None = None,
    **fields,
) -> Path:
    """A speculators-format EAGLE-3 folder (config.json + model.safetensors) for ``target``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    size = int(target.vocab_size) if draft_ids is None else int(draft_ids.numel())
    config = speculators_config(
        target, draft_size=size, layers=layers, intermediate=intermediate, verifier=verifier, **fields
    )
    weights = speculators_tensors(target, config, draft_ids, seed=seed) if tensors is None else tensors
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
    return folder


def reduced_vocabulary(vocab: int, keep: int, seed: int = 0) -> torch.Tensor:
    """``keep`` target ids in increasing order: the first 4 (specials, EOS among them) and a seeded sample."""
    generator = torch.Generator().manual_seed(seed)
    rest = torch.randperm(vocab - 4, generator=generator)[: keep - 4] + 4
    return torch.cat([torch.arange(4), rest]).sort().values

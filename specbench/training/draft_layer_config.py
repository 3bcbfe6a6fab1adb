"""The transformers (Llama) config of a drafter's one decoder layer, as the exported layouts write it.

Both exports describe specbench's drafter layer (`specbench.engine.drafters.networks.feature_layers.LayerShape`)
as a one-layer Llama config: vLLM's EAGLE / EAGLE-3 layout as the whole ``config.json``
(`specbench.training.vllm_export`), the speculators format as its ``transformer_layer_config``
(`specbench.training.speculators_export`). The target's config gives what the layer shares with it
(vocabulary, special tokens, context length); the layer's own shape gives the rest. RoPE is the
layer's own: plain rotary embeddings with its θ (specbench's drafter layer applies no RoPE scaling,
whatever the target does).
"""

from __future__ import annotations

from specbench.errors import SpecbenchError

SHARED_WITH_TARGET = (
    "vocab_size",
    "hidden_act",
    "max_position_embeddings",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "tie_word_embeddings",
)


def llama_config(target, *, any_target: bool = False) -> dict:
    """The target's config as a dict; a target that is not a Llama is one line (vLLM's EAGLE layouts are
    Llama's), unless ``any_target`` (the speculators format describes the drafter's own layer, whatever
    the target)."""
    config = target.model.config
    if not any_target and getattr(config, "model_type", None) != "llama":
        raise SpecbenchError(
            f"export supports Llama targets (the exported EAGLE/EAGLE-3 layers are Llama's); "
            f"'{target.name}' is {getattr(config, 'model_type', '?')}"
        )
    return config.to_dict()


def draft_llama_config(target, layer_shape: dict, architecture: str | None = None, *, any_target: bool = False) -> dict:
    """A one-layer Llama config of ``layer_shape`` (`LayerShape.to_dict()`) for ``target``; ``architecture``:
    its ``architectures`` entry, if any; ``any_target``: `llama_config`'s."""
    base = llama_config(target, any_target=any_target)
    config = {k: base[k] for k in SHARED_WITH_TARGET if k in base}
    theta = float(layer_shape["rope_theta"])
    config.update(
        {
            "model_type": "llama",
            "num_hidden_layers": 1,
            "intermediate_size": int(layer_shape["intermediate"]),
            "hidden_size": int(layer_shape["hidden"]),
            "num_attention_heads": int(layer_shape["heads"]),
            "num_key_value_heads": int(layer_shape["kv_heads"]),
            "head_dim": int(layer_shape["head_dim"]),
            "rms_norm_eps": float(layer_shape["eps"]),
            "rope_theta": theta,
            "rope_parameters": {"rope_type": "default", "rope_theta": theta},
            "torch_dtype": "float32",
        }
    )
    if architecture is not None:
        config["architectures"] = [architecture]
    return config

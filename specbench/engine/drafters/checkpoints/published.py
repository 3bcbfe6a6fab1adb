"""Published drafter layouts: Medusa heads and EAGLE / EAGLE-3 layers, read and written.

Layouts, as documented by the Medusa (FasterDecoding/Medusa) and EAGLE (SafeAILab/EAGLE)
projects — only the key names and config fields are shared, the code is specbench's own:

* Medusa — ``config.json`` with ``medusa_num_heads``, ``medusa_num_layers``,
  ``base_model_name_or_path``; ``medusa_lm_head.pt`` (or ``.safetensors``) holding, per head i,
  residual blocks ``{i}.{j}.linear.weight/bias`` and the head's vocabulary projection
  ``{i}.{L}.weight`` [V, H] (initialised from the base LM head; specbench shares the target's
  LM head instead, and writes a copy of it only when exporting to this layout).
* EAGLE (EAGLE-1/2) — a Llama ``config.json`` (hidden size, heads, MLP width, one layer, optional
  ``bias`` for the fc) and ``pytorch_model.bin`` (or ``model.safetensors``) with ``fc.weight``
  [H, 2H] over [embedding; feature], ``fc.bias``, ``layers.0.*`` (no input norm on layer 0) and,
  optionally, ``embed_tokens.weight`` (ignored on load: the target's embedding is used).
* EAGLE-3 — a Llama ``config.json`` plus ``draft_vocab_size``; weights ``fc.weight`` [H, 3H],
  ``midlayer.{input_layernorm, hidden_norm, self_attn, post_attention_layernorm, mlp}.*``,
  ``norm.weight``, its own ``lm_head.weight`` [Vd, H] and the vocabulary maps ``d2t`` [Vd]
  (target id = draft id + d2t[draft id]) and ``t2d`` [V] (bool). The fused target layers are
  EAGLE-3's convention: the inputs of decoder layers 2, N/2 and N−3.

Each layout is read and written by its drafter type (``load_published`` / ``export_published``
of `MedusaType`, `EagleType`, `Eagle3Type`); this module holds what they share — reading and
writing tensors and configs, shape checks — and `detect`, which asks every registered trained
type whether it recognizes a folder. These formats carry no fingerprint of the target, so only
shapes (hidden size, vocabulary) are checked.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from specbench.engine.drafters import registry
from specbench.engine.drafters.checkpoints.checkpoint_location import SPECULATORS, is_speculators
from specbench.engine.drafters.networks.feature_layers import LayerShape
from specbench.errors import SpecbenchError
from specbench.models.limits import check_config_sizes
from specbench.models.memory import require
from specbench.safe_files import read_json, replacing, write_atomic, writing


def read_config(path: Path) -> dict:
    """A drafter's config.json, its sizes checked against the bounds table with the memory they imply
    (`specbench.models.limits.check_config_sizes`) before any weight is allocated."""
    config = read_json(path, "drafter config")
    check_config_sizes(config, str(path))
    return config


def read_tensors(folder: Path, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    for name in names:
        path = folder / name
        if not path.is_file():
            continue
        require({"weights file": path.stat().st_size}, f"reading {path}")
        try:
            if name.endswith(".safetensors"):
                return load_file(str(path))
            data = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one user error
            raise SpecbenchError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise SpecbenchError(f"{path} does not hold a state dict")
        return data
    raise SpecbenchError(f"{folder}: no weights file (looked for {', '.join(names)})")


def write_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    with writing(path, "checkpoint weights", remove=path):  # a full disk: one line, no partial file
        if path.suffix == ".safetensors":
            write_atomic(path, safetensors_bytes(tensors))
        else:
            with replacing(path) as handle:
                torch.save(tensors, handle)


def detect(folder: Path) -> str | None:
    """'specbench', 'speculators' or the name of the registered type whose published layout a folder
    holds; None if unknown."""
    config_path = Path(folder) / "config.json"
    try:
        config = read_json(config_path, "drafter config")
    except SpecbenchError:
        return None  # the specbench reader reports what is wrong with it
    if not isinstance(config, dict):
        return None
    if config.get("format") == "specbench-drafter":
        return "specbench"
    if is_speculators(config):  # before the types: its config has EAGLE-3's draft_vocab_size too
        return SPECULATORS
    for drafter_type in registry.trained_types():
        if drafter_type.recognizes(config, Path(folder)):
            return drafter_type.name
    return None


def check_shapes(where: str, hidden: int, vocab: int | None, target) -> None:
    cfg = target.model.config
    if hidden != int(cfg.hidden_size) or (vocab is not None and vocab != int(target.vocab_size)):
        raise SpecbenchError(
            f"{where} was made for a model with hidden size {hidden} and vocabulary {vocab}, "
            f"not for target '{target.name}' (hidden size {cfg.hidden_size}, "
            f"vocabulary {target.vocab_size})"
        )


def llama_config(shape, vocab_size: int, extra: dict) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "num_hidden_layers": 1,
        "rms_norm_eps": shape.eps,
        "rope_theta": shape.rope_theta,
        "max_position_embeddings": 4096,
        "vocab_size": vocab_size,
        "torch_dtype": "float32",
        **extra,
    }


def layer_shape(config: dict, attn_factor: int) -> LayerShape:
    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    if int(config.get("num_hidden_layers", 1)) != 1:
        raise SpecbenchError("only one-layer EAGLE drafters are supported (num_hidden_layers must be 1)")
    return LayerShape(
        hidden=hidden,
        heads=heads,
        kv_heads=int(config.get("num_key_value_heads") or heads),
        head_dim=int(config.get("head_dim") or hidden // heads),
        intermediate=int(config["intermediate_size"]),
        attn_in=attn_factor * hidden,
        rope_theta=float(config.get("rope_theta", 10000.0)),
        eps=float(config.get("rms_norm_eps", 1e-6)),
    )


def load_into(net, tensors: dict, where: str) -> None:
    missing, unexpected = net.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    if missing or unexpected:
        raise SpecbenchError(
            f"{where}: weights do not match the layout (missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]})"
        )

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

`detect` tells which layout a folder holds; `load_published` returns a network and its output
heads for `specbench.engine.drafters.trained.make_trained_drafter`. These formats carry no
fingerprint of the target, so only shapes (hidden size, vocabulary) are checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specbench.errors import SpecbenchError

MEDUSA_WEIGHTS = ("medusa_lm_head.safetensors", "medusa_lm_head.pt")
EAGLE_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SpecbenchError(f"cannot read {path}: {exc}") from None


def _read_tensors(folder: Path, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
    for name in names:
        path = folder / name
        if not path.is_file():
            continue
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                return load_file(str(path))
            data = torch.load(str(path), map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one user error
            raise SpecbenchError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise SpecbenchError(f"{path} does not hold a state dict")
        return data
    raise SpecbenchError(f"{folder}: no weights file (looked for {', '.join(names)})")


def _write_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(tensors, str(path))
    else:
        torch.save(tensors, str(path))


def detect(folder: Path) -> str | None:
    """'specbench', 'medusa', 'eagle' or 'eagle3' for a checkpoint folder; None if unknown."""
    config_path = Path(folder) / "config.json"
    try:
        config = json.loads(config_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # the specbench reader reports what is wrong with it
    if not isinstance(config, dict):
        return None
    if config.get("format") == "specbench-drafter":
        return "specbench"
    if "medusa_num_heads" in config:
        return "medusa"
    if "draft_vocab_size" in config:
        return "eagle3"
    if any((Path(folder) / n).is_file() for n in EAGLE_WEIGHTS) and "hidden_size" in config:
        return "eagle"
    return None


def _check_shapes(where: str, hidden: int, vocab: int | None, target) -> None:
    cfg = target.model.config
    if hidden != int(cfg.hidden_size) or (vocab is not None and vocab != int(target.vocab_size)):
        raise SpecbenchError(f"{where} was made for a model with hidden size {hidden} and vocabulary {vocab}, "
                             f"not for target '{target.name}' (hidden size {cfg.hidden_size}, "
                             f"vocabulary {target.vocab_size})")


def _llama_config(shape, vocab_size: int, extra: dict) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
            "hidden_size": shape.hidden, "intermediate_size": shape.intermediate,
            "num_attention_heads": shape.heads, "num_key_value_heads": shape.kv_heads, "head_dim": shape.head_dim,
            "num_hidden_layers": 1, "rms_norm_eps": shape.eps, "rope_theta": shape.rope_theta,
            "max_position_embeddings": 4096, "vocab_size": vocab_size, "torch_dtype": "float32", **extra}


def _layer_shape(config: dict, attn_factor: int):
    from specbench.engine.drafters.feature_layers import LayerShape

    hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    if int(config.get("num_hidden_layers", 1)) != 1:
        raise SpecbenchError("only one-layer EAGLE drafters are supported (num_hidden_layers must be 1)")
    return LayerShape(hidden=hidden, heads=heads, kv_heads=int(config.get("num_key_value_heads") or heads),
                      head_dim=int(config.get("head_dim") or hidden // heads),
                      intermediate=int(config["intermediate_size"]), attn_in=attn_factor * hidden,
                      rope_theta=float(config.get("rope_theta", 10000.0)), eps=float(config.get("rms_norm_eps", 1e-6)))


def _load_into(net, tensors: dict, where: str) -> None:
    missing, unexpected = net.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    if missing or unexpected:
        raise SpecbenchError(f"{where}: weights do not match the layout (missing {sorted(missing)[:3]}, "
                             f"unexpected {sorted(unexpected)[:3]})")


# ----------------------------------------------------------------------------- Medusa

def export_medusa(folder: Path, heads, target, base_model: str | None = None) -> Path:
    """Write MedusaHeads in Medusa's layout (each head's vocabulary projection = the target's LM head)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lm = target.model.get_output_embeddings().weight.detach().float()
    tensors = {k: v.float() for k, v in heads.state_dict().items()}
    for i in range(heads.num_heads):
        tensors[f"{i}.{heads.num_layers}.weight"] = lm.clone()
    _write_tensors(folder / "medusa_lm_head.pt", tensors)
    (folder / "config.json").write_text(json.dumps({
        "medusa_num_heads": heads.num_heads, "medusa_num_layers": heads.num_layers,
        "base_model_name_or_path": base_model or target.name}, indent=2) + "\n")
    return folder


def load_medusa(folder: Path, target):
    """(MedusaHeads, per-head output weights or None when they are the target's LM head)."""
    from specbench.engine.drafters.medusa import MedusaHeads

    folder = Path(folder)
    config = _read_json(folder / "config.json")
    heads_n, layers = int(config["medusa_num_heads"]), int(config.get("medusa_num_layers", 1))
    tensors = _read_tensors(folder, MEDUSA_WEIGHTS)
    if "0.0.linear.weight" not in tensors:
        raise SpecbenchError(f"{folder}: not a Medusa heads file (no '0.0.linear.weight')")
    hidden = int(tensors["0.0.linear.weight"].shape[0])
    projections = [tensors.pop(f"{i}.{layers}.weight", None) for i in range(heads_n)]
    vocab = int(projections[0].shape[0]) if projections[0] is not None else None
    _check_shapes(f"Medusa heads {folder} (base model {config.get('base_model_name_or_path')})", hidden, vocab, target)
    net = MedusaHeads(hidden, heads_n, layers)
    _load_into(net, tensors, f"Medusa heads {folder}")
    lm = target.model.get_output_embeddings().weight.detach().float().cpu()
    shared = all(p is None or torch.allclose(p.float(), lm, atol=1e-3) for p in projections)
    return net, None if shared else [p.float() if p is not None else lm for p in projections]


# ----------------------------------------------------------------------------- EAGLE

def export_eagle(folder: Path, net, target, *, with_embeddings: bool = False) -> Path:
    """Write an Eagle1Net in EAGLE's layout (config.json + pytorch_model.bin)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.float() for k, v in net.state_dict().items()}
    if with_embeddings:  # EAGLE's own loader is strict and expects them
        tensors["embed_tokens.weight"] = target.model.get_input_embeddings().weight.detach().float().clone()
    _write_tensors(folder / "pytorch_model.bin", tensors)
    config = _llama_config(net.shape, int(target.vocab_size), {"bias": net.fc.bias is not None})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def load_eagle(folder: Path, target):
    from specbench.engine.drafters.eagle import Eagle1Net

    folder = Path(folder)
    config = _read_json(folder / "config.json")
    shape = _layer_shape(config, 1)
    _check_shapes(f"EAGLE checkpoint {folder}", shape.hidden, int(config.get("vocab_size", target.vocab_size)), target)
    tensors = _read_tensors(folder, EAGLE_WEIGHTS)
    tensors.pop("embed_tokens.weight", None)
    net = Eagle1Net(shape, fc_bias="fc.bias" in tensors)
    _load_into(net, tensors, f"EAGLE checkpoint {folder}")
    return net, None, None


def export_eagle3(folder: Path, net, target, draft_vocab: torch.Tensor | None) -> Path:
    """Write an Eagle3Net in EAGLE-3's layout, with the (target) head rows and d2t / t2d maps."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = int(target.vocab_size)
    ids = torch.arange(vocab) if draft_vocab is None else draft_vocab.long().cpu()
    lm = target.model.get_output_embeddings().weight.detach().float().cpu()
    tensors = {k: v.float() for k, v in net.state_dict().items()}
    tensors["lm_head.weight"] = lm.index_select(0, ids).clone()
    tensors["d2t"] = ids - torch.arange(ids.numel())
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    tensors["t2d"] = t2d
    _write_tensors(folder / "pytorch_model.bin", tensors)
    config = _llama_config(net.shape, vocab, {"draft_vocab_size": int(ids.numel())})
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def load_eagle3(folder: Path, target):
    from specbench.engine.drafters.eagle import Eagle3Net, eagle3_layers

    folder = Path(folder)
    config = _read_json(folder / "config.json")
    shape = _layer_shape(config, 2)
    _check_shapes(f"EAGLE-3 checkpoint {folder}", shape.hidden, int(config.get("vocab_size", target.vocab_size)),
                  target)
    tensors = _read_tensors(folder, EAGLE_WEIGHTS)
    tensors.pop("embed_tokens.weight", None)
    head = tensors.pop("lm_head.weight", None)
    d2t, t2d = tensors.pop("d2t", None), tensors.pop("t2d", None)
    del t2d  # implied by d2t
    size = int(config["draft_vocab_size"])
    ids = torch.arange(size) + (d2t.long() if d2t is not None else 0)
    if int(ids.max()) >= target.vocab_size:
        raise SpecbenchError(f"EAGLE-3 checkpoint {folder}: draft vocabulary reaches id {int(ids.max())}, beyond "
                             f"target '{target.name}' ({target.vocab_size} tokens)")
    layers = eagle3_layers(int(target.model.config.num_hidden_layers))
    net = Eagle3Net(shape, layers)
    _load_into(net, tensors, f"EAGLE-3 checkpoint {folder}")
    draft_vocab = None if size == target.vocab_size and bool((ids == torch.arange(size)).all()) else ids
    own = None
    if head is not None:
        lm = target.model.get_output_embeddings().weight.detach().float().cpu()
        if not torch.allclose(head.float(), lm.index_select(0, ids), atol=1e-3):
            own = [head.float()]
    return net, draft_vocab, own


def load_published(folder: Path, kind: str, target):
    """(net, draft_vocab, head_weights) of a Medusa / EAGLE / EAGLE-3 folder for drafter ``kind``."""
    layout = detect(folder)
    if layout is None:
        raise SpecbenchError(f"{folder}: not a specbench, Medusa, EAGLE or EAGLE-3 checkpoint (no recognised "
                             "config.json)")
    if layout != kind:
        raise SpecbenchError(f"{folder} holds a {layout} checkpoint, not a {kind} one")
    if kind == "medusa":
        net, heads = load_medusa(folder, target)
        return net, None, heads
    if kind == "eagle":
        return load_eagle(folder, target)
    return load_eagle3(folder, target)

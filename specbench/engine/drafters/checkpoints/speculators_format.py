"""The speculators format (vllm-project/speculators): EAGLE-3 heads read into the own engine.

The format, as the speculators project publishes it (its config schema, ``Eagle3SpeculatorConfig``) and
vLLM 0.32 reads it (``vllm/transformers_utils/configs/speculators/``, ``model_executor/models/
llama_eagle3.py``); only field and tensor names are shared, the code is specbench's own.

``config.json``:

* ``speculators_model_type`` — the algorithm (``eagle3``; speculators also has ``peagle``, ``dflash``,
  ``dspark``, ``mtp``), which with the flags below names the specbench kind
  (`specbench.catalogue.drafters.from_speculators`: ``eagle3``, or ``eagle3.1`` when ``fc_norm`` and
  ``norm_output`` are set);
* ``speculators_config`` — ``algorithm``, ``proposal_methods`` (``[{proposal_type: greedy,
  speculative_tokens: K, ...}]``: K is what ``vllm serve FOLDER`` drafts), ``default_proposal_method``
  and ``verifier`` (``name_or_path``, ``architectures``: the target, which ``vllm serve FOLDER`` loads);
* ``transformer_layer_config`` — the decoder layer as a transformers config (``model_type``,
  ``hidden_size``, heads, ``head_dim``, ``intermediate_size``, ``rms_norm_eps``, RoPE, ``vocab_size`` =
  the target's vocabulary, ``num_hidden_layers``);
* ``draft_vocab_size`` (absent: the whole vocabulary), ``eagle_aux_hidden_state_layer_ids`` (the fused
  target layers; absent: 2, N/2, N−3), ``target_hidden_size``, and the switches ``norm_before_residual``
  (the residual stream starts from RMSNorm(g), not g; absent: true, as vLLM reads it),
  ``norm_before_fc`` (one RMSNorm over [l; m; h]), ``fc_norm`` (one per fused layer) and
  ``norm_output`` (EAGLE-3.1's post-norm step output).

Weights (``model.safetensors``, or shards listed by ``model.safetensors.index.json``): ``fc.weight``
[H, k·H], ``layers.0.{input_layernorm, hidden_norm, self_attn.{q,k,v,o}_proj,
post_attention_layernorm, mlp.{gate,up,down}_proj}.weight``, ``norm.weight``, ``lm_head.weight``
[Vd, H], the vocabulary maps ``d2t`` [Vd] (target id = draft id + d2t[draft id]) and ``t2d`` [V]
(bool: the target ids in the draft vocabulary), optionally ``embed_tokens.weight`` (the target's
embedding, copied) and ``fc_norm.{i}.weight``.

The own engine runs what its EAGLE-3 network (`specbench.engine.drafters.networks.eagle.Eagle3Net`) computes:
one Llama decoder layer, plain RoPE, no biases, the target's own embedding; a head outside that
(a Qwen3 layer with its q/k norms, several layers, ``norm_before_fc``, RoPE scaling, another hidden
size than the target's) is refused in one line naming the field, and runs on the vLLM backends only.
The format carries no fingerprint of its target, so only shapes are checked (hidden size,
vocabulary, layer ids), plus the embedding when the checkpoint holds a copy. The writer is
`specbench.training.speculators_export`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from specbench.catalogue import drafters as catalogue
from specbench.engine.drafters.checkpoints import published
from specbench.engine.drafters.checkpoints.checkpoint_location import SPECULATORS_KEYS, is_speculators
from specbench.engine.drafters.networks.feature_layers import LayerShape
from specbench.errors import SpecbenchError
from specbench.models.memory import checked_module
from specbench.safe_files import read_json

TYPE_KEY = SPECULATORS_KEYS[0]
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
SHARD_INDEX = "model.safetensors.index.json"
LAYER_PREFIX = "layers.0."  # the format's name of the one decoder layer (EAGLE's own layout: midlayer.)
NET_LAYER_PREFIX = "midlayer."
IGNORED = ("verifier_lm_head.weight", "verifier_norm.weight")  # training-only tensors the format may carry
DEFAULT_NORM_BEFORE_RESIDUAL = True  # vLLM's reading of a config without the key
# transformer_layer_config values the own engine's layer computes, and what it refuses otherwise
LAYER_REQUIREMENTS = {
    "model_type": ("llama", "Llama decoder layers only"),
    "num_hidden_layers": (1, "one layer"),
    "hidden_act": ("silu", "SwiGLU with SiLU"),
    "attention_bias": (False, "no biases"),
    "mlp_bias": (False, "no biases"),
}


def read_config(folder: Path) -> dict:
    config = published.read_config(Path(folder) / "config.json")
    if not is_speculators(config):
        raise SpecbenchError(f"{folder}/config.json is not in the speculators format (no {TYPE_KEY})")
    return config


def kind_of(config: dict) -> str:
    """The specbench drafter kind of a speculators config (one line naming the field when there is none)."""
    return catalogue.from_speculators(config)


def _fail(where: str, field: str, message: str):
    raise SpecbenchError(f"{where}: {field} {message}")


def _number(layer: dict, key: str, where: str, *, default=None, kind: type = int):
    """``transformer_layer_config[key]``: a positive whole number (``kind`` int) or a positive number (float);
    absent or null, ``default`` (required when that is None); otherwise one line naming the field."""
    value = layer.get(key)
    if value is None:
        value = default
    if value is None:
        _fail(where, f"transformer_layer_config.{key}", "is missing")
    allowed = (int,) if kind is int else (int, float)
    if value is None or isinstance(value, bool) or not isinstance(value, allowed) or value <= 0:
        what = "a positive whole number" if kind is int else "a positive number"
        _fail(where, f"transformer_layer_config.{key}", f"is {value!r}: it must be {what}")
    return kind(value)


def layer_shape(config: dict, target, where: str) -> LayerShape:
    """The decoder layer of ``transformer_layer_config``, checked against what the own engine computes and
    against the target (hidden size, vocabulary)."""
    layer = config.get("transformer_layer_config")
    if not isinstance(layer, dict):
        _fail(where, "transformer_layer_config", "is missing (a speculators config describes its decoder layer there)")
    for key, (wanted, what) in LAYER_REQUIREMENTS.items():
        value = layer.get(key, wanted)
        if value != wanted:
            _fail(
                where,
                f"transformer_layer_config.{key}",
                f"is {value!r}: the own engine runs {what} ({key} {wanted!r}); the vLLM backends run this head",
            )
    rope = layer.get("rope_scaling") or {}
    parameters = layer.get("rope_parameters") or {}
    for field, value in (("rope_scaling", rope), ("rope_parameters", parameters)):
        rope_type = value.get("rope_type", value.get("type", "default")) if isinstance(value, dict) else value
        if rope_type not in ("default", None):
            _fail(
                where,
                f"transformer_layer_config.{field}",
                f"has rope_type {rope_type!r}: the own engine runs plain RoPE only; the vLLM backends run this head",
            )
    cfg = target.model.config
    hidden = _number(layer, "hidden_size", where)
    vocab = _number(layer, "vocab_size", where, default=int(target.vocab_size))
    if hidden != int(cfg.hidden_size):
        _fail(
            where,
            "transformer_layer_config.hidden_size",
            f"is {hidden}, target '{target.name}' has "
            f"{cfg.hidden_size}: the own engine shares the target's embedding, so only heads of the target's width run",
        )
    if vocab != int(target.vocab_size):
        _fail(
            where,
            "transformer_layer_config.vocab_size",
            f"is {vocab}, target '{target.name}' has {target.vocab_size} tokens: the head was made for another target",
        )
    if config.get("target_hidden_size") not in (None, hidden):
        _fail(
            where,
            "target_hidden_size",
            f"is {config['target_hidden_size']}: the own engine fuses target "
            f"features of the head's own width ({hidden})",
        )
    if config.get("norm_before_fc"):
        _fail(
            where,
            "norm_before_fc",
            "is set (one RMSNorm over the fused layers): the own engine has no such norm; "
            "the vLLM backends run this head",
        )
    heads = _number(layer, "num_attention_heads", where)
    theta_default = parameters.get("rope_theta", 10000.0) if isinstance(parameters, dict) else 10000.0
    return LayerShape(
        hidden=hidden,
        heads=heads,
        kv_heads=_number(layer, "num_key_value_heads", where, default=heads),
        head_dim=_number(layer, "head_dim", where, default=hidden // heads),
        intermediate=_number(layer, "intermediate_size", where),
        attn_in=2 * hidden,
        rope_theta=_number(layer, "rope_theta", where, default=theta_default, kind=float),
        eps=_number(layer, "rms_norm_eps", where, default=1e-6, kind=float),
    )


def feature_layers(config: dict, target, default: list[int], where: str) -> tuple[int, ...]:
    """The fused target layers: ``eagle_aux_hidden_state_layer_ids`` (vLLM's aux state i is the output of
    i decoder layers, 0 the embeddings: specbench's indexing; absent: ``default``, the kind's own choice),
    increasing, as vLLM concatenates them."""
    layers = int(target.model.config.num_hidden_layers)
    ids = config.get("eagle_aux_hidden_state_layer_ids") or default
    if (
        not isinstance(ids, (list, tuple))
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
        or not all(0 <= i <= layers for i in ids)
        or list(ids) != sorted(set(ids))
    ):
        _fail(
            where,
            "eagle_aux_hidden_state_layer_ids",
            f"is {ids!r}: increasing layer indices from 0 to {layers} "
            f"(target '{target.name}' has {layers} layers) are needed",
        )
    return tuple(int(i) for i in ids)


def read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    """All tensors of the checkpoint: one weights file, or the shards its safetensors index lists."""
    index = Path(folder) / SHARD_INDEX
    if not index.is_file():
        return published.read_tensors(Path(folder), WEIGHTS)
    index_data = read_json(index, "shard index")
    weight_map = index_data.get("weight_map") if isinstance(index_data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise SpecbenchError(f"{index}: no weight_map")
    tensors: dict[str, torch.Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        tensors.update(published.read_tensors(Path(folder), (str(shard),)))
    return tensors


def draft_vocabulary(config: dict, tensors: dict, target, where: str) -> torch.Tensor | None:
    """Target ids of the draft vocabulary in draft-id order ([Vd]; None: the whole vocabulary), from
    ``d2t`` (and ``t2d``, which must agree)."""
    vocab = int(target.vocab_size)
    size = config.get("draft_vocab_size") or vocab
    d2t, t2d = tensors.pop("d2t", None), tensors.pop("t2d", None)
    if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= vocab:
        _fail(where, "draft_vocab_size", f"is {size!r}: it must be between 1 and the vocabulary ({vocab})")
    if size == vocab and d2t is None:
        return None
    if d2t is None or tuple(d2t.shape) != (size,):
        _fail(
            where,
            "d2t",
            f"must be a [{size}] tensor for a draft vocabulary of {size} "
            f"(got {None if d2t is None else tuple(d2t.shape)})",
        )
    ids = torch.arange(size) + d2t.long()
    if int(ids.min()) < 0 or int(ids.max()) >= vocab or ids.unique().numel() != size:
        _fail(where, "d2t", f"maps draft ids outside target '{target.name}' ({vocab} tokens) or twice to one id")
    if t2d is not None:
        marked = t2d.bool()
        if tuple(t2d.shape) != (vocab,) or int(marked.sum()) != size or not bool(marked[ids].all()):
            _fail(where, "t2d", "does not mark exactly the target ids d2t maps to")
    if size == vocab and bool((ids == torch.arange(vocab)).all()):
        return None
    return ids


def check_embedding(tensors: dict, target, where: str) -> None:
    """A checkpoint's copy of the embedding must be the target's (within bf16 rounding): the own engine
    drafts with the target's embedding, as vLLM does for a checkpoint without one."""
    embedding = tensors.pop("embed_tokens.weight", None)
    if embedding is None:
        return
    own = target.model.get_input_embeddings().weight.detach().float().cpu()
    if tuple(embedding.shape) != tuple(own.shape) or not torch.allclose(embedding.float(), own, rtol=1.6e-2, atol=1e-3):
        _fail(
            where,
            "embed_tokens.weight",
            f"is not target '{target.name}''s embedding: the head was trained for another target",
        )


def net_tensors(tensors: dict, where: str) -> dict[str, torch.Tensor]:
    """The format's tensor names → `Eagle3Net`'s (``layers.0.`` → ``midlayer.``); anything else is refused."""
    out = {}
    for name, tensor in tensors.items():
        if name in IGNORED:
            continue
        if name.startswith(LAYER_PREFIX):
            out[NET_LAYER_PREFIX + name[len(LAYER_PREFIX) :]] = tensor
        elif name.startswith("layers."):
            _fail(where, name, "belongs to a second decoder layer: the own engine runs one-layer heads")
        elif name.startswith(("fc.", "fc_norm.", "norm.", NET_LAYER_PREFIX)):
            out[name] = tensor
        else:
            _fail(where, name, "is not a tensor of a speculators EAGLE-3 head the own engine runs")
    return out


def load(folder: Path, target, drafter_type) -> tuple[torch.nn.Module, torch.Tensor | None, list[torch.Tensor]]:
    """(net, draft vocabulary | None, [own LM head rows [Vd, H]]) of a speculators-format folder, built by
    ``drafter_type`` (a `TrainedType` of a kind with a speculators format); a checkpoint of another kind, or
    with a field the own engine does not run, is one line."""
    folder = Path(folder)
    where = f"speculators checkpoint {folder}"
    config = read_config(folder)
    found = kind_of(config)
    if found != drafter_type.name:
        raise SpecbenchError(
            f"{where} holds a {found} head (speculators_model_type {config.get(TYPE_KEY)!r}, "
            f"fc_norm {bool(config.get('fc_norm'))}, norm_output {bool(config.get('norm_output'))}), "
            f"not {drafter_type.name}: use --drafter {found}:checkpoint={folder}"
        )
    shape = layer_shape(config, target, where)
    default_layers = drafter_type.architecture(target.model.config)["feature_layers"]
    tensors = read_tensors(folder)
    ids = draft_vocabulary(config, tensors, target, where)
    check_embedding(tensors, target, where)
    head = tensors.pop("lm_head.weight", None)
    rows = int(target.vocab_size) if ids is None else ids.numel()
    if head is None or tuple(head.shape) != (rows, shape.hidden):
        _fail(
            where,
            "lm_head.weight",
            f"must be [{rows}, {shape.hidden}] (got {None if head is None else tuple(head.shape)})",
        )
    architecture = {
        "layer": shape.to_dict(),
        "feature_layers": list(feature_layers(config, target, default_layers, where)),
        "fc_norm": bool(config.get("fc_norm")),
        "norm_output": bool(config.get("norm_output")),
        "norm_before_residual": bool(config.get("norm_before_residual", DEFAULT_NORM_BEFORE_RESIDUAL)),
    }
    weights = net_tensors(tensors, where)
    net = checked_module(lambda: drafter_type.new_net(architecture), where, weights, config="transformer_layer_config")
    try:
        published.load_into(net, weights, where)
    except RuntimeError as exc:  # a tensor of the wrong shape
        raise SpecbenchError(
            f"{where}: weights do not fit transformer_layer_config ({str(exc).strip().splitlines()[-1].strip()})"
        ) from None
    return net, ids, [head.float()]


def speculative_tokens(config: dict) -> int | None:
    """K of the checkpoint's first proposal method (what ``vllm serve FOLDER`` drafts), if it says."""
    try:
        return int(config["speculators_config"]["proposal_methods"][0]["speculative_tokens"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None

"""``specbench export-drafter``: a trained drafter in the folder layout vLLM loads (``--format vllm``), or in
the speculators format (``--format speculators``, written by `specbench.training.speculators_export`).

The drafter is read through the public loader (`specbench.engine.drafters.make_drafter`, the
same object the engine drafts with), so the exported weights are exactly the ones measured.
Layouts checked against vLLM 0.32.0's own loaders (model_executor/models/llama_eagle.py,
llama_eagle3.py, medusa.py); what each export changes, and why, is in ``NOTES`` and
docs/drafters.md ("Exporting to vLLM"):

* ``eagle`` → ``EagleLlamaForCausalLM``: ``fc`` [H, 2H] on [embedding; feature], one decoder
  layer without input norm, the target's embedding and LM head shared. vLLM's ``fc`` has no
  bias; specbench's has one, folded exactly into the layer with ``attention_bias``:
  q/k/v biases W_q·b, W_k·b, W_v·b and o_proj bias b (RoPE is linear, and o_proj's bias puts b
  back on the residual stream). vLLM's EAGLE-1 has no reduced draft vocabulary: it drafts over
  the full vocabulary, where specbench drafts over its 8192-token draft vocabulary, so the two
  propose differently whenever the full-vocabulary argmax is outside the draft vocabulary.
* ``eagle3`` → ``LlamaForCausalLMEagle3``: ``fc`` [H, 3H] over target layers
  ``eagle_aux_hidden_state_layer_ids`` (the same indexing: the input of 0-based layer i = the
  output of layer i, 0 the embeddings), ``midlayer.*``, ``norm``, ``lm_head`` [Vd, H] = the
  target LM head's draft-vocabulary rows, ``d2t`` = target id − draft id. Exact.
* ``medusa`` → ``MedusaModel`` (model_type medusa): ``blocks.{h}.layers.0`` (x + SiLU(Wx + b)),
  one shared ``lm_head`` (``original_lm_head``) = the target head's draft-vocabulary rows, with
  ``token_map`` and ``truncated_vocab_size``. Exact.
* ``mtp``: not exportable. vLLM's MTP reads the multi-token-prediction layers from the
  *target's own* checkpoint for model families that ship them (DeepSeek, Qwen3-Next, GLM-4.5,
  MiMo, ...); there is no MTP path for a Llama target and no separate-checkpoint MTP format.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save as safetensors_bytes

from specbench.analysis.settings.vllm_speculative import speculative_config
from specbench.catalogue import drafters as catalogue
from specbench.catalogue.registry import resolve
from specbench.engine.drafters import make_drafter
from specbench.engine.drafters.checkpoints.speculators_format import speculative_tokens
from specbench.errors import SpecbenchError
from specbench.models.resolve import load_model
from specbench.safe_files import write_atomic, write_json, writing
from specbench.training.draft_layer_config import draft_llama_config
from specbench.training.speculators_export import export_speculators

FORMATS = ("vllm", "speculators")  # vLLM's own layouts (this module); the speculators format (speculators_export)
EAGLE_STEPS = 3  # the num_speculative_tokens printed for an exported EAGLE / EAGLE-3 head (any γ works)


def serving_config(kind: str, folder: Path, config: dict) -> dict:
    """The speculative_config that serves an export in ``folder`` (its ``config.json`` is ``config``): the
    one mapping (`analysis.settings.vllm_speculative`) with the folder as the checkpoint; γ = the head count of
    a layout that has one (Medusa's ``num_heads``), the speculators format's proposal length, else
    `EAGLE_STEPS`."""
    gamma = speculative_tokens(config) or int(config.get("num_heads", EAGLE_STEPS))
    return speculative_config(kind, {"checkpoint": str(Path(folder).resolve())}, gamma)


def _cpu(tensors: dict) -> dict:
    return {k: v.detach().to("cpu").contiguous().clone() for k, v in tensors.items()}


def export_eagle(drafter, target) -> tuple[dict, dict, list[str]]:
    net = drafter.net
    sd = {k: v.float() for k, v in net.state_dict().items()}
    tensors = {k: v for k, v in sd.items() if k != "fc.bias"}
    config = draft_llama_config(target, net.shape.to_dict(), "EagleLlamaForCausalLM")
    notes = [
        "vLLM's EAGLE-1 drafts over the full vocabulary (no draft-vocabulary map for EAGLE-1): specbench's "
        f"{drafter.head.draft_size}-token draft vocabulary is dropped, so proposals differ when the "
        "full-vocabulary argmax lies outside it"
    ]
    bias = sd.get("fc.bias")
    if bias is not None and bool(torch.any(bias != 0)):
        prefix = "layers.0.self_attn."
        for proj in ("q", "k", "v"):
            tensors[f"{prefix}{proj}_proj.bias"] = sd[f"{prefix}{proj}_proj.weight"] @ bias
        tensors[f"{prefix}o_proj.bias"] = bias.clone()
        config["attention_bias"] = True
        notes.append("fc's bias (vLLM's fc has none) is folded exactly into attention biases: q/k/v = W·b, o_proj = b")
    return config, tensors, notes


def export_eagle3(drafter, target) -> tuple[dict, dict, list[str]]:
    net, head = drafter.net, drafter.head
    tensors = {k: v.float() for k, v in net.state_dict().items()}
    tensors["lm_head.weight"] = head.weight.float()
    config = draft_llama_config(target, net.shape.to_dict(), "LlamaForCausalLMEagle3")
    layers = [int(i) for i in net.feature_layers]
    config.update(
        {
            "target_hidden_size": int(target.model.config.hidden_size),
            "eagle_config": {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": layers},
            "norm_before_fc": False,
            "norm_output": False,
        }
    )
    if head.ids is not None:
        ids = head.ids.long()
        tensors["d2t"] = ids - torch.arange(ids.numel(), dtype=torch.long)
        config["draft_vocab_size"] = int(ids.numel())
    else:
        config["draft_vocab_size"] = int(config["vocab_size"])
    return config, tensors, []


def export_medusa(drafter, target) -> tuple[dict, dict, list[str]]:
    heads = drafter.heads
    tensors: dict = {}
    for h, block in enumerate(heads):
        for layer_index, layer in enumerate(block):
            tensors[f"blocks.{h}.layers.{layer_index}.weight"] = layer.linear.weight.float()
            tensors[f"blocks.{h}.layers.{layer_index}.bias"] = layer.linear.bias.float()
    vocab_heads = drafter.vocab_heads
    if any(v is not vocab_heads[0] for v in vocab_heads):
        raise SpecbenchError(
            "this Medusa checkpoint has one output layer per head; specbench exports the shared-head layout only"
        )
    vhead = vocab_heads[0]
    vocab = int(target.model.config.vocab_size)
    tensors["lm_head.weight"] = vhead.weight.float()
    config = {
        "architectures": ["MedusaModel"],
        "model_type": "medusa",
        "hidden_size": int(heads.hidden),
        "vocab_size": vocab,
        "num_heads": int(heads.num_heads),
        "num_hidden_layers": int(heads.num_layers),
        "original_lm_head": True,
        "medusa_fc_bias": True,
        "truncated_vocab_size": vhead.draft_size,
    }
    if vhead.ids is not None:
        tensors["token_map"] = vhead.ids.long()
    return config, tensors, []


def exporter(kind: str, fmt: str = "vllm", *, verifier: str | None = None):
    """The exporter of ``kind`` to format ``fmt``: (drafter, target) -> (config, tensors, notes). For vLLM's
    layouts the catalogue entry's ``export``, for the speculators format the entry's ``speculators`` type;
    otherwise a one-line refusal saying why."""
    if fmt not in FORMATS:
        raise SpecbenchError(f"unknown export format '{fmt}' (choose from: {', '.join(FORMATS)})")
    entry = catalogue.buildable(kind)
    if fmt == "speculators":
        if entry.speculators is None:
            raise SpecbenchError(
                f"'{kind}' has no speculators format (it has: {', '.join(catalogue.speculators_kinds())})"
            )
        return lambda drafter, target: export_speculators(kind, drafter, target, verifier=verifier)
    if entry.not_exportable:
        raise SpecbenchError(f"'{kind}' cannot be exported to vLLM: {entry.not_exportable}")
    if entry.export is None:
        hint = " (--format speculators writes it)" if entry.speculators else ""
        raise SpecbenchError(f"'{kind}' has no vLLM export{hint} (exportable: {', '.join(catalogue.exportable())})")
    return resolve(entry.export, f"the vLLM export of '{kind}'")


def export_drafter(
    kind: str,
    out: Path,
    *,
    checkpoint: str | None = None,
    target: str = "smollm2-135m",
    fmt: str = "vllm",
    verifier: str | None = None,
) -> dict:
    """Write ``kind``'s checkpoint in format ``fmt`` (vLLM's layout, or the speculators format) into ``out``;
    returns what was written and the speculative_config that serves it."""
    exporter(kind, fmt)  # refused before the target loads
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise SpecbenchError(f"{out} exists and is not empty: choose a new folder")
    loaded = load_model(target, device="cpu", dtype="fp32")
    params = {"checkpoint": checkpoint} if checkpoint else {}
    drafter = make_drafter(kind, loaded, params, device="cpu", dtype="fp32")
    return write_export(kind, drafter, loaded, out, fmt=fmt, verifier=verifier)


def write_export(kind: str, drafter, target, out: Path, fmt: str = "vllm", verifier: str | None = None) -> dict:
    """Write an already built drafter of ``target`` (a `LoadedModel`) into ``out``."""
    config, tensors, notes = exporter(kind, fmt, verifier=verifier)(drafter, target)
    out = Path(out)
    created = not out.exists()
    with writing(out, "exported checkpoint", remove=out if created else out / "model.safetensors"):
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "model.safetensors", safetensors_bytes(_cpu(tensors), metadata={"format": "pt"}))
        write_json(out / "config.json", config)
    speculative = serving_config(kind, out, config)
    report = {
        "kind": kind,
        "format": fmt,
        "folder": str(out),
        "target": target.name,
        "tensors": sorted(tensors),
        "notes": notes,
        "speculative_config": speculative,
    }
    write_json(out / "specbench-export.json", report)
    return report

"""Trained drafters (medusa, eagle, eagle3, mtp): architectures, checkpoints, construction.

`new_net` builds a drafter network for a target (architecture chosen from the target's
config), `save_drafter` / `load_net` write and read the checkpoint folder
(`specbench.engine.drafters.checkpoint`), and `build_drafter` is what the registry calls:
a checkpoint path or shipped name (default: the one shipped for the target), or ``random``
— a seeded random initialisation, for tests and plumbing checks only.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from specbench.engine.drafters import checkpoint as ckpt
from specbench.engine.drafters.feature_layers import LayerShape, VocabHead
from specbench.errors import SpecbenchError

KINDS = ("medusa", "eagle", "eagle3", "mtp")
DRAFT_VOCAB_KEY = "draft_vocab"
RANDOM = "random"

# Defaults sized so that the four SmolLM2-135M drafters stay under 30 MB together in bf16.
DEFAULTS = {"medusa": {"heads": 4, "layers": 1}, "eagle": {"intermediate": 768}, "eagle3": {"intermediate": 768},
            "mtp": {"intermediate": 768, "modules": 2}}


def default_architecture(kind: str, target_config, **overrides) -> dict:
    """The architecture dict of a new ``kind`` drafter for a target with config ``target_config``."""
    from specbench.engine.drafters.eagle import eagle3_layers

    opts = {**DEFAULTS[kind], **{k: v for k, v in overrides.items() if v is not None}}
    hidden = int(target_config.hidden_size)
    if kind == "medusa":
        return {"hidden": hidden, "heads": int(opts["heads"]), "layers": int(opts["layers"])}
    if kind == "eagle":
        return {"layer": LayerShape.for_target(target_config, intermediate=opts["intermediate"]).to_dict(),
                "fc_bias": True}
    if kind == "eagle3":
        layers = opts.get("feature_layers") or eagle3_layers(int(target_config.num_hidden_layers))
        return {"layer": LayerShape.for_target(target_config, intermediate=opts["intermediate"],
                                               attn_in_factor=2).to_dict(), "feature_layers": list(layers)}
    if kind == "mtp":
        return {"layer": LayerShape.for_target(target_config, intermediate=opts["intermediate"]).to_dict(),
                "modules": int(opts["modules"])}
    raise SpecbenchError(f"unknown trained drafter type '{kind}' (choose from: {', '.join(KINDS)})")


def new_net(kind: str, architecture: dict, *, zero_init: bool = True) -> nn.Module:
    if kind == "medusa":
        from specbench.engine.drafters.medusa import MedusaHeads

        return MedusaHeads.from_architecture(architecture, zero_init=zero_init)
    if kind == "eagle":
        from specbench.engine.drafters.eagle import Eagle1Net

        return Eagle1Net.from_architecture(architecture)
    if kind == "eagle3":
        from specbench.engine.drafters.eagle import Eagle3Net

        return Eagle3Net.from_architecture(architecture)
    if kind == "mtp":
        from specbench.engine.drafters.mtp import MTPNet

        return MTPNet.from_architecture(architecture)
    raise SpecbenchError(f"unknown trained drafter type '{kind}' (choose from: {', '.join(KINDS)})")


def parameter_count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


# ----------------------------------------------------------------------------- files

def save_drafter(folder: Path, kind: str, net: nn.Module, target, draft_vocab: torch.Tensor | None,
                 training: dict | None = None, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Write a checkpoint: architecture, target record, training record, weights in ``dtype``."""
    tensors = dict(net.state_dict())
    if draft_vocab is not None:
        tensors[DRAFT_VOCAB_KEY] = draft_vocab.to(torch.int32)
    config = {"type": kind, "architecture": net.architecture(),
              "feature_layers": [k if isinstance(k, str) else int(k) for k in feature_layers_of(net)],
              "draft_vocab_size": None if draft_vocab is None else int(draft_vocab.numel()),
              "parameters": parameter_count(net), "target": ckpt.target_record(target),
              "training": training or {}}
    return ckpt.write_checkpoint(folder, config, tensors, dtype)


def feature_layers_of(net: nn.Module) -> tuple:
    return tuple(getattr(net, "feature_layers", ("final",)))


def load_net(checkpoint: ckpt.Checkpoint, target) -> tuple[nn.Module, torch.Tensor | None]:
    """The network and draft vocabulary of a checkpoint, checked against ``target``."""
    ckpt.check_target(checkpoint.config, target, str(checkpoint.path))
    kind = checkpoint.type
    tensors = dict(checkpoint.tensors)
    draft_vocab = tensors.pop(DRAFT_VOCAB_KEY, None)
    try:
        net = new_net(kind, checkpoint.config["architecture"])
        missing, unexpected = net.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise SpecbenchError(f"drafter checkpoint {checkpoint.path}: weights do not fit its architecture "
                             f"({str(exc).splitlines()[0]})") from None
    if missing or unexpected:
        raise SpecbenchError(f"drafter checkpoint {checkpoint.path}: missing {sorted(missing)[:3]} "
                             f"unexpected {sorted(unexpected)[:3]} weights")
    return net, None if draft_vocab is None else draft_vocab.long()


# ----------------------------------------------------------------------------- drafters

def make_trained_drafter(kind: str, net: nn.Module, target, draft_vocab: torch.Tensor | None = None,
                         head_weights: list[torch.Tensor] | None = None):
    """Wrap a network (already on the target's device and dtype) as an engine drafter."""
    model = target.model
    lm_head = model.get_output_embeddings()
    if kind == "medusa":
        from specbench.engine.drafters.medusa import MedusaDrafter

        if head_weights is None:
            shared = VocabHead(lm_head, target.vocab_size, draft_vocab)
            heads = [shared] * net.num_heads
        else:  # a published checkpoint with its own output layer per head
            heads = [VocabHead(None, target.vocab_size, draft_vocab, weight=w) for w in head_weights]
        return MedusaDrafter(net, heads)
    head = VocabHead(lm_head, target.vocab_size, draft_vocab,
                     weight=None if head_weights is None else head_weights[0])
    if kind in ("eagle", "eagle3"):
        from specbench.engine.drafters.eagle import FeatureDrafter

        return FeatureDrafter(net, model, head)
    if kind == "mtp":
        from specbench.engine.drafters.mtp import MTPDrafter

        return MTPDrafter(net, model, head)
    raise SpecbenchError(f"unknown trained drafter type '{kind}'")


def build_drafter(kind: str, target, *, device: str, dtype: str, checkpoint: str | None = None, seed: int = 0):
    """The registry's builder: checkpoint = path (specbench, Medusa, EAGLE or EAGLE-3 layout), shipped
    name, None (the one shipped for the target) or 'random'."""
    param = next(target.model.parameters())
    if str(checkpoint).strip().lower() == RANDOM:
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(int(seed))
        try:
            net = new_net(kind, default_architecture(kind, target.model.config), zero_init=False)
        finally:
            torch.random.set_rng_state(generator_state)
        draft_vocab, head_weights = None, None
    else:
        from specbench.engine.drafters.published import detect, load_published

        folder = ckpt.resolve_checkpoint(checkpoint, kind, target.name)
        head_weights = None
        if detect(folder) in (None, "specbench"):  # None: read_checkpoint says what is wrong
            net, draft_vocab = load_net(ckpt.read_checkpoint(folder, expected_type=kind), target)
        else:  # a Medusa / EAGLE / EAGLE-3 folder in its project's own layout
            net, draft_vocab, head_weights = load_published(folder, kind, target)
    net = net.to(device=param.device, dtype=param.dtype).eval()
    net.requires_grad_(False)
    if head_weights is not None:
        head_weights = [w.to(device=param.device, dtype=param.dtype) for w in head_weights]
    return make_trained_drafter(kind, net, target, draft_vocab, head_weights)

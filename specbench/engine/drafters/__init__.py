"""Drafter registry: a name, its parameters, and how to build it for a target."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from specbench.errors import SpecbenchError, did_you_mean


@dataclass(frozen=True)
class DrafterSpec:
    name: str
    summary: str
    build: Callable  # build(target: LoadedModel, *, device, dtype, backend, **params) -> Drafter
    token_level: bool = True  # needs the target's vocabulary


def _build_ngram(target, *, device, dtype, backend, n_min: int = 1, n_max: int = 3):
    from specbench.engine.drafters.ngram import NgramDrafter

    return NgramDrafter(n_min=int(n_min), n_max=int(n_max))


def _build_draft_model(target, *, device, dtype, backend, model: str | None = None):
    from specbench.engine.drafters.draft_model import DraftModelDrafter
    from specbench.models.resolve import check_same_vocabulary, load_model

    if not model:
        raise SpecbenchError("drafter 'draft-model' needs a model: --drafter-model NAME (or model=NAME)")
    drafter = load_model(model, device=device, dtype=dtype)
    check_same_vocabulary(target, drafter)
    return DraftModelDrafter(drafter.model, target_vocab=target.vocab_size, backend=backend)


def _trained_builder(kind: str) -> Callable:
    """Builder of a trained drafter: checkpoint = folder, shipped name (default: the one shipped for
    the target) or 'random' (seeded random weights, for tests)."""

    def build(target, *, device, dtype, backend, checkpoint: str | None = None, seed: int = 0):
        from specbench.engine.drafters.trained import build_drafter

        return build_drafter(kind, target, device=device, dtype=dtype, checkpoint=checkpoint, seed=int(seed))

    return build


DRAFTERS: dict[str, DrafterSpec] = {
    "ngram": DrafterSpec("ngram", "prompt lookup: continue a match of the last n tokens (params n_min, n_max)",
                         _build_ngram),
    "draft-model": DrafterSpec("draft-model", "a smaller causal LM with the same tokenizer (param model)",
                               _build_draft_model),
    "medusa": DrafterSpec("medusa", "Medusa heads on the target's last hidden state (param checkpoint)",
                          _trained_builder("medusa")),
    "eagle": DrafterSpec("eagle", "EAGLE feature-space drafter, one layer on [hidden; next embedding] "
                         "(param checkpoint)", _trained_builder("eagle")),
    "eagle3": DrafterSpec("eagle3", "EAGLE-3 drafter fusing low/mid/high target layers (param checkpoint)",
                          _trained_builder("eagle3")),
    "mtp": DrafterSpec("mtp", "DeepSeek-V3-style multi-token prediction modules (param checkpoint)",
                       _trained_builder("mtp")),
}


def drafter_spec(name: str) -> DrafterSpec:
    if name not in DRAFTERS:
        raise SpecbenchError(f"unknown drafter '{name}'{did_you_mean(name, list(DRAFTERS))} "
                             f"(choose from: {', '.join(DRAFTERS)})")
    return DRAFTERS[name]


def check_params(name: str, params: dict) -> None:
    """Reject parameters the drafter does not take, before any model loads."""
    spec = drafter_spec(name)
    accepted = [p for p in inspect.signature(spec.build).parameters
                if p not in ("target", "device", "dtype", "backend")]
    for key in params:
        if key not in accepted:
            raise SpecbenchError(f"drafter '{name}' has no parameter '{key}'{did_you_mean(key, accepted)} "
                                 f"(it takes: {', '.join(accepted) or 'none'})")


def make_drafter(name: str, target, params: dict | None = None, *, device: str = "cpu", dtype: str = "fp32",
                 backend: str = "auto"):
    params = dict(params or {})
    check_params(name, params)
    return drafter_spec(name).build(target, device=device, dtype=dtype, backend=backend, **params)

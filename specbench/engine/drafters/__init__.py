"""Drafters: make one by name for a target (`make_drafter`), check its parameters first (`check_params`).

Every drafter is a type in the registry (`specbench.engine.drafters.registry`): the model-free
ones (``ngram``, ``draft-model``) and the trained ones (``medusa``, ``eagle``, ``eagle3``,
``mtp``, ``eagle3.1``, ``semi-ar``, ``parallel-tree``, `specbench.engine.drafters.trained.TrainedType`). Importing this package loads no torch;
looking a type up imports its module (and torch).
"""

from __future__ import annotations

from specbench.engine.drafters import registry
from specbench.errors import SpecbenchError, did_you_mean


def drafter_names() -> list[str]:
    return registry.names()


def check_params(name: str, params: dict) -> None:
    """Reject parameters the drafter does not take, before any model loads."""
    accepted = registry.get(name).params()
    for key in params:
        if key not in accepted:
            raise SpecbenchError(f"drafter '{name}' has no parameter '{key}'{did_you_mean(key, accepted)} "
                                 f"(it takes: {', '.join(accepted) or 'none'})")


def make_drafter(name: str, target, params: dict | None = None, *, device: str = "cpu", dtype: str = "fp32",
                 implementation: str = "auto"):
    params = dict(params or {})
    check_params(name, params)
    return registry.get(name).build(target, device=device, dtype=dtype, implementation=implementation, **params)

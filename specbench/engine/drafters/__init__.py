"""Drafters: make one by name for a target (`make_drafter`), check its parameters first (`check_params`).

Every drafter kind is an entry of the drafter catalogue (`specbench.catalogue.drafters`) naming its
type (`specbench.engine.drafters.registry`): the model-free ones (``ngram``, ``draft-model``) and
the trained ones (``medusa``, ``eagle``, ``eagle3``, ``mtp``, ``eagle3.1``, ``semi-ar``,
``parallel-tree``, `specbench.engine.drafters.networks.trained.TrainedType`). Importing this package loads no
torch, and neither does checking parameters (the catalogue lists them); building a drafter imports
its module (and torch).
"""

from __future__ import annotations

from specbench.catalogue import drafters as catalogue
from specbench.engine.drafters import registry
from specbench.errors import check_keys


def check_params(name: str, params: dict) -> None:
    """Reject parameters the drafter does not take, before any model loads (any catalogue kind: one that only
    serving engines run is refused by the sweep's backend, or by `make_drafter`)."""
    accepted = list(catalogue.get(name).params)
    check_keys(params, accepted, f"drafter '{name}' has no parameter '{{key}}'", listing="it takes")


def make_drafter(
    name: str,
    target,
    params: dict | None = None,
    *,
    device: str = "cpu",
    dtype: str = "fp32",
    implementation: str = "auto",
):
    params = dict(params or {})
    check_params(name, params)
    return registry.get(name).build(target, device=device, dtype=dtype, implementation=implementation, **params)

"""The drafter registry: one `DrafterType` per drafter, looked up by name.

A drafter type is a class with a ``name``, a one-line ``summary`` and a ``build`` method that
makes an engine drafter for a target; its keyword parameters (beyond target, device, dtype and
the decoder ``implementation``) are the drafter's parameters (``--drafter-param``). Trained types derive from
`specbench.engine.drafters.trained.TrainedType`, which adds the network, its checkpoints, the
published layouts, the training objective and the architecture defaults.

``BUILTIN`` below is the one place where the shipped types are registered, as
``name: "module:Class"``. It names the class instead of importing it because the drafter
modules import torch, and listing or checking names (CLI help, sweep-spec validation) must not;
the class is imported the first time its name is looked up. `register` adds a type at run time
(a plugin, a test). Adding a drafter is one new module with its `DrafterType` subclass plus one
line in ``BUILTIN`` (docs/drafters.md, "Adding a drafter").
"""

from __future__ import annotations

import importlib
import inspect

from specbench.errors import SpecbenchError, did_you_mean

BUILTIN: dict[str, str] = {
    "ngram": "specbench.engine.drafters.ngram:NgramType",
    "draft-model": "specbench.engine.drafters.draft_model:DraftModelType",
    "medusa": "specbench.engine.drafters.medusa:MedusaType",
    "eagle": "specbench.engine.drafters.eagle:EagleType",
    "eagle3": "specbench.engine.drafters.eagle:Eagle3Type",
    "mtp": "specbench.engine.drafters.mtp:MTPType",
    "eagle3.1": "specbench.engine.drafters.eagle:Eagle31Type",
    "semi-ar": "specbench.engine.drafters.semi_ar:SemiARType",
    "parallel-tree": "specbench.engine.drafters.parallel_tree:ParallelTreeType",
}

BUILD_ARGUMENTS = ("self", "target", "device", "dtype", "implementation")  # what every build takes; the rest are params


class DrafterType:
    """One drafter: its name, a summary and how to build it for a target."""

    name: str = ""
    summary: str = ""
    trained: bool = False  # a network with checkpoints and a training objective (TrainedType)
    confident: bool = False  # its drafts carry probabilities (confidence-reading schedules can cut them)

    def build(self, target, *, device: str, dtype: str, implementation: str, **params):
        """An engine drafter (`specbench.engine.drafters.base.Drafter`) for ``target`` (a LoadedModel)."""
        raise NotImplementedError

    def params(self) -> list[str]:
        """The drafter parameters ``build`` accepts."""
        return [p for p in inspect.signature(type(self).build).parameters if p not in BUILD_ARGUMENTS]

    def __repr__(self) -> str:
        return f"<drafter type {self.name}>"


_types: dict[str, DrafterType] = {}  # name -> instance, for the types already imported or registered
_order: list[str] = list(BUILTIN)  # registration order (how names are listed)


def register(drafter_type: DrafterType, *, replace: bool = False) -> DrafterType:
    """Add a drafter type (an instance) under its ``name``; returns it."""
    name = drafter_type.name
    if not name or not isinstance(drafter_type, DrafterType):
        raise SpecbenchError(f"cannot register {drafter_type!r}: a DrafterType instance with a name is needed")
    if not replace and (name in _types or name in BUILTIN):
        raise SpecbenchError(f"drafter type '{name}' is already registered (pass replace=True to replace it)")
    _types[name] = drafter_type
    if name not in _order:
        _order.append(name)
    return drafter_type


def unregister(name: str) -> None:
    """Remove a type added with `register` (the built-in ones stay)."""
    _types.pop(name, None)
    if name in _order and name not in BUILTIN:
        _order.remove(name)


def names(trained: bool | None = None) -> list[str]:
    """Registered drafter names in registration order (``trained``: only trained / only model-free)."""
    if trained is None:
        return list(_order)
    return [n for n in _order if get(n).trained == trained]


def get(name: str, *, trained: bool = False) -> DrafterType:
    """The type called ``name``; an unknown name is a one-line error with a did-you-mean.
    ``trained=True`` accepts trained types only (train-drafter, checkpoints)."""
    choices = names(trained=True) if trained else list(_order)
    if name not in _order or (trained and name not in choices):
        what = "drafter type" if trained else "drafter"
        raise SpecbenchError(f"unknown {what} '{name}'{did_you_mean(name, choices)} "
                             f"(choose from: {', '.join(choices)})")
    if name not in _types:
        module, _, attribute = BUILTIN[name].partition(":")
        # imported on first use: drafter modules import torch, which listing names must not load
        _types[name] = getattr(importlib.import_module(module), attribute)()
    return _types[name]


def trained_types() -> list:
    """Every registered trained type (`TrainedType` instances), in registration order."""
    return [get(n) for n in names(trained=True)]

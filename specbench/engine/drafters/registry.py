"""The engine's drafter types, built from the drafter catalogue (`specbench.catalogue.drafters`).

A drafter type is a class with a ``name`` and a ``build`` method that makes an engine drafter for
a target; its keyword parameters (beyond target, device, dtype and the decoder ``implementation``)
are the drafter's parameters (``--drafter-param``), which the catalogue entry lists too (a test
checks they agree). Trained types derive from `specbench.engine.drafters.networks.trained.TrainedType`,
which adds the network, its checkpoints, the published layouts, the training objective and the
architecture defaults.

Which types exist, and everything else about them (summary, trained, replay, vLLM, ...), is the
catalogue's: its entry names the class as ``"module:Class"``, imported the first time the name is
looked up (drafter modules import torch; listing or checking names must not). Adding a drafter is
one new module with its `DrafterType` subclass plus one catalogue entry (docs/drafters.md,
"Adding a drafter"; docs/architecture.md).
"""

from __future__ import annotations

import inspect

from specbench.catalogue import drafters as catalogue

BUILD_ARGUMENTS = ("self", "target", "device", "dtype", "implementation")  # what every build takes; the rest are params


class DrafterType:
    """One drafter: its name and how to build it for a target; its facts are its catalogue entry's."""

    name: str = ""

    def build(self, target, *, device: str, dtype: str, implementation: str, **params):
        """An engine drafter (`specbench.engine.drafters.base.Drafter`) for ``target`` (a LoadedModel)."""
        raise NotImplementedError

    @property
    def kind(self) -> catalogue.DrafterKind:
        return catalogue.get(self.name)

    @property
    def summary(self) -> str:
        return self.kind.summary

    @property
    def trained(self) -> bool:
        return self.kind.trained

    @property
    def confident(self) -> bool:
        return self.kind.confident

    def params(self) -> list[str]:
        """The drafter parameters ``build`` accepts (its signature; the catalogue entry lists the same)."""
        return [p for p in inspect.signature(type(self).build).parameters if p not in BUILD_ARGUMENTS]

    def __repr__(self) -> str:
        return f"<drafter type {self.name}>"


_types: dict[str, tuple[object, DrafterType]] = {}  # name -> (the class it was made from, the instance)


def names(trained: bool | None = None) -> list[str]:
    """Drafter names the engine builds, in catalogue order (``trained``: only trained / only not)."""
    return catalogue.names() if trained is None else catalogue.names(trained=trained)


def get(name: str, *, trained: bool = False) -> DrafterType:
    """The type called ``name``; an unknown name is a one-line error with a did-you-mean.
    ``trained=True`` accepts trained types only (train-drafter, checkpoints)."""
    catalogue.buildable(name, trained=trained)
    cls = catalogue.DRAFTERS.load(name)  # imported on first use: drafter modules import torch
    made = _types.get(name)
    if made is None or made[0] is not cls:
        made = _types[name] = (cls, cls())
    return made[1]


def trained_types() -> list:
    """Every trained type the engine builds (`TrainedType` instances), in catalogue order."""
    return [get(n) for n in names(trained=True)]

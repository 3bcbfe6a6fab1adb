"""Trained drafters: `TrainedType`, the registry entry every network drafter derives from.

A trained type (medusa, eagle, eagle3, mtp, eagle3.1, semi-ar, parallel-tree: one subclass each) says what is
particular to it — its architecture defaults and how to fill them in for a target
(``architecture``), how to build its network (``new_net``) and wrap it as an engine drafter
(``wrap``), its training objective (``objective``: a ``"module:function"`` reference into
`specbench.training`, or a callable, so the engine never imports the training code) with its
keyword arguments, and optionally a published layout (``recognizes`` / ``load_published`` /
``export_published``, `specbench.engine.drafters.checkpoints.published`). What is common lives here:
checkpoints (``save`` / ``load``, `specbench.engine.drafters.checkpoints.checkpoint`), seeded random
weights, and ``build``, which the registry calls: a checkpoint path or shipped name (default:
the one shipped for the target), or ``random`` — a seeded random initialisation, for tests and
plumbing checks only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn as nn

from specbench.catalogue.registry import resolve
from specbench.engine.drafters import registry
from specbench.engine.drafters.checkpoints import checkpoint as ckpt
from specbench.engine.drafters.checkpoints import speculators_format
from specbench.engine.drafters.checkpoints.checkpoint_location import SPECULATORS
from specbench.engine.drafters.checkpoints.published import detect
from specbench.errors import SpecbenchError
from specbench.models.memory import checked_module

DRAFT_VOCAB_KEY = "draft_vocab"
RANDOM = "random"


def parameter_count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


def feature_layers_of(net: nn.Module) -> tuple:
    return tuple(getattr(net, "feature_layers", ("final",)))


class TrainedType(registry.DrafterType):
    """A drafter network trained against a target; subclasses fill in the hooks marked below."""

    defaults: dict = {}  # architecture options and their defaults (train-drafter --heads, --intermediate, ...)
    objective: str | Callable = ""  # "module:function" in specbench.training, or a callable(net, batch, head, **kw)
    objective_args: dict = {}  # fixed keyword arguments of the objective
    unrolled_steps: int | None = None  # default unrolled training steps (train-drafter --steps); None: not unrolled
    published: str | None = None  # name of a published layout this type reads and writes, if any
    # what trains a served drafter on its traffic (online adaptation, `specbench.engine.strategies.online_drafting`): a
    # "module:Class" reference into specbench.training, like ``objective``, so the engine never imports it
    learner: str = "specbench.training.online_learning:OnlineLearner"

    # ------------------------------------------------------------------ hooks
    def architecture(self, target_config, **options) -> dict:
        """The architecture dict (config.json ``architecture``) of a new drafter for a target."""
        raise NotImplementedError

    def new_net(self, architecture: dict, *, zero_init: bool = True) -> nn.Module:
        """An (untrained) network of ``architecture``; ``zero_init``: start as the target's own guess
        where the type can (Medusa heads), otherwise ignored."""
        raise NotImplementedError

    def wrap(
        self,
        net: nn.Module,
        target,
        draft_vocab: torch.Tensor | None = None,
        head_weights: list[torch.Tensor] | None = None,
    ):
        """The engine drafter around ``net`` (on the target's device and dtype); ``head_weights``: output
        layers of a published checkpoint that does not share the target's LM head."""
        raise NotImplementedError

    def net_of(self, drafter) -> nn.Module:
        """The network inside a drafter built by ``wrap``."""
        return drafter.net

    def vocab_head(self, drafter):
        """The `VocabHead` a drafter built by ``wrap`` scores tokens with (its draft vocabulary: ``ids``)."""
        return drafter.head

    def recognizes(self, config: dict, folder: Path) -> bool:
        """Whether a folder's (non-specbench) config.json is in this type's published layout."""
        return False

    def load_published(self, folder: Path, target):
        """(net, draft_vocab | None, head_weights | None) of a folder in the published layout."""
        raise SpecbenchError(f"drafter type '{self.name}' has no published layout")

    def export_published(
        self, folder: Path, net: nn.Module, target, draft_vocab: torch.Tensor | None = None, **options
    ) -> Path:
        """Write ``net`` in the published layout."""
        raise SpecbenchError(f"drafter type '{self.name}' has no published layout")

    # ------------------------------------------------------------------ derived
    def options(self, **overrides) -> dict:
        """The architecture defaults with the given (not None) overrides."""
        return {**self.defaults, **{k: v for k, v in overrides.items() if v is not None}}

    def training_args(self, steps: int | None = None) -> dict:
        """Keyword arguments of the objective (``steps``: unrolled steps, for types that unroll)."""
        args = dict(self.objective_args)
        if self.unrolled_steps is not None:
            args["steps"] = steps or self.unrolled_steps
        return args

    def feature_layers(self, architecture: dict) -> tuple:
        """Target features the drafter reads: "final" and/or decoder-layer indices."""
        return ("final",)

    # ------------------------------------------------------------------ checkpoints
    def save(
        self,
        folder: Path,
        net: nn.Module,
        target,
        draft_vocab: torch.Tensor | None,
        training: dict | None = None,
        dtype: torch.dtype = torch.bfloat16,
    ) -> Path:
        """Write a checkpoint: architecture, target record, training record, weights in ``dtype``."""
        tensors = dict(net.state_dict())
        if draft_vocab is not None:
            tensors[DRAFT_VOCAB_KEY] = draft_vocab.to(torch.int32)
        config = {
            "type": self.name,
            "architecture": net.architecture(),
            "feature_layers": [k if isinstance(k, str) else int(k) for k in feature_layers_of(net)],
            "draft_vocab_size": None if draft_vocab is None else int(draft_vocab.numel()),
            "parameters": parameter_count(net),
            "target": ckpt.target_record(target),
            "training": training or {},
        }
        return ckpt.write_checkpoint(folder, config, tensors, dtype)

    def load(self, checkpoint: ckpt.Checkpoint, target) -> tuple[nn.Module, torch.Tensor | None]:
        """The network and draft vocabulary of a checkpoint, checked against ``target``."""
        ckpt.check_target(checkpoint.config, target, str(checkpoint.path))
        tensors = dict(checkpoint.tensors)
        draft_vocab = tensors.pop(DRAFT_VOCAB_KEY, None)
        try:
            net = checked_module(  # the one estimate: shapes and memory before the real build
                lambda: self.new_net(checkpoint.config["architecture"]),
                f"drafter checkpoint {checkpoint.path}",
                tensors,
            )
            missing, unexpected = net.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=False)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise SpecbenchError(
                f"drafter checkpoint {checkpoint.path}: weights do not fit its architecture "
                f"({str(exc).splitlines()[0]})"
            ) from None
        if missing or unexpected:
            raise SpecbenchError(
                f"drafter checkpoint {checkpoint.path}: missing {sorted(missing)[:3]} "
                f"unexpected {sorted(unexpected)[:3]} weights"
            )
        return net, None if draft_vocab is None else draft_vocab.long()

    # ------------------------------------------------------------------ online adaptation
    def reinitialise(self, net: nn.Module, seed: int = 0) -> None:
        """Give a (serving) network the weights ``train-drafter`` starts from, seeded: online learning from
        scratch ("day 0") keeps the architecture and the draft vocabulary, not the trained weights."""
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(int(seed))
        try:
            fresh = self.new_net(net.architecture())
        finally:
            torch.random.set_rng_state(generator_state)
        with torch.no_grad():
            net.load_state_dict(fresh.state_dict())

    def online_learner(self, drafter, target, plan):
        """The learner that trains a copy of ``drafter``'s network on its traffic (``learner``)."""
        learner = resolve(self.learner, f"the online learner of drafter type '{self.name}'")
        return learner(self, drafter, target, plan)

    def random_net(self, target, seed: int = 0) -> nn.Module:
        """A network with seeded random weights (the global generator is left as it was)."""
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(int(seed))
        try:
            architecture = self.architecture(target.model.config)
            return checked_module(lambda: self.new_net(architecture, zero_init=False), f"a random {self.name} drafter")
        finally:
            torch.random.set_rng_state(generator_state)

    # ------------------------------------------------------------------ the registry's builder
    def build(
        self, target, *, device: str, dtype: str, implementation: str, checkpoint: str | None = None, seed: int = 0
    ):
        """checkpoint = path (specbench's format, the type's published layout or the speculators format),
        shipped name, hub id, None (the one shipped for the target) or 'random'."""
        param = next(target.model.parameters())
        draft_vocab, head_weights = None, None
        if str(checkpoint).strip().lower() == RANDOM:
            net = self.random_net(target, seed)
        else:
            folder = ckpt.resolve_checkpoint(checkpoint, self.name, target.name)
            layout = detect(folder)
            if layout in (None, "specbench"):  # None: read_checkpoint says what is wrong
                net, draft_vocab = self.load(ckpt.read_checkpoint(folder, expected_type=self.name), target)
            elif layout == SPECULATORS:  # speculators_format refuses another kind in one line
                net, draft_vocab, head_weights = speculators_format.load(folder, target, self)
            elif layout != self.name:
                raise SpecbenchError(f"{folder} holds a {layout} checkpoint, not a {self.name} one")
            else:  # a folder in the type's published layout
                net, draft_vocab, head_weights = self.load_published(folder, target)
        net = net.to(device=param.device, dtype=param.dtype).eval()
        net.requires_grad_(False)
        if head_weights is not None:
            head_weights = [w.to(device=param.device, dtype=param.dtype) for w in head_weights]
        return self.wrap(net, target, draft_vocab, head_weights)

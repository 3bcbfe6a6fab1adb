"""The drafter interface: propose a chain or tree from the current context, observe the verdict.

A drafter sees the whole context (prompt + output so far; its last token is the root, not yet
in the target's cache) and a requested shape: a `StaticTree` (a chain is one) or a
`DynamicTree`. It returns draft tokens and, for trees, each node's parent. Model drafters that
sample also return, per node, the distribution the node was drawn from (q); drafters whose
candidates are deterministic return None and are verified as one-hot proposals. After
verification the loop calls `observe` with the accepted path so the drafter can roll back or
compact its own state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch

from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import DynamicTree, StaticTree, node_depths
from specbench.errors import SpecbenchError


def chain_confidences(path_logq: list[float]) -> list[float]:
    """A chain's per-token confidences c_i = q(x_i | x_<i) from its path scores s_i (cumulative
    log q, `Proposal.path_logq`): c_i = exp(s_i − s_{i−1}), s_0 = 0."""
    return [math.exp(b - a) for a, b in zip([0.0] + list(path_logq[:-1]), path_logq)]


@dataclass
class Proposal:
    tokens: torch.Tensor  # [B, N] long, N may be 0
    probs: torch.Tensor | None  # [B, N, V] float32: the distribution node i was drawn from
    parents: list[int] | None = None  # None: a chain (node i's parent is i − 1); −1 = the root
    draft_steps: int = 0  # drafter forwards spent (the cost model's unit); 0 for model-free
    # per node: log q of the path root -> node under the drafter's (warped) distribution, the
    # drafter's confidence that the target accepts the path; None for drafters that do not say
    path_logq: list[float] | None = None

    @property
    def confidences(self) -> list[float] | None:
        """A chain's per-token confidences (what verify-length schedules read): the drafter's
        probability of each drafted token, `chain_confidences(path_logq)`; None for a tree or a
        drafter that does not score its drafts."""
        if self.path_logq is None or not self.is_chain:
            return None
        return chain_confidences(self.path_logq)

    @property
    def tree_nodes(self) -> int:
        """Draft tokens offered (a chain's γ, a tree's node count): the record's ``round_drafted``."""
        return int(self.tokens.shape[1])

    @property
    def is_chain(self) -> bool:
        return self.parents is None or self.tree_nodes == 0

    @property
    def depth(self) -> int:
        """How deep this proposal drafts: a chain's length, a tree's deepest node (the record's ``round_depth``;
        ≤ the round's γ_r: a short n-gram match or a schedule's early stop drafts less)."""
        if self.is_chain:
            return self.tree_nodes
        return max(node_depths(self.parents), default=0)


@dataclass
class RoundOutcome:
    """What the target decided about a proposal, passed to `Drafter.observe`."""

    context_length: int  # tokens in the context the proposal was made from
    accepted: int  # draft tokens kept (depth of the accepted path)
    next_token: int  # recovered or bonus token appended after them
    accepted_nodes: list[int] = field(default_factory=list)  # proposal node indices along the kept path
    # target features at the kept positions (root, then the accepted path), for drafters that
    # declare ``feature_layers``: key -> [B, accepted + 1, H]; the last row produced next_token
    features: dict | None = None


Shape = StaticTree | DynamicTree


@runtime_checkable
class Drafter(Protocol):
    """The three calls of a generation. Every engine drafter is a `BaseDrafter`, whose attributes
    (``feature_layers``, ``confident``, ``max_gamma``, ``drafts_ahead``, ``predicts_experts``) say what else it
    offers; `SpeculativeEngine` refuses a γ or tree deeper than ``max_gamma`` instead of running a shallower
    draft than the configuration — and its record — says."""

    name: str

    def start(self, prompt: torch.Tensor, capacity: int, features: dict | None = None) -> None:
        """A new generation begins with prompt [B, T]; caches need room for ``capacity`` tokens."""

    def propose(
        self, context: torch.Tensor, shape: Shape, sampling: SamplingParams, generator: torch.Generator | None
    ) -> Proposal:
        """Draft tokens continuing context [B, L] in (at most) the requested shape."""

    def observe(self, outcome: RoundOutcome) -> None:
        """The verdict on the last proposal."""


class BaseDrafter:
    """What every engine drafter declares, with the defaults of a drafter that declares nothing; the engine reads
    these attributes instead of probing for them. A drafter class sets the ones that differ:

    * ``feature_layers``: target features the drafter reads — "final" (the hidden state the LM head sees) and/or
      decoder layer indices (0 = embeddings), given in `start` for the prompt and in `RoundOutcome.features`;
    * ``confident``: it has a probability for each token it proposes, its ``propose`` takes ``keep_drafting``
      (a verify-length schedule's rule, `specbench.engine.strategies.schedule`) and reports ``Proposal.confidences``;
    * ``max_gamma``: the deepest draft it can make (Medusa: its head count, MTP: its module count), None: any;
    * ``drafts_ahead``: it implements ``propose_ahead`` (nested speculation, `specbench.engine.strategies.nested`);
    * ``predicts_experts``: it can predict an MoE target's experts from its features (``expert_router``,
      ``feature_size``: expert-aware trees).
    """

    name: str = "drafter"
    feature_layers: tuple = ()
    confident: bool = False
    max_gamma: int | None = None
    drafts_ahead: bool = False
    predicts_experts: bool = False

    def compile_steps(self) -> None:
        """Run the drafter's forwards through torch.compile (``--compile``); a drafter without a model has none."""


def chain_proposal(tokens: torch.Tensor, probs: torch.Tensor | None = None, draft_steps: int = 0) -> Proposal:
    return Proposal(tokens=tokens, probs=probs, parents=None, draft_steps=draft_steps)


def check_draft_depth(drafter, shape) -> None:
    """Refuse a draft shape deeper than the drafter can draft (``max_gamma``): the record would say γ
    while the rounds drafted fewer. One line: the drafter, its limit, and the γ asked."""
    limit = None if drafter is None else drafter.max_gamma
    if shape is None or limit is None or shape.depth <= limit:
        return
    raise SpecbenchError(
        f"drafter {drafter.name} drafts at most {limit} tokens per round "
        f"(its checkpoint has {limit} heads or modules), but γ = {shape.depth} was asked: use γ ≤ "
        f"{limit} (records hold the γ that ran)"
    )

"""A speculative round as a value, and the round drivers that decide how a round is drafted and verified.

A round (`specbench.engine.loop.SpeculativeEngine.run_round`) has three steps:

* **draft**: the drafter proposes up to γ_r tokens continuing the context (a chain, or a tree of nodes);
* **verify**: one target forward over [root, drafts] gives the target's verdict — the accepted drafts (a chain's
  longest acceptable prefix, a tree's root-to-node path) and the target's own next token after them (a
  correction, or the bonus token when every draft is kept);
* **accept**: the round emits the kept drafts and the target's token (cut after an end-of-sequence token) and
  tells the drafter the verdict.

`Round` is what happened; `generate` loops over rounds and keeps the books (the context, the round log, the
schedule, the clock).

A `RoundDriver` owns the two steps a strategy may change, and hears about a generation's start, its target
features and its end. `RoundDriver` itself is sequential speculation: draft now, then verify. Nested speculation
(`specbench.engine.strategies.nested.NestedDriver`: the next round's drafts are prepared while the target verifies) and
online adaptation (`specbench.engine.strategies.online_drafting.OnlineDriver`: the drafter learns from every verdict) are drivers
handed to the engine, ``SpeculativeEngine(..., driver=NestedDriver(prepared=2))``; they reach the engine only
through its public verbs (`propose`, `verify`, `capacity`) and attributes (``drafter``, ``shape``,
``sampling``, ``device``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specbench.engine.drafters.base import Proposal

if TYPE_CHECKING:  # the engine imports this module
    from specbench.engine.loop import SpeculativeEngine
    from specbench.engine.stats import GenerationResult


@dataclass(frozen=True)
class Verification:
    """The target's decision on a proposal (`SpeculativeEngine.verify`)."""

    path: list[int]  # accepted node indices along the kept path (a chain's: 0 .. m − 1)
    next_token: int  # the target's token after them: a correction, or the bonus token
    features: dict | None  # target features at the kept positions (root, then the path): key -> [1, m + 1, H]


@dataclass(frozen=True)
class Round:
    """What one round did: its draft, the target's verdict, the tokens it emitted and the time of its steps."""

    drafted: int  # draft tokens the target verified (a chain's γ_r, a tree's node count): round_drafted
    depth: int  # the draft's depth (a chain's length, a tree's deepest node): round_depth
    draft_steps: int  # drafter forwards spent
    confidences: list[float] | None  # the drafter's probability of each drafted chain token (schedules read it)
    accepted: int  # drafts kept
    emitted: list[int]  # tokens the round appends: the kept drafts, then the target's; cut after an EOS
    eos: bool  # an end-of-sequence token was emitted: the generation stops
    draft_s: float
    verify_s: float


class RoundDriver:
    """Sequential speculation: each round is drafted, then verified. A strategy subclasses it, overriding the
    steps it changes, and is handed to `SpeculativeEngine` (``driver=``), which calls only these methods."""

    # target features the driver reads beyond the drafter's ("final": the hidden state the LM head sees)
    features: tuple = ()

    def bind(self, engine: SpeculativeEngine) -> None:
        """The engine this driver drives (called once, as the engine is built: a driver refuses an engine it
        cannot drive here)."""
        self.engine = engine

    def begin(self, prompt_ids: list[int], max_new_tokens: int, seed: int, stop_at_eos: bool) -> None:
        """A generation starts (before its prefill)."""

    def took_features(self, features: dict) -> None:
        """Target features of the next kept positions {key: [1, n, H]}: the prefill's, then each verdict's."""

    def draft(self, context: torch.Tensor, round_gamma: int, generator) -> Proposal:
        """This round's proposal for context [1, L]: drafted now."""
        return self.engine.propose(context, round_gamma, generator)

    def verify(self, proposal: Proposal, context: torch.Tensor, generator) -> Verification:
        """The target's verdict on ``proposal`` continuing context [1, L] (its last token is the root)."""
        return self.engine.verify(proposal, context[:, -1:], generator)

    def between_rounds(self, context: torch.Tensor) -> float:
        """Work between two rounds that is not decode time, given the context [1, L] after the round; returns
        the seconds it took (kept out of ``decode_s``). Sequential rounds: none."""
        return 0.0

    def end(self, result: GenerationResult) -> None:
        """The generation finished: the driver adds what it counted to ``result``."""

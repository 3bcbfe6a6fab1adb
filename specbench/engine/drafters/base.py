"""The drafter interface: propose tokens from the current context, observe the verdict.

A drafter sees the whole context (prompt + output so far, the last token not yet verified
by anyone) and proposes up to k tokens. Model drafters also return the distributions they
sampled from (q); model-free drafters return None and are verified as one-hot proposals.
After verification the loop calls `observe` so the drafter can roll back its own state and,
for adaptive drafters, learn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from specbench.engine.sampling import SamplingParams


@dataclass
class Proposal:
    tokens: torch.Tensor  # [B, K] long, K may be 0
    probs: torch.Tensor | None  # [B, K, V] float32: q_i, the distribution token i was drawn from
    draft_steps: int = 0  # drafter forwards spent (the cost model's unit); 0 for model-free

    @property
    def size(self) -> int:
        return int(self.tokens.shape[1])


@dataclass
class RoundOutcome:
    """What the target decided about a proposal, passed to `Drafter.observe`."""

    context_length: int  # tokens in the context the proposal was made from
    accepted: int  # draft tokens kept
    next_token: int  # recovered or bonus token appended after them


@runtime_checkable
class Drafter(Protocol):
    name: str

    def start(self, prompt: torch.Tensor) -> None:
        """A new generation begins with prompt [B, T]."""

    def propose(self, context: torch.Tensor, k: int, sampling: SamplingParams,
                generator: torch.Generator | None) -> Proposal:
        """Up to k draft tokens continuing context [B, L]."""

    def observe(self, outcome: RoundOutcome) -> None:
        """The verdict on the last proposal."""

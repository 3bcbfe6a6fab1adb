"""Medusa heads (Cai et al. 2024, arXiv 2401.10774): K extra heads on the target's last hidden state.

Head k (k = 1..K) reads f_t, the target's final hidden state at position t (the LM head's
input, whose own logits give x_{t+1}), and predicts the token k positions further:

    h_k = r_k^(L) ∘ … ∘ r_k^(1) (f_t),   r(x) = x + SiLU(W x + b)     (residual blocks)
    q_k(x_{t+1+k} | x_≤t) = softmax(W_lm h_k)                          (the target's frozen LM head)

Drafting after the context x_0..x_{L−1} (root x_{L−1}, whose features f_{L−2} are the newest the
target produced) costs one small forward: all K heads on f_{L−2}. Depth d of the draft takes its
candidates from head d — the same for every parent, since the heads do not see the drafted
tokens: a chain is the heads' argmaxes, a static tree their top-k per depth (sampled without
replacement when sampling). Drafts are at most K deep.

The residual blocks are the only trained weights; state-dict names follow Medusa's
``{head}.{block}.linear.weight`` so that a published heads file loads directly
(`specbench.engine.drafters.published`).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from specbench.engine.drafters import growth as tree_growth
from specbench.engine.drafters.base import Proposal, RoundOutcome, Shape
from specbench.engine.drafters.feature_layers import VocabHead
from specbench.engine.sampling import SamplingParams


class ResBlock(nn.Module):
    """x + SiLU(W x + b)."""

    def __init__(self, hidden: int, zero_init: bool = True):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        if zero_init:  # the head starts as the identity: the target's own next-token guess
            nn.init.zeros_(self.linear.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.ModuleList):
    """K heads of ``layers`` residual blocks each; forward f [..., H] -> [K, ..., H]."""

    def __init__(self, hidden: int, heads: int = 4, layers: int = 1, zero_init: bool = True):
        super().__init__([nn.Sequential(*[ResBlock(hidden, zero_init) for _ in range(layers)]) for _ in range(heads)])
        self.hidden, self.num_heads, self.num_layers = hidden, heads, layers

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        return torch.stack([head(f) for head in self])

    def architecture(self) -> dict:
        return {"hidden": self.hidden, "heads": self.num_heads, "layers": self.num_layers}

    @classmethod
    def from_architecture(cls, arch: dict, zero_init: bool = True) -> "MedusaHeads":
        return cls(int(arch["hidden"]), int(arch["heads"]), int(arch.get("layers", 1)), zero_init)


class MedusaDrafter:
    """Drafts from K Medusa heads; ``vocab_heads`` holds one `VocabHead` per head (usually the same
    shared one; a published checkpoint may bring its own output layer per head)."""

    name = "medusa"
    feature_layers = ("final",)

    def __init__(self, heads: MedusaHeads, vocab_heads: list[VocabHead]):
        self.heads = heads.eval()
        self.vocab_heads = vocab_heads
        self._last: torch.Tensor | None = None  # [H] newest final feature

    @torch.inference_mode()
    def start(self, prompt: torch.Tensor, capacity: int, features: dict | None = None) -> None:
        self._last = features["final"][0, -1].clone()

    @torch.inference_mode()
    def propose(self, context: torch.Tensor, shape: Shape, sampling: SamplingParams,
                generator: torch.Generator | None) -> Proposal:
        shape = tree_growth.capped(shape, self.heads.num_heads)
        hidden = self.heads(self._last.to(next(self.heads.parameters()).dtype))  # [K, H]
        logits = torch.stack([vh.logits(h) for vh, h in zip(self.vocab_heads, hidden)])  # [K, V]

        def expand(growth, nodes):  # children at depth d + 1 come from head d + 1, whatever the parent
            return torch.stack([logits[growth.depths[n]] for n in nodes])

        return tree_growth.grow_proposal(logits[0], shape, sampling, generator, expand, context.device,
                                         draft_steps=1)[0]  # all heads ran in one forward

    @torch.inference_mode()
    def observe(self, outcome: RoundOutcome) -> None:
        if outcome.features is not None:
            self._last = outcome.features["final"][0, -1].clone()

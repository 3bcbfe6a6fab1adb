"""An independent draft model: a smaller causal LM with the target's vocabulary.

It keeps its own KV cache. Proposing k tokens costs k drafter forwards: the first also feeds
the context tokens the drafter has not seen yet (the last round's corrections), each later
one feeds the token just drafted. After verification the cache is rolled back to the part
of the context the target kept.
"""

from __future__ import annotations

import torch

from specbench.engine.decoder import make_decoder
from specbench.engine.drafters.base import Proposal, RoundOutcome
from specbench.engine.sampling import SamplingParams, probabilities


class DraftModelDrafter:
    name = "draft-model"

    def __init__(self, model, target_vocab: int, backend: str = "auto"):
        self.decoder = make_decoder(model, backend)
        self.target_vocab = target_vocab
        self.synced = 0  # leading context tokens whose KV entries the drafter holds
        self._last_k = 0

    def start(self, prompt: torch.Tensor, capacity: int) -> None:
        self.decoder.reset(prompt.shape[0], capacity)
        self.decoder.forward(prompt, logits="none")
        self.synced = prompt.shape[1]

    def _vocab_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Drafter logits [B, V_d] on the target's ids [B, V_t] (extra rows are padding)."""
        extra = self.target_vocab - logits.shape[-1]
        if extra < 0:
            return logits[..., : self.target_vocab]
        if extra > 0:
            return torch.nn.functional.pad(logits, (0, extra), value=float("-inf"))
        return logits

    def propose(self, context: torch.Tensor, k: int, sampling: SamplingParams,
                generator: torch.Generator | None) -> Proposal:
        self.decoder.truncate(self.synced)
        self._last_k = k
        feed = context[:, self.synced:]  # [B, ≥1] tokens not yet in the drafter cache
        tokens, dists = [], []
        for i in range(k):
            logits = self._vocab_logits(self.decoder.forward(feed, logits="last").logits[:, -1])  # [B, V]
            if sampling.greedy:
                token = logits.argmax(-1)
            else:
                q = probabilities(logits, sampling)
                token = torch.multinomial(q, 1, generator=generator).squeeze(-1)
                dists.append(q)
            tokens.append(token)
            feed = token[:, None]
        drafted = torch.stack(tokens, 1) if tokens else context[:, :0]
        probs = torch.stack(dists, 1) if dists else None
        return Proposal(tokens=drafted, probs=probs, draft_steps=k)

    def observe(self, outcome: RoundOutcome) -> None:
        # After drafting k >= 1 tokens the cache holds the context and drafts 1..k-1, of which
        # the target kept `accepted`; with k = 0 nothing was fed and `synced` stays.
        if self._last_k > 0:
            self.synced = outcome.context_length + min(outcome.accepted, self._last_k - 1)

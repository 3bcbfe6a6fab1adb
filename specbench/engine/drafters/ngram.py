"""Prompt-lookup drafting (model-free).

The context's last n tokens are searched for earlier in the context (prompt + output so
far), longest n first from n_max down to n_min; the most recent earlier occurrence wins and
the tokens that followed it are proposed. No match: nothing is proposed and the round is a
plain decoding step.
"""

from __future__ import annotations

import torch

from specbench.engine.drafters.base import Proposal, RoundOutcome
from specbench.engine.sampling import SamplingParams
from specbench.errors import SpecbenchError


def find_continuation(sequence: torch.Tensor, n_min: int, n_max: int, k: int) -> torch.Tensor:
    """Tokens following the latest earlier match of sequence's last n tokens; sequence [L] -> [≤k]."""
    length = sequence.shape[0]
    for n in range(min(n_max, length - 1), n_min - 1, -1):
        suffix = sequence[length - n:]  # [n]
        windows = sequence[: length - 1].unfold(0, n, 1)  # [L-n, n]: starts whose continuation exists
        hits = (windows == suffix).all(-1).nonzero()
        if hits.numel():
            start = int(hits[-1, 0]) + n
            return sequence[start:start + k]
    return sequence[:0]


class NgramDrafter:
    name = "ngram"

    def __init__(self, n_min: int = 1, n_max: int = 3):
        if n_min < 1 or n_max < n_min:
            raise SpecbenchError(f"ngram needs 1 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
        self.n_min, self.n_max = int(n_min), int(n_max)

    def start(self, prompt: torch.Tensor, capacity: int) -> float:
        return 0.0

    def propose(self, context: torch.Tensor, k: int, sampling: SamplingParams,
                generator: torch.Generator | None) -> Proposal:
        rows = [find_continuation(row, self.n_min, self.n_max, k) for row in context]
        width = min(r.shape[0] for r in rows)  # one K per batch (ragged batches: shortest)
        tokens = torch.stack([r[:width] for r in rows]) if rows else context[:, :0]
        return Proposal(tokens=tokens, probs=None, draft_steps=0)

    def observe(self, outcome: RoundOutcome) -> None:
        pass

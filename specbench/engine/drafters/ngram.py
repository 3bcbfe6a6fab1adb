"""Prompt-lookup drafting (model-free).

The context's last n tokens are searched for earlier in the context (prompt + output so
far), longest n first from n_max down to n_min. For a chain, the most recent earlier
occurrence wins and the tokens that followed it are proposed. For a tree, several
occurrences become branches: their continuations are merged into a trie (shared prefixes
once), most informative first (longer n, then more recent), within the requested depth and
node budget and with at most as many first tokens as the shape has root children. No match:
nothing is proposed and the round is a plain decoding step.
"""

from __future__ import annotations

import torch

from specbench.engine.drafters.base import BaseDrafter, Proposal, RoundOutcome, Shape, chain_proposal
from specbench.engine.drafters.registry import DrafterType
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import DynamicTree, StaticTree
from specbench.errors import SpecbenchError


def match_starts(sequence: torch.Tensor, n: int) -> list[int]:
    """Start positions (most recent first) of the tokens following earlier copies of the last n tokens."""
    length = sequence.shape[0]
    if n >= length:
        return []
    suffix = sequence[length - n :]  # [n]
    windows = sequence[: length - 1].unfold(0, n, 1)  # [L-n, n]: starts whose continuation exists
    hits = (windows == suffix).all(-1).nonzero().flatten()
    return [int(h) + n for h in hits.flip(0)]


def find_continuation(sequence: torch.Tensor, n_min: int, n_max: int, gamma: int) -> torch.Tensor:
    """Tokens following the latest earlier match of sequence's last n tokens; sequence [L] -> [≤γ]."""
    for n in range(min(n_max, sequence.shape[0] - 1), n_min - 1, -1):
        starts = match_starts(sequence, n)
        if starts:
            return sequence[starts[0] : starts[0] + gamma]
    return sequence[:0]


def continuation_trie(
    sequence: torch.Tensor, n_min: int, n_max: int, gamma: int, budget: int, branches: int
) -> tuple[list[int], list[int]]:
    """(tokens, parents) of a trie of continuations, depth ≤ γ and ≤ ``budget`` tree nodes; parents
    precede children."""
    tokens: list[int] = []
    parents: list[int] = []
    children: dict[tuple[int, int], int] = {}  # (parent node, token) -> node
    seen: set[int] = set()
    for n in range(min(n_max, sequence.shape[0] - 1), n_min - 1, -1):
        for start in match_starts(sequence, n):
            if start in seen:
                continue
            seen.add(start)
            node = -1
            for token in sequence[start : start + gamma].tolist():
                key = (node, token)
                if key not in children:
                    roots = sum(1 for p in parents if p == -1)
                    if len(tokens) >= budget or (node == -1 and roots >= branches):
                        break
                    children[key] = len(tokens)
                    tokens.append(token)
                    parents.append(node)
                node = children[key]
            if len(tokens) >= budget:
                return tokens, parents
    return tokens, parents


class NgramDrafter(BaseDrafter):
    name = "ngram"

    def __init__(self, n_min: int = 1, n_max: int = 3):
        if n_min < 1 or n_max < n_min:
            raise SpecbenchError(f"ngram needs 1 <= n_min <= n_max, got n_min={n_min}, n_max={n_max}")
        self.n_min, self.n_max = int(n_min), int(n_max)

    def start(self, prompt: torch.Tensor, capacity: int, features: dict | None = None) -> None:
        pass

    def propose(
        self, context: torch.Tensor, shape: Shape, sampling: SamplingParams, generator: torch.Generator | None
    ) -> Proposal:
        row = context[0]  # the engine runs batch size 1
        if isinstance(shape, StaticTree) and shape.is_chain:
            return chain_proposal(find_continuation(row, self.n_min, self.n_max, shape.depth)[None, :])
        branches = shape.topk if isinstance(shape, DynamicTree) else shape.children_count(-1)
        tokens, parents = continuation_trie(row, self.n_min, self.n_max, shape.depth, shape.num_nodes, branches)
        ids = torch.tensor([tokens], dtype=torch.long, device=context.device).reshape(1, len(tokens))
        return Proposal(tokens=ids, probs=None, parents=parents)

    def observe(self, outcome: RoundOutcome) -> None:
        pass


class NgramType(DrafterType):
    name = "ngram"

    def build(self, target, *, device, dtype, implementation, n_min: int = 1, n_max: int = 3) -> NgramDrafter:
        return NgramDrafter(n_min=int(n_min), n_max=int(n_max))

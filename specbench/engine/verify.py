"""Lossless verification of a drafted chain in one target forward.

For draft tokens x_1..x_K drawn from the drafter's distributions q_1..q_K and target
distributions p_1..p_{K+1} (p_i at the position of x_i, all from one forward):

* accepted tokens: x_i is kept with probability min(1, p_i(x_i) / q_i(x_i)), left to right,
  stopping at the first rejection (Leviathan et al. 2023, Chen et al. 2023);
* recovered token: at the first rejected position j the output is drawn from the residual
  norm(max(p_j − q_j, 0)), which makes the emitted token distributed exactly as p_j;
* bonus token: when all K are kept, one more token is drawn from p_{K+1}.

Every round therefore emits accepted + 1 tokens. Drafters without a distribution (n-gram)
pass ``draft_probs=None``: q is one-hot on the proposed token, so acceptance is p(x) and the
residual is p with x removed. Greedy decoding (temperature 0) keeps the longest prefix that
matches the target's argmax and emits the argmax after it.

Randomness comes in as tensors so that a kernel and this reference can be compared bit for
bit: ``uniform`` [B, K] for the accept tests and ``exponential`` [B, V] ~ Exp(1) for the one
draw per sequence, made by the exponential race argmax(r / E), which picks i with
probability r_i / Σ r.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specbench.engine.tree import leaf_paths_cached
from specbench_kernels.rejection_sampling_reference import Verdict, draw_exponential_race, verify_sampling

__all__ = [
    "Verdict",
    "draw_exponential_race",
    "verify_sampling",
    "verify_greedy",
    "verify_chain_rows",
    "GreedyRows",
    "SampledRows",
    "verify_greedy_rows",
    "verify_sampling_rows",
    "TreeVerdict",
    "verify_tree_greedy",
    "verify_tree_sampling",
]


def verify_greedy(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """draft_tokens [B, K], target_logits [B, K+1, V] -> longest argmax-matching prefix."""
    best = target_logits.argmax(-1)  # [B, K+1]
    matches = (draft_tokens == best[:, :-1]).long()  # [B, K]
    accepted = matches.cumprod(-1).sum(-1)  # [B]
    next_token = best.gather(1, accepted[:, None]).squeeze(1)  # [B]
    return Verdict(accepted, next_token)


def residual(p: torch.Tensor, q: torch.Tensor | None, x) -> torch.Tensor:
    """max(p − q, 0) [V], unnormalised: what is left of p [V] after rejecting draft x drawn from q [V]
    (q None: one-hot on x, so p with x removed). Both chain rules and the tree rule recover from it."""
    if q is None:
        rest = p.clone()
        rest[x] = 0.0
        return rest
    return (p - q).clamp_min(0.0)


class GreedyRows:
    """The greedy chain rule one target row at a time (rows are logits [V]): draft i is kept when it is
    row i's argmax; the round stops at the first draft that is not and emits that row's argmax (at
    i = K, the bonus row: its argmax)."""

    def __init__(self, draft_tokens: torch.Tensor):
        self.drafts = draft_tokens[0].tolist()  # K ids

    def decide(self, i: int, row: torch.Tensor) -> int | None:
        best = int(row.argmax(-1))
        return None if i < len(self.drafts) and self.drafts[i] == best else best


class SampledRows:
    """`verify_sampling`'s rule one target row at a time (rows are probabilities p_i [V]), from the same
    random numbers: draft x_i is kept when u_i · q_i(x_i) < p_i(x_i) (q one-hot when the drafts carry no
    distribution: u_i < p_i(x_i)); at the first rejection j the token is drawn from
    norm(max(p_j − q_j, 0)) (p_j where that is empty), after all K from p_{K+1}, each draw the race
    argmax(weights / E) over the one exponential row. Same numbers in, same operations per row: given
    identical rows the verdict is `verify_sampling`'s.

    draft_tokens [1, K]; draft_probs [1, K, V] or None; uniform [1, K]; exponential [1, V].
    """

    def __init__(
        self,
        draft_tokens: torch.Tensor,
        draft_probs: torch.Tensor | None,
        uniform: torch.Tensor,
        exponential: torch.Tensor,
    ):
        self.drafts = draft_tokens[0]  # [K]
        self.probs = None if draft_probs is None else draft_probs[0]  # [K, V]
        self.uniform, self.exponential = uniform[0], exponential[0]  # [K], [V]

    def recovered(self, i: int, p: torch.Tensor) -> torch.Tensor:
        """The distribution drawn from after rejecting draft i: norm(max(p − q_i, 0)), or p when empty."""
        rest = residual(p, None if self.probs is None else self.probs[i], self.drafts[i])
        return p if bool(rest.sum() <= 0) else rest

    def decide(self, i: int, p: torch.Tensor) -> int | None:
        k = self.drafts.shape[0]
        if i < k:
            x = self.drafts[i]
            threshold = self.uniform[i] if self.probs is None else self.uniform[i] * self.probs[i, x]
            if bool(threshold < p[x]):
                return None
        weights = p if i == k else self.recovered(i, p)
        return int(draw_exponential_race(weights, self.exponential))


def verify_chain_rows(draft_tokens: torch.Tensor, target_row: Callable[[int], torch.Tensor], rule) -> Verdict:
    """One sequence's chain verdict with the target's rows computed on demand.

    draft_tokens [1, K]; target_row(i) -> the row at the position of draft i (i = K: the bonus
    position); ``rule.decide(i, row)`` -> None (draft i kept) or the token the round ends with.
    Row i is asked for only when drafts 0..i−1 were all kept, so a round that stops at draft m
    computes m + 1 rows of the LM head instead of K + 1 — worth it where the head's cost grows
    linearly with its rows (the CPU, `NativeDecoder.lazy_head`).
    """
    device = draft_tokens.device
    for i in range(draft_tokens.shape[1] + 1):
        token = rule.decide(i, target_row(i))
        if token is not None:
            return Verdict(torch.tensor([i], device=device), torch.tensor([token], device=device))
    raise AssertionError("a chain rule decides at the bonus row")


def verify_greedy_rows(draft_tokens: torch.Tensor, target_row: Callable[[int], torch.Tensor]) -> Verdict:
    """`verify_greedy` with logits rows on demand (target_row(i) -> [V]); same verdict as over the stacked rows."""
    return verify_chain_rows(draft_tokens, target_row, GreedyRows(draft_tokens))


def verify_sampling_rows(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_row: Callable[[int], torch.Tensor],
    uniform: torch.Tensor,
    exponential: torch.Tensor,
) -> Verdict:
    """`verify_sampling` for one sequence with probability rows on demand (target_row(i) -> p_i [V]);
    shapes as `SampledRows`. The accept test of x_i reads p_i, the first rejection j reads p_j, all
    kept reads p_{K+1}: rows after the first rejection are never asked for."""
    return verify_chain_rows(draft_tokens, target_row, SampledRows(draft_tokens, draft_probs, uniform, exponential))


# ----------------------------------------------------------------------------------------- trees


@dataclass
class TreeVerdict:
    path: list[int]  # accepted node indices from the root down (root excluded)
    next_token: int  # recovered or bonus token after the path


def verify_tree_greedy(tokens: torch.Tensor, parents: list[int], target_logits: torch.Tensor) -> TreeVerdict:
    """Longest root-to-leaf path whose every token is the target's argmax after its parent.

    tokens [N]; target_logits [N+1, V] over (root, nodes); node i's target row is i + 1.
    """

    best = target_logits.argmax(-1)  # [N+1]
    parent_rows = torch.tensor(parents, dtype=torch.long, device=tokens.device) + 1  # [N]
    ok = tokens == best[parent_rows]  # [N]
    paths = leaf_paths_cached(tuple(parents)).to(tokens.device)  # [leaves, depth]
    on_path = ok[paths.clamp_min(0)] & (paths >= 0)
    lengths = on_path.long().cumprod(-1).sum(-1)  # [leaves]
    leaf = int(lengths.argmax())
    path = paths[leaf, : int(lengths[leaf])].tolist()
    return TreeVerdict(path, int(best[path[-1] + 1] if path else best[0]))


def verify_tree_sampling(
    tokens: torch.Tensor,
    parents: list[int],
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    generator: torch.Generator | None,
) -> TreeVerdict:
    """Lossless multi-candidate verification (recursive rejection sampling over siblings).

    Walking down from the root with the target distribution p of the current node, the
    children x_1, x_2, ... are tried in proposal order: x_i, drawn from q_i, is accepted with
    probability min(1, p(x_i) / q_i(x_i)); on rejection p becomes norm(max(p − q_i, 0)) and the
    next sibling is tried. Whatever the proposal rule (i.i.d., without replacement, or
    deterministic with q_i one-hot), as long as x_i ~ q_i given the earlier siblings, the
    emitted token is distributed exactly as p (SpecInfer, Miao et al. 2023; Chen et al. 2023).
    An accepted child becomes the current node; when no child is accepted the residual is
    sampled, and below a leaf the bonus token is drawn from the leaf's p.

    tokens [N]; draft_probs [N, V] or None (one-hot); target_probs [N+1, V].
    """
    children: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        children.setdefault(parent, []).append(i)
    node, path = -1, []
    p = target_probs[0]
    while True:
        kids = children.get(node, [])
        for child in kids:
            x = int(tokens[child])
            q = draft_probs[child] if draft_probs is not None else None
            q_x = float(q[x]) if q is not None else 1.0
            u = float(torch.rand((), generator=generator, device=p.device))
            if u * q_x < float(p[x]):
                node = child
                path.append(child)
                p = target_probs[child + 1]
                break
            rest = residual(p, q, x)
            p = rest / rest.sum() if rest.sum() > 0 else p
        else:  # no child kept (or a leaf was reached): draw from the residual / the bonus distribution
            exponential = torch.empty_like(p).exponential_(generator=generator)
            return TreeVerdict(path, int(draw_exponential_race(p, exponential)))

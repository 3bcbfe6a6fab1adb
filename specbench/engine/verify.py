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

from dataclasses import dataclass
from typing import Callable

import torch

from specbench.engine.tree import leaf_paths_cached
from specbench.kernels.rejection_sampling_reference import Verdict, draw_exponential_race, verify_sampling

__all__ = ["Verdict", "draw_exponential_race", "verify_sampling", "verify_greedy", "verify_greedy_rows", "TreeVerdict",
           "verify_tree_greedy", "verify_tree_sampling"]


def verify_greedy(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """draft_tokens [B, K], target_logits [B, K+1, V] -> longest argmax-matching prefix."""
    best = target_logits.argmax(-1)  # [B, K+1]
    matches = (draft_tokens == best[:, :-1]).long()  # [B, K]
    accepted = matches.cumprod(-1).sum(-1)  # [B]
    next_token = best.gather(1, accepted[:, None]).squeeze(1)  # [B]
    return Verdict(accepted, next_token)


def verify_greedy_rows(draft_tokens: torch.Tensor, target_row: Callable[[int], torch.Tensor]) -> Verdict:
    """`verify_greedy` for one sequence with the target's rows computed on demand.

    draft_tokens [1, K]; target_row(i) -> logits [V] at the position of draft i (i = K: the bonus
    position). Row i is asked for only when drafts 0..i−1 all matched, so a round that stops at
    draft m computes m + 1 rows of the LM head instead of K + 1 — worth it where the head's cost
    grows linearly with its rows (16-bit weights on the CPU, `NativeDecoder.lazy_head`). Same
    verdict as `verify_greedy` over the stacked rows.
    """
    drafts = draft_tokens[0].tolist()
    for i in range(len(drafts) + 1):
        best = int(target_row(i).argmax(-1))
        if i == len(drafts) or drafts[i] != best:
            device = draft_tokens.device
            return Verdict(torch.tensor([i], device=device), torch.tensor([best], device=device))
    raise AssertionError("unreachable")


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


def verify_tree_sampling(tokens: torch.Tensor, parents: list[int], draft_probs: torch.Tensor | None,
                         target_probs: torch.Tensor, generator: torch.Generator | None) -> TreeVerdict:
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
            if q is not None:
                residual = (p - q).clamp_min(0.0)
            else:
                residual = p.clone()
                residual[x] = 0.0
            p = residual / residual.sum() if residual.sum() > 0 else p
        else:  # no child kept (or a leaf was reached): draw from the residual / the bonus distribution
            exponential = torch.empty_like(p).exponential_(generator=generator)
            return TreeVerdict(path, int(draw_exponential_race(p, exponential)))

"""Torch reference of chain speculative sampling: the rule the fused Triton kernel reproduces.

For draft tokens x_1..x_K drawn from q_1..q_K and target distributions p_1..p_{K+1}:
x_i is kept with probability min(1, p_i(x_i) / q_i(x_i)) left to right until the first
rejection; the recovered token is drawn from norm(max(p_j − q_j, 0)) at the first rejected
position j, the bonus token from p_{K+1} when all K are kept (Leviathan et al. 2023, Chen et
al. 2023). ``draft_probs=None`` means one-hot drafts (model-free drafters such as n-gram).

Randomness comes in as tensors so that the kernel and this reference agree bit for bit:
``uniform`` [B, K] for the accept tests and ``exponential`` [B, V] ~ Exp(1) for the single
draw, the exponential race argmax(r / E), which picks i with probability r_i / Σ r.
The engine verifies chains with this function (``specbench.engine.verify`` re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Verdict:
    accepted: torch.Tensor  # [B] long, number of draft tokens kept
    next_token: torch.Tensor  # [B] long, recovered token (after a rejection) or bonus token


def draw_exponential_race(weights: torch.Tensor, exponential: torch.Tensor) -> torch.Tensor:
    """Index i with probability weights_i / Σ weights, per row: argmax(weights / E)."""
    return (weights / exponential).argmax(-1)


def verify_sampling(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    uniform: torch.Tensor,
    exponential: torch.Tensor,
) -> Verdict:
    """Speculative sampling of a chain.

    draft_tokens [B, K] long; draft_probs [B, K, V] or None (one-hot drafts);
    target_probs [B, K+1, V]; uniform [B, K] in [0, 1); exponential [B, V].
    """
    bsz, k = draft_tokens.shape
    p_of_draft = target_probs[:, :k].gather(-1, draft_tokens[..., None]).squeeze(-1)  # [B, K]
    if draft_probs is None:
        q_of_draft = torch.ones_like(p_of_draft)
    else:
        q_of_draft = draft_probs.gather(-1, draft_tokens[..., None]).squeeze(-1)  # [B, K]
    keep = (uniform * q_of_draft < p_of_draft).long()  # u < p/q without dividing
    accepted = keep.cumprod(-1).sum(-1)  # [B]

    rows = torch.arange(bsz, device=draft_tokens.device)
    p_next = target_probs[rows, accepted]  # [B, V]
    if k == 0:  # nothing drafted: a plain draw from p
        return Verdict(accepted, draw_exponential_race(p_next, exponential))
    at = accepted.clamp(max=k - 1)  # position of the first rejection (ignored where all were kept)
    if draft_probs is None:
        q_next = torch.zeros_like(p_next).scatter_(1, draft_tokens[rows, at][:, None], 1.0)
    else:
        q_next = draft_probs[rows, at]  # [B, V]
    residual = (p_next - q_next).clamp_min(0.0)
    # p == q exactly leaves no residual mass (a rejection then has probability 0): use p
    empty = residual.sum(-1, keepdim=True) <= 0
    residual = torch.where(empty, p_next, residual)
    # branch-free (no host sync): rows that kept all k drafts draw the bonus from p_{K+1}
    weights = torch.where((accepted < k)[:, None], residual, p_next)
    return Verdict(accepted, draw_exponential_race(weights, exponential))

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

import torch


@dataclass
class Verdict:
    accepted: torch.Tensor  # [B] long, number of draft tokens kept
    next_token: torch.Tensor  # [B] long, recovered token (after a rejection) or bonus token


def verify_greedy(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> Verdict:
    """draft_tokens [B, K], target_logits [B, K+1, V] -> longest argmax-matching prefix."""
    best = target_logits.argmax(-1)  # [B, K+1]
    matches = (draft_tokens == best[:, :-1]).long()  # [B, K]
    accepted = matches.cumprod(-1).sum(-1)  # [B]
    next_token = best.gather(1, accepted[:, None]).squeeze(1)  # [B]
    return Verdict(accepted, next_token)


def draw_exponential_race(weights: torch.Tensor, exponential: torch.Tensor) -> torch.Tensor:
    """Index i with probability weights_i / Σ weights, per row: argmax(weights / E)."""
    return (weights / exponential).argmax(-1)


def verify_sampling(draft_tokens: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                    uniform: torch.Tensor, exponential: torch.Tensor) -> Verdict:
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


# ----------------------------------------------------------------------------------------- trees

@dataclass
class TreeVerdict:
    path: list[int]  # accepted node indices from the root down (root excluded)
    next_token: int  # recovered or bonus token after the path


def verify_tree_greedy(tokens: torch.Tensor, parents: list[int], target_logits: torch.Tensor) -> TreeVerdict:
    """Longest root-to-leaf path whose every token is the target's argmax after its parent.

    tokens [N]; target_logits [N+1, V] over (root, nodes); node i's target row is i + 1.
    """
    from specbench.engine.tree import leaf_paths_cached

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

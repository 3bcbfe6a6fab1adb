"""A model drafter's chain drafted step by step without tree bookkeeping.

A chain of γ tokens is the simplest shape `growth.grow` builds: one child per node, each drafter
forward over the one newest token. The generic growth pays for its generality at every step
(Python lists of nodes, an attention mask built node by node, a fresh token tensor, host
conversions of every token and score). `draft_chain` drafts the same chain with the same numbers:

* token i is the argmax of the drafter's logits (greedy: ``topk(logits, 1)``, as growth picks) or
  a Gumbel-top-1 draw from q = warp(logits).softmax (sampling: the same uniform [V] from the
  generator as `growth.sample_without_replacement`, so the same token for the same seed);
* its score is log q(x_i) under `growth.score_distribution`, the path score s_i = Σ_{j≤i} log q(x_j)
  is summed on the host at the end in the same order as growth sums it;

into tensors allocated once per round — tokens [1, γ], the draws' distributions [γ, V] and the
scores [γ] — feeding the drafter a view of the token tensor, so nothing leaves the device inside
the loop. The one exception is a verify-length schedule's ``keep_drafting``: it reads the
confidences so far after every token, which needs them on the host.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import accumulate

import torch

from specbench.engine.drafters.base import Proposal, chain_confidences
from specbench.engine.drafters.growth import gumbel_keys, score_distribution
from specbench.engine.sampling import SamplingParams, probabilities
from specbench.engine.strategies.schedule import KeepDrafting

Step = Callable[[torch.Tensor], torch.Tensor]  # token [1, 1] -> the drafter's next logits [V]


def draft_chain(
    root_logits: torch.Tensor,
    gamma: int,
    sampling: SamplingParams,
    generator,
    step: Step,
    keep_drafting: KeepDrafting | None = None,
) -> Proposal:
    """Up to ``gamma`` (≥ 1) draft tokens from root_logits [V] (the drafter's distribution after the
    context), calling ``step`` after every token but the last; ``keep_drafting`` (a verify-length
    schedule) may stop the chain after any token below γ. The Proposal is what `growth.grow_proposal`
    gives for a chain of depth γ: the same tokens, distributions (sampling), path scores and
    draft steps (one drafter forward per token, the context's included)."""
    device, vocab = root_logits.device, root_logits.shape[-1]
    tokens = torch.empty(1, gamma, dtype=torch.long, device=device)  # [1, γ]
    logq_drafted = torch.empty(gamma, dtype=torch.float32, device=device)  # [γ] log q_i(x_i)
    probs = None if sampling.greedy else torch.empty(gamma, vocab, device=device)  # [γ, V] q_i
    logits, drafted = root_logits, gamma
    for i in range(gamma):
        logq = score_distribution(logits, sampling)  # [V]
        if sampling.greedy:
            token = torch.topk(logits, 1).indices  # [1]
        else:
            probs[i] = probabilities(logits, sampling)
            token = torch.topk(gumbel_keys(probs[i], generator), 1).indices  # [1]
        tokens[0, i : i + 1] = token
        logq_drafted[i : i + 1] = logq.gather(0, token)
        if i + 1 == gamma:
            break
        if keep_drafting is not None and not keep_drafting(
            chain_confidences(list(accumulate(logq_drafted[: i + 1].tolist())))
        ):
            drafted = i + 1
            break
        logits = step(tokens[:, i : i + 1])
    return Proposal(
        tokens=tokens[:, :drafted],
        probs=None if probs is None else probs[None, :drafted],
        parents=None,
        draft_steps=drafted,
        path_logq=list(accumulate(logq_drafted[:drafted].tolist())),
    )

"""Growing a draft tree from a model drafter's distributions — one implementation for every
model drafter (draft model, Medusa, EAGLE, EAGLE-3, MTP).

A drafter supplies the root's logits (the distribution of the first draft token) and an
``expand(growth, nodes)`` callback returning the logits of the children of each node in
``nodes`` (one drafter forward over them as a block). `grow` builds the requested shape
level by level:

* chain / static tree — each node gets the number of children its rank path has in the shape;
  greedy: its top-k tokens; sampling: k draws without replacement from q (Gumbel-top-k),
  sibling i recorded with the distribution it was drawn from — q with siblings 1..i−1
  removed and renormalised — which is what lossless multi-candidate verification needs;
* dynamic tree (EAGLE-2 style) — each node's top-k tokens scored by cumulative log q; the k
  best nodes of a depth are expanded; `select` keeps the best ``nodes`` overall (with their
  ancestors). Deterministic candidates are verified as one-hot proposals (probs None), which
  is lossless too.

Expert-aware selection (MoE targets, after ECOSPEC): with ``lambda`` > 0 in a dynamic tree spec the
drafter also supplies `NodeExperts` — per node and layer, the experts the target is predicted to
route the node's token to (the target's router applied to the drafter's feature at the node's
position) — and `select_expert_aware` picks the nodes by draft probability minus λ × the experts
each newly adds. Only which nodes are verified changes, so verification stays lossless.

`block_mask` gives the attention pattern of a block of tree nodes fed after earlier ones: each
sees its ancestors among the block and itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specbench.engine.drafters.base import Proposal, Shape, chain_confidences
from specbench.engine.sampling import SamplingParams, probabilities, warp_logits
from specbench.engine.strategies.schedule import KeepDrafting
from specbench.engine.tree import StaticTree
from specbench.errors import SpecbenchError


@dataclass
class Growth:
    """Nodes of the proposal being grown (creation order: parents before children)."""

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)  # cumulative log q of the node's path (its confidence)
    paths: list[tuple[int, ...]] = field(default_factory=list)  # rank path in a static shape
    probs: list[torch.Tensor] = field(default_factory=list)  # [V] per node when sampling

    def add(self, token: int, parent: int, score: float, path: tuple[int, ...], q: torch.Tensor | None) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depths.append(1 if parent < 0 else self.depths[parent] + 1)
        self.scores.append(score)
        self.paths.append(path)
        if q is not None:
            self.probs.append(q)
        return len(self.tokens) - 1

    def ancestors(self, node: int) -> list[int]:
        """``node`` and its ancestors, nearest first."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out


Expand = Callable[[Growth, list[int]], torch.Tensor]  # (growth, nodes) -> logits [len(nodes), V]


def gumbel_keys(q: torch.Tensor, generator) -> torch.Tensor:
    """log q + Gumbel noise [V] (−inf where q = 0): the top k keys are k draws from q without
    replacement, in sequential order (Gumbel-top-k); one uniform [V] from ``generator``."""
    gumbel = -torch.log(-torch.log(torch.rand(q.shape, generator=generator, device=q.device).clamp_min(1e-20)))
    return torch.where(q > 0, q.log() + gumbel, torch.full_like(q, float("-inf")))


def score_distribution(logits: torch.Tensor, sampling: SamplingParams) -> torch.Tensor:
    """log q [V] that drafted tokens are scored with: the warped distribution when sampling, the raw
    softmax when greedy."""
    return (warp_logits(logits, sampling) if not sampling.greedy else logits.float()).log_softmax(-1)


def sample_without_replacement(q: torch.Tensor, k: int, generator) -> tuple[list[int], list[torch.Tensor]]:
    """k distinct tokens from q [V] in sequential order (Gumbel-top-k), each with the distribution
    it was drawn from: q with the earlier draws removed and renormalised."""
    k = min(k, int((q > 0).sum()))
    chosen = torch.topk(gumbel_keys(q, generator), k).indices.tolist()
    dists, current = [], q
    for token in chosen:
        dists.append(current)
        current = current.clone()
        current[token] = 0.0
        current = current / current.sum().clamp_min(1e-30)
    return chosen, dists


def _static_children(shape: StaticTree, path: tuple[int, ...]) -> int:
    return sum(1 for p in shape.paths if len(p) == len(path) + 1 and p[:-1] == path)


def children(
    growth: Growth, node: int, logits: torch.Tensor, shape: Shape, sampling: SamplingParams, generator
) -> list[int]:
    """Create the children of ``node`` (−1: root) from its logits [V]; returns their indices.

    Every child is scored with the cumulative log q of its path (q: the warped distribution when
    sampling, the raw softmax when greedy): dynamic trees grow by it, and it is the confidence
    `Proposal.path_logq` reports."""
    logq = score_distribution(logits, sampling)  # [V]
    base = growth.scores[node] if node >= 0 else 0.0
    if isinstance(shape, StaticTree):
        path = growth.paths[node] if node >= 0 else ()
        k = _static_children(shape, path)
        if k == 0:
            return []
        if sampling.greedy:
            picks, dists = torch.topk(logits, k).indices.tolist(), [None] * k
        else:
            picks, dists = sample_without_replacement(probabilities(logits, sampling), k, generator)
        return [
            growth.add(t, node, base + float(logq[t]), path + (r,), q) for r, (t, q) in enumerate(zip(picks, dists))
        ]
    top = torch.topk(logq, min(shape.topk, logq.shape[-1]))
    return [
        growth.add(int(t), node, base + float(s), (), None)
        for t, s in zip(top.indices.tolist(), top.values.tolist())
        if s > float("-inf")
    ]


def grow(
    root_logits: torch.Tensor,
    shape: Shape,
    sampling: SamplingParams,
    generator,
    expand: Expand,
    keep_drafting: KeepDrafting | None = None,
) -> tuple[Growth, int]:
    """Grow ``shape`` from root_logits [V]; returns the nodes and the number of ``expand`` calls.

    ``keep_drafting`` (chains only; a verify-length schedule, `specbench.engine.strategies.schedule`): called
    after each drafted token below the full depth with the confidences so far; False stops the
    growth before the next drafter forward (`chain_confidences` of the path scores)."""
    growth = Growth()
    frontier = [(-1, root_logits)]
    expansions = 0
    for depth in range(1, shape.depth + 1):
        new = [c for node, logits in frontier for c in children(growth, node, logits, shape, sampling, generator)]
        if depth == shape.depth or not new:
            break
        if keep_drafting is not None and not keep_drafting(chain_confidences(growth.scores)):  # a chain
            break
        if isinstance(shape, StaticTree):
            nodes = [n for n in new if _static_children(shape, growth.paths[n]) > 0]
        else:
            nodes = sorted(new, key=lambda n: -growth.scores[n])[: shape.topk]
        if not nodes:
            break
        frontier = list(zip(nodes, expand(growth, nodes)))
        expansions += 1
    return growth, expansions


@dataclass
class NodeExperts:
    """Predicted routing of a proposal's tokens: per layer, the set of experts each token selects."""

    root: list[set[int]]  # the root token (verified in every round)
    nodes: list[list[set[int]]]  # [growth node][layer]
    draft_steps: int = 0  # drafter forwards the prediction cost (features of nodes never fed)


def node_experts(predicted: torch.Tensor, draft_steps: int = 0) -> NodeExperts:
    """`NodeExperts` from predicted expert ids [1 + N, L, top_k] (row 0: the root, then growth nodes)."""
    sets = [[set(layer) for layer in node] for node in predicted.tolist()]
    return NodeExperts(root=sets[0], nodes=sets[1:], draft_steps=draft_steps)


def select_expert_aware(growth: Growth, budget: int, lam: float, experts: NodeExperts) -> list[int]:
    """``budget`` nodes, closed under ancestors, chosen greedily by

        value(n) = exp(score_n) − λ · (1/L) Σ_l |S_l(n) ∖ T_l|

    where exp(score_n) is the node's cumulative draft probability (the chance its path is accepted, as
    the drafter sees it), S_l(n) the experts its token is predicted to select in layer l and T_l the
    experts the verification already touches there (the root's and the chosen nodes'): a node whose
    experts are already loaded costs nothing extra. Candidates are the frontier — children of the root
    or of a chosen node — so the chosen set is always a tree. λ = 0 gives the plain selection (the
    most probable nodes; ancestors are never less probable than their descendants)."""
    layers = len(experts.root)
    touched = [set(s) for s in experts.root]
    children: dict[int, list[int]] = {}
    for n, parent in enumerate(growth.parents):
        children.setdefault(parent, []).append(n)
    frontier, chosen = set(children.get(-1, [])), []

    def value(n: int) -> tuple[float, int]:
        new = sum(len(experts.nodes[n][layer] - touched[layer]) for layer in range(layers)) / max(layers, 1)
        return math.exp(growth.scores[n]) - lam * new, -n

    while frontier and len(chosen) < budget:
        best = max(frontier, key=value)
        frontier.remove(best)
        chosen.append(best)
        for layer in range(layers):
            touched[layer] |= experts.nodes[best][layer]
        frontier.update(children.get(best, []))
    return sorted(chosen)


def select(growth: Growth, shape: Shape, experts: NodeExperts | None = None) -> list[int]:
    """Nodes to verify: all of a static shape; the best `nodes` (with their ancestors) of a dynamic one —
    expert-aware (`select_expert_aware`) when the shape has λ > 0 and ``experts`` are given."""
    every = list(range(len(growth.tokens)))
    if isinstance(shape, StaticTree) or len(every) <= shape.nodes:
        return every
    if shape.expert_cost > 0 and experts is not None:
        return select_expert_aware(growth, shape.nodes, shape.expert_cost, experts)
    chosen = set(sorted(every, key=lambda n: (-growth.scores[n], n))[: shape.nodes])
    for n in list(chosen):
        chosen.update(growth.ancestors(n))
    return sorted(chosen)


def proposal(growth: Growth, keep: list[int], shape: Shape, device, draft_steps: int) -> tuple[Proposal, dict]:
    """The Proposal of the kept nodes, and the map growth index -> proposal index."""
    index = {old: new for new, old in enumerate(keep)}
    tokens = torch.tensor([[growth.tokens[n] for n in keep]], dtype=torch.long, device=device).reshape(1, len(keep))
    probs = torch.stack([growth.probs[n] for n in keep])[None] if growth.probs and keep else None
    parents = None
    if not (isinstance(shape, StaticTree) and shape.is_chain):
        parents = [index[growth.parents[n]] if growth.parents[n] >= 0 else -1 for n in keep]
    return Proposal(
        tokens=tokens, probs=probs, parents=parents, draft_steps=draft_steps, path_logq=[growth.scores[n] for n in keep]
    ), index


def wants_experts(shape: Shape, growth: Growth) -> bool:
    """Whether selecting from ``growth`` is expert-aware (a dynamic shape with λ > 0 and more nodes than its budget)."""
    return shape.expert_cost > 0 and len(growth.tokens) > shape.nodes


def grow_proposal(
    root_logits: torch.Tensor,
    shape: Shape,
    sampling: SamplingParams,
    generator,
    expand: Expand,
    device,
    draft_steps: int | None = None,
    keep_drafting: KeepDrafting | None = None,
    experts: Callable[[Growth], NodeExperts] | None = None,
) -> tuple[Proposal, dict]:
    """`grow`, `select` and `proposal` in one: the Proposal and the map growth index -> proposal
    index. draft_steps defaults to 1 + expansions (one drafter forward for the
    root, one per expanded level); a drafter whose expansions cost no forward passes its own.
    ``keep_drafting``: see `grow`. ``experts`` predicts the nodes' routing when the selection is
    expert-aware (`wants_experts`)."""
    if keep_drafting is not None and not (isinstance(shape, StaticTree) and shape.is_chain):
        raise SpecbenchError("a verify-length schedule cuts chains only, not trees")
    growth, expansions = grow(root_logits, shape, sampling, generator, expand, keep_drafting)
    predicted = experts(growth) if experts is not None and wants_experts(shape, growth) else None
    keep = select(growth, shape, predicted)
    steps = 1 + expansions if draft_steps is None else draft_steps
    steps += predicted.draft_steps if predicted is not None else 0
    proposal_, index = proposal(growth, keep, shape, device, draft_steps=steps)
    return proposal_, index


def block_mask(growth: Growth, fed_before: list[int], nodes: list[int]) -> tuple[torch.Tensor, bool]:
    """Attention of ``nodes`` over the block [fed_before, nodes]: [len(nodes), len(block)] bool,
    True where the block position is the node or one of its ancestors; and whether the block is a
    plain chain (then causal attention is the same thing)."""
    block = fed_before + nodes
    chain = all(growth.parents[n] == (block[j - 1] if j else -1) for j, n in enumerate(block))
    position = {n: j for j, n in enumerate(block)}
    mask = torch.zeros(len(nodes), len(block), dtype=torch.bool)
    for i, n in enumerate(nodes):
        for a in growth.ancestors(n):
            if a in position:
                mask[i, position[a]] = True
    return mask, chain


def capped(shape: Shape, max_gamma: int) -> Shape:
    """The shape cut to depth ``max_gamma`` (drafters that predict a fixed number of steps ahead)."""
    return shape.truncated(min(shape.depth, max_gamma))

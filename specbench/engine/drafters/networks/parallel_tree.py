"""Parallel tree drafting in the style of JetSpec (arXiv 2606.18394): a whole draft tree from one
drafter forward, over mask-token slots laid out as the tree, with a tree-causal attention mask.

Notation as in `eagle.py`: f_t the target's final hidden state at position t, e(x) the target's
embedding, W_lm its LM head (both shared).

*Context entries* — as in EAGLE, entry t fuses the target feature at t with the token it
produced, z_t = W_fc [e(x_{t+1}); f_t], and one decoder layer runs over the entries (causal);
the entry's output o_t is decoded through an output norm and the LM head:
q(x_{t+2}) = softmax(W_lm RMSNorm(o_t)). For a context of L tokens the newest entry, L−2, gives
the distribution of the first draft token.

*Slots* — every draft node that has children gets a slot: a learned mask vector plus the
embedding of the node's rank among its siblings (0 = its parent's best candidate), no token:

    z_slot(n) = m + R[min(rank(n), R−1)],     at position L−2+depth(n)
    q(children of n) = softmax(W_lm RMSNorm(Layer(z_slot(n) | entries ≤ L−2, slots of n's ancestors)))

Each slot attends the context entries and the slots of its own ancestors only (tree-causal
mask), so a branch knows which ranks its ancestors took — "the second candidate, then the best
one" — and siblings' subtrees differ. Since no slot input depends on a drafted token, the new
context entries and all the slots of a static tree run in **one** forward (draft_steps = 1);
the node tokens are then read off the slot distributions level by level (`growth.grow`: top-k,
or sampled without replacement, as for every model drafter). A chain is the tree of width 1
(every rank 0). A dynamic tree's nodes are only known as it grows, so it costs one slot forward
per level, each block attending its ancestors' slots already in the cache.

Training (`specbench.training.objectives.eagle_objective`, token loss only, unrolled): step 1 is
the entries; step s ≥ 2 is the slot of the depth-(s−1) node on the true path, at position
t+s−1, attending entries ≤ t and the slots of steps 2..s−1 of the same t (training-time test's
key layout), scored against the teacher T_{t+s}. Its rank is the rank of the true token x_{t+s}
in the drafter's own step s−1 distribution at t (detached; a token outside the draft vocabulary
counts as rank R−1): the branch that carries the target's token when drafting.

`ParallelTreeType` is the registry entry: MLP width 768, R = 4 ranks, 3 unrolled steps.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from specbench.engine.drafters import growth as tree_growth
from specbench.engine.drafters.base import Proposal, Shape
from specbench.engine.drafters.networks.eagle import FeatureDrafter, StepNet, _FeatureType
from specbench.engine.drafters.networks.feature_layers import (
    DraftLayer,
    LayerShape,
    RMSNorm,
    VocabHead,
)
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import StaticTree


def token_ranks(logits: torch.Tensor, truth: torch.Tensor, draft_ids: torch.Tensor | None, worst: int) -> torch.Tensor:
    """Rank of token ``truth`` [B, T] (target ids) in logits [B, T, Vd] (0 = the argmax), capped at
    ``worst``; a token outside the draft vocabulary ``draft_ids`` [Vd] (sorted) counts as ``worst``."""
    if draft_ids is None:
        index, inside = truth.clamp(0, logits.shape[-1] - 1), truth >= 0
    else:
        ids = draft_ids.to(truth.device)
        index = torch.searchsorted(ids, truth).clamp(max=ids.numel() - 1)
        inside = ids[index] == truth
    own = logits.gather(-1, index.unsqueeze(-1))  # [B, T, 1]
    rank = (logits > own).sum(-1)
    return torch.where(inside, rank, torch.full_like(rank, worst)).clamp(max=worst)


class ParallelTreeNet(StepNet):
    """Entries z = W_fc [e; f] and slots z = m + R[rank] through one decoder layer and an output norm."""

    kind = "parallel-tree"
    feature_layers = ("final",)

    def __init__(self, shape: LayerShape, ranks: int = 4):
        super().__init__()
        self.shape = shape
        self.fc = nn.Linear(2 * shape.hidden, shape.hidden, bias=False)
        self.mask_token = nn.Parameter(torch.randn(shape.hidden) * 0.02)
        self.rank_vectors = nn.Embedding(ranks, shape.hidden)
        nn.init.normal_(self.rank_vectors.weight, std=0.02)
        self.midlayer = DraftLayer(shape, input_norm=True)
        self.norm = RMSNorm(shape.hidden, shape.eps)

    @property
    def layer(self) -> DraftLayer:
        return self.midlayer

    @property
    def ranks(self) -> int:
        return self.rank_vectors.num_embeddings

    def context(self, features: dict) -> torch.Tensor:
        return features["final"]

    def step_inputs(self, g: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Context entries: (attention input, residual) from features g and embeddings e [..., H]."""
        z = self.fc(torch.cat((e, g.to(e.dtype)), dim=-1))
        return self.midlayer.input_layernorm(z), z

    def slot_inputs(self, ranks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Slots of nodes with sibling ranks [...] -> (attention input, residual) [..., H]."""
        z = self.mask_token + self.rank_vectors(ranks.clamp(max=self.ranks - 1))
        return self.midlayer.input_layernorm(z), z

    def next_inputs(self, out, e, logits, truth, head: VocabHead):
        """The next step is the slot of the node holding the true token, ranked by this step's logits."""
        return self.slot_inputs(token_ranks(logits, truth, head.ids, self.ranks - 1))

    def head_input(self, out: torch.Tensor) -> torch.Tensor:
        return self.norm(out)

    def architecture(self) -> dict:
        return {"layer": self.shape.to_dict(), "ranks": self.ranks}

    @classmethod
    def from_architecture(cls, arch: dict) -> ParallelTreeNet:
        return cls(LayerShape(**arch["layer"]), int(arch.get("ranks", 4)))


def sibling_rank(growth: tree_growth.Growth, node: int) -> int:
    """A node's rank among its siblings: children are created best first."""
    parent = growth.parents[node]
    return sum(1 for m in range(node) if growth.parents[m] == parent)


def slot_plan(shape: StaticTree) -> list[tuple[int, ...]]:
    """Rank paths of a static shape's nodes that have children (parents before children)."""
    inner = {p[:-1] for p in shape.paths if len(p) > 1}
    return sorted(inner, key=lambda p: (len(p), p))


class ParallelTreeDrafter(FeatureDrafter):
    """One forward per round for chains and static trees; dynamic trees grow a slot block per level."""

    def _node_inputs(self, growth, nodes, outputs):
        ranks = torch.tensor([[sibling_rank(growth, n) for n in nodes]], device=self.device)
        return self.net.slot_inputs(ranks)

    @torch.inference_mode()
    def propose(
        self,
        context: torch.Tensor,
        shape: Shape,
        sampling: SamplingParams,
        generator: torch.Generator | None,
        keep_drafting=None,
    ) -> Proposal:
        # a verify-length schedule stops drafting level by level: the slot blocks are grown per level then
        if not isinstance(shape, StaticTree) or shape.depth < 2 or keep_drafting is not None:
            return super().propose(context, shape, sampling, generator, keep_drafting)
        length = context.shape[1]
        self.cache.truncate(self.committed)
        plan = slot_plan(shape)
        a, r = self.net.slot_inputs(torch.tensor([p[-1] for p in plan], device=self.device))  # [n, A], [n, H]
        positions = torch.tensor([length - 2 + len(p) for p in plan], device=self.device)
        ancestry = torch.tensor([[q == p[: len(q)] for q in plan] for p in plan], dtype=torch.bool)  # [n, n]
        entries, slots = self._context_entries(context[0], self.committed, length - 1, (a, r, positions, ancestry))
        self.committed, self._last_output = self.cache.length, entries[-1]
        root_logits = self.head.logits(self.net.head_input(entries[-1]))
        logits = dict(zip(plan, self.head.logits(self.net.head_input(slots))))  # rank path -> [V]

        def expand(growth: tree_growth.Growth, nodes: list[int]) -> torch.Tensor:  # already computed
            return torch.stack([logits[growth.paths[n]] for n in nodes])

        return tree_growth.grow_proposal(
            root_logits, shape, sampling, generator, expand, context.device, draft_steps=1
        )[0]


class ParallelTreeType(_FeatureType):
    name = "parallel-tree"
    defaults: ClassVar[dict] = {"intermediate": 768, "ranks": 4}
    objective_args: ClassVar[dict] = {"feature_weight": 0.0, "token_weight": 1.0}
    unrolled_steps = 3
    drafter_class = ParallelTreeDrafter

    def architecture(self, target_config, **options) -> dict:
        opts = self.options(**options)
        return {
            "layer": LayerShape.for_target(target_config, intermediate=opts["intermediate"]).to_dict(),
            "ranks": int(opts["ranks"]),
        }

    def new_net(self, architecture: dict, *, zero_init: bool = True) -> ParallelTreeNet:
        return ParallelTreeNet.from_architecture(architecture)

"""An independent draft model: a smaller causal LM with the target's vocabulary.

It keeps its own KV cache and grows the requested shape level by level (`growth.grow`, shared
with every model drafter): one forward for the context tokens it has not seen yet (giving the
root's distribution), then one forward per depth over the nodes that get children, fed as a
tree block (each sees the context and its own ancestors). A chain of γ tokens thus costs γ
forwards, a tree of depth γ as many. How children are chosen (top-k, sampling without
replacement, EAGLE-2 style dynamic growth) is described in `specbench.engine.drafters.growth`.
A chain takes a shorter road with the same result (`specbench.engine.drafters.chain`): one
token per step into preallocated tensors, no tree bookkeeping (``fast_chain``; False: the
generic growth, for comparison).

After verification the cache keeps the context and the accepted path's fed nodes
(compacted in place); everything else is dropped.
"""

from __future__ import annotations

import torch

from specbench.engine.decoder import NativeDecoder, TreeLayout, make_decoder
from specbench.engine.drafters import growth as tree_growth
from specbench.engine.drafters.base import BaseDrafter, Proposal, RoundOutcome, Shape
from specbench.engine.drafters.chain import draft_chain
from specbench.engine.drafters.growth import Growth, sample_without_replacement  # noqa: F401 (re-export)
from specbench.engine.drafters.registry import DrafterType
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import StaticTree
from specbench.errors import SpecbenchError
from specbench.models.resolve import check_same_vocabulary, load_model


class DraftModelDrafter(BaseDrafter):
    name = "draft-model"
    drafts_ahead = True  # propose_ahead: nested speculation
    predicts_experts = True  # from its final hidden state: expert-aware trees
    confident = True  # proposes with probabilities: confidence-reading schedules can cut its chain
    fast_chain = True  # chains through `draft_chain` (False: the generic tree growth, same proposals)

    def __init__(self, model, target_vocab: int, implementation: str = "auto"):
        self.decoder = make_decoder(model, implementation)
        self.target_vocab = target_vocab
        self.feature_size = int(model.config.hidden_size)  # its hidden state: the expert predictor's input
        self.expert_router = None  # an MoE target's `RoutingLog`, set by the engine for expert-aware trees
        self._hidden: dict[int, torch.Tensor] = {}  # growth node (−1: root) -> final hidden state [H]
        self.synced = 0  # leading context tokens whose KV entries the drafter holds
        self._fed: list[int] = []  # final proposal index (or −1) of each node fed after the context
        self._context_length = 0
        self._pending = False  # a proposal awaits its verdict

    def start(self, prompt: torch.Tensor, capacity: int, features: dict | None = None) -> None:
        self.decoder.reset(prompt.shape[0], capacity)
        self.decoder.forward(prompt, logits="none")
        self.synced = prompt.shape[1]

    def _vocab_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """Drafter logits [..., V_d] on the target's ids [..., V_t] (extra rows are padding)."""
        extra = self.target_vocab - logits.shape[-1]
        if extra < 0:
            return logits[..., : self.target_vocab]
        if extra > 0:
            return torch.nn.functional.pad(logits, (0, extra), value=float("-inf"))
        return logits

    def compile_steps(self) -> None:
        """Run the drafter's single-token steps and catch-up forwards through torch.compile (`--compile`)."""
        if isinstance(self.decoder, NativeDecoder):
            self.decoder.compile_steps()

    # ------------------------------------------------------------------ growing
    def _step(self, token: torch.Tensor) -> torch.Tensor:
        """Feed token [1, 1] after the cached tokens; the drafter's next logits [V] on the target's ids."""
        return self._vocab_logits(self.decoder.forward(token, logits="all").logits[0, 0])

    def _feed(self, growth: Growth, nodes: list[int], logits: str = "all") -> torch.Tensor | None:
        """Run the drafter over ``nodes`` as a tree block; returns their logits [len(nodes), V] (None with
        logits="none") and keeps their hidden states."""
        fed_before = list(self._fed_growth)
        mask, chain = tree_growth.block_mask(growth, fed_before, nodes)
        ids = torch.tensor([[growth.tokens[n] for n in nodes]], device=self.decoder.device)
        layout = None
        if not chain:  # a chain is plain causal attention; anything else needs the ancestor mask
            layout = TreeLayout(mask, torch.tensor([growth.depths[n] - 1 for n in nodes]), prior=len(fed_before))
        out = self.decoder.forward(ids, tree=layout, logits=logits)
        self._fed_growth.extend(nodes)
        self._hidden.update(zip(nodes, out.hidden[0]))
        return None if out.logits is None else self._vocab_logits(out.logits[0])

    def _experts(self, growth: Growth) -> tree_growth.NodeExperts:
        """The target's routers applied to the drafter's hidden state at every node's position: one more
        forward for the nodes growth never fed (the last level, unexpanded candidates)."""
        unfed = [n for n in range(len(growth.tokens)) if n not in self._hidden]
        if unfed:
            self._feed(growth, unfed, logits="none")
        features = torch.stack([self._hidden[n] for n in [-1, *range(len(growth.tokens))]])  # [1 + N, H]
        return tree_growth.node_experts(self.expert_router.predict(features), draft_steps=1 if unfed else 0)

    def propose(
        self,
        context: torch.Tensor,
        shape: Shape,
        sampling: SamplingParams,
        generator: torch.Generator | None,
        keep_drafting=None,
    ) -> Proposal:
        self.decoder.truncate(self.synced)
        self._context_length = context.shape[1]
        self._pending = True
        self._fed_growth: list[int] = []
        out = self.decoder.forward(context[:, self.synced :], logits="last")
        self._hidden = {-1: out.hidden[0, -1]}  # the root token's position
        root_logits = self._vocab_logits(out.logits[0, -1])
        if self.fast_chain and isinstance(shape, StaticTree) and shape.is_chain and shape.depth > 0:
            proposal = draft_chain(root_logits, shape.depth, sampling, generator, self._step, keep_drafting)
            self._fed = list(range(proposal.tree_nodes - 1))  # every drafted token but the last was fed
            return proposal
        experts = self._experts if self.expert_router is not None else None
        proposal, index = tree_growth.grow_proposal(
            root_logits,
            shape,
            sampling,
            generator,
            self._feed,
            context.device,
            keep_drafting=keep_drafting,
            experts=experts,
        )
        self._fed = [index.get(n, -1) for n in self._fed_growth]
        return proposal

    def propose_ahead(
        self,
        context: torch.Tensor,
        verified: int,
        shape: Shape,
        sampling: SamplingParams,
        generator: torch.Generator | None,
    ) -> Proposal:
        """A draft continuing context [1, L'] whose tokens from index ``verified`` on the target has not
        verified yet (nested speculation prepares the next round while the target verifies this one).

        The draft is what `propose` gives for that context. Afterwards the cache keeps the verified
        context but its last token (the root, whose logits the next draft starts from) and no
        proposal is pending: the next `propose` (or `propose_ahead`) feeds whatever follows, and
        `observe` of the round being verified has nothing to roll back.
        """
        proposal = self.propose(context, shape, sampling, generator)
        self.decoder.truncate(verified - 1)
        self.synced, self._pending = verified - 1, False
        return proposal

    def observe(self, outcome: RoundOutcome) -> None:
        """Keep the context and the accepted path's fed nodes; drop the rest of the tree."""
        if not self._pending:  # the round drafted nothing: the cache is as it was
            return
        self._pending = False
        accepted = set(outcome.accepted_nodes)
        kept = [j for j, final in enumerate(self._fed) if final in accepted]
        if kept == list(range(len(kept))):  # a prefix of what was fed (always, for a chain): roll back
            self.decoder.truncate(self._context_length + len(kept))
        else:
            self.decoder.keep(self._context_length, torch.tensor(kept))
        self.synced = self._context_length + len(kept)


class DraftModelType(DrafterType):
    name = "draft-model"

    def build(self, target, *, device, dtype, implementation, model: str | None = None) -> DraftModelDrafter:
        if not model:
            raise SpecbenchError("drafter 'draft-model' needs a model: --drafter-model NAME (or model=NAME)")
        drafter = load_model(model, device=device, dtype=dtype)
        check_same_vocabulary(target, drafter)
        return DraftModelDrafter(drafter.model, target_vocab=target.vocab_size, implementation=implementation)

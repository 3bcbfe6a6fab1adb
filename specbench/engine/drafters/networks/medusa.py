"""Medusa heads (Cai et al. 2024, arXiv 2401.10774): K extra heads on the target's last hidden state.

Head k (k = 1..K) reads f_t, the target's final hidden state at position t (the LM head's
input, whose own logits give x_{t+1}), and predicts the token k positions further:

    h_k = r_k^(L) ∘ … ∘ r_k^(1) (f_t),   r(x) = x + SiLU(W x + b)     (residual blocks)
    q_k(x_{t+1+k} | x_≤t) = softmax(W_lm h_k)                          (the target's frozen LM head)

Drafting after the context x_0..x_{L−1} (root x_{L−1}, whose features f_{L−2} are the newest the
target produced) costs one small forward: all K heads on f_{L−2}. Depth d of the draft takes its
candidates from head d — the same for every parent, since the heads do not see the drafted
tokens: a chain is the heads' argmaxes, a static tree their top-k per depth (sampled without
replacement when sampling). Drafts are at most K deep.

The residual blocks are the only trained weights; state-dict names follow Medusa's
``{head}.{block}.linear.weight`` so that a published heads file loads directly.

`MedusaType` is the registry entry: defaults (4 heads of 1 block), objective
(`specbench.training.objectives.medusa_objective`: head k against the teacher at t+k, weighted
0.8^(k−1)) and Medusa's published layout — ``config.json`` with ``medusa_num_heads``,
``medusa_num_layers``, ``base_model_name_or_path``; ``medusa_lm_head.pt`` (or ``.safetensors``)
holding, per head i, residual blocks ``{i}.{j}.linear.weight/bias`` and the head's vocabulary
projection ``{i}.{L}.weight`` [V, H] (initialised from the base LM head; specbench shares the
target's LM head instead, and writes a copy of it only when exporting to this layout).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from specbench.engine.drafters import growth as tree_growth
from specbench.engine.drafters.base import BaseDrafter, Proposal, RoundOutcome, Shape
from specbench.engine.drafters.checkpoints import published
from specbench.engine.drafters.networks.feature_layers import VocabHead
from specbench.engine.drafters.networks.trained import TrainedType
from specbench.engine.sampling import SamplingParams
from specbench.errors import SpecbenchError
from specbench.models.memory import checked_module
from specbench.safe_files import write_json

MEDUSA_WEIGHTS = ("medusa_lm_head.safetensors", "medusa_lm_head.pt")


class ResBlock(nn.Module):
    """x + SiLU(W x + b)."""

    def __init__(self, hidden: int, zero_init: bool = True):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        if zero_init:  # the head starts as the identity: the target's own next-token guess
            nn.init.zeros_(self.linear.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + F.silu(self.linear(x))


class MedusaHeads(nn.ModuleList):
    """K heads of ``layers`` residual blocks each; forward f [..., H] -> [K, ..., H]."""

    def __init__(self, hidden: int, heads: int = 4, layers: int = 1, zero_init: bool = True):
        super().__init__([nn.Sequential(*[ResBlock(hidden, zero_init) for _ in range(layers)]) for _ in range(heads)])
        self.hidden, self.num_heads, self.num_layers = hidden, heads, layers

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        return torch.stack([head(f) for head in self])

    def architecture(self) -> dict:
        return {"hidden": self.hidden, "heads": self.num_heads, "layers": self.num_layers}

    @classmethod
    def from_architecture(cls, arch: dict, zero_init: bool = True) -> MedusaHeads:
        return cls(int(arch["hidden"]), int(arch["heads"]), int(arch.get("layers", 1)), zero_init)


class MedusaDrafter(BaseDrafter):
    """Drafts from K Medusa heads; ``vocab_heads`` holds one `VocabHead` per head (usually the same
    shared one; a published checkpoint may bring its own output layer per head)."""

    name = "medusa"
    feature_layers = ("final",)
    confident = True  # proposes with probabilities: confidence-reading schedules can cut its chain

    def __init__(self, heads: MedusaHeads, vocab_heads: list[VocabHead]):
        self.heads = heads.eval()
        self.vocab_heads = vocab_heads
        self._last: torch.Tensor | None = None  # [H] newest final feature

    @torch.inference_mode()
    def start(self, prompt: torch.Tensor, capacity: int, features: dict | None = None) -> None:
        self._last = features["final"][0, -1].clone()

    @property
    def max_gamma(self) -> int:
        """Drafts are at most as deep as the heads (head d predicts depth d)."""
        return len(self.vocab_heads)

    def depth_logits(self, hidden: torch.Tensor, depths: list[int], paths: list[list[int]]) -> torch.Tensor:
        """Logits [n, V] of the tokens at ``depths`` (1-based) after ``paths`` (root, then the drafted
        ancestors): Medusa's come from head d whatever the path."""
        per_depth = {d: self.vocab_heads[d - 1].logits(hidden[d - 1]) for d in set(depths)}
        return torch.stack([per_depth[d] for d in depths])

    def draft_steps(self, expansions: int) -> int:
        """Drafter forwards of a round whose tree was expanded ``expansions`` times: all heads ran in one."""
        return 1

    @torch.inference_mode()
    def propose(
        self,
        context: torch.Tensor,
        shape: Shape,
        sampling: SamplingParams,
        generator: torch.Generator | None,
        keep_drafting=None,
    ) -> Proposal:
        shape = tree_growth.capped(shape, self.heads.num_heads)
        hidden = self.heads(self._last.to(next(self.heads.parameters()).dtype))  # [K, H]
        root = int(context[0, -1])
        expansions = 0

        def expand(growth, nodes):  # children of nodes at depth d are the tokens at depth d + 1
            nonlocal expansions
            expansions += 1
            paths = [[root] + [growth.tokens[a] for a in reversed(growth.ancestors(n))] for n in nodes]
            return self.depth_logits(hidden, [growth.depths[n] + 1 for n in nodes], paths)

        proposal = tree_growth.grow_proposal(
            self.depth_logits(hidden, [1], [[root]])[0],
            shape,
            sampling,
            generator,
            expand,
            context.device,
            keep_drafting=keep_drafting,
        )[0]
        proposal.draft_steps = self.draft_steps(expansions)
        return proposal

    @torch.inference_mode()
    def observe(self, outcome: RoundOutcome) -> None:
        if outcome.features is not None:
            self._last = outcome.features["final"][0, -1].clone()


class MedusaType(TrainedType):
    name = "medusa"
    # Sized so that the four SmolLM2-135M drafters stay under 30 MB together in bf16.
    defaults = {"heads": 4, "layers": 1}
    objective = "specbench.training.objectives:medusa_objective"
    published = "Medusa"

    def architecture(self, target_config, **options) -> dict:
        opts = self.options(**options)
        return {"hidden": int(target_config.hidden_size), "heads": int(opts["heads"]), "layers": int(opts["layers"])}

    def new_net(self, architecture: dict, *, zero_init: bool = True) -> MedusaHeads:
        return MedusaHeads.from_architecture(architecture, zero_init=zero_init)

    def wrap(self, net, target, draft_vocab=None, head_weights=None) -> MedusaDrafter:
        if head_weights is None:
            shared = VocabHead(target.model.get_output_embeddings(), target.vocab_size, draft_vocab)
            heads = [shared] * net.num_heads
        else:  # a published checkpoint with its own output layer per head
            heads = [VocabHead(None, target.vocab_size, draft_vocab, weight=w) for w in head_weights]
        return MedusaDrafter(net, heads)

    def vocab_head(self, drafter: MedusaDrafter) -> VocabHead:
        return drafter.vocab_heads[0]

    def net_of(self, drafter: MedusaDrafter) -> MedusaHeads:
        return drafter.heads

    def recognizes(self, config: dict, folder: Path) -> bool:
        return "medusa_num_heads" in config

    def load_published(self, folder: Path, target):
        """(MedusaHeads, None, per-head output weights or None when they are the target's LM head)."""
        folder = Path(folder)
        config = published.read_config(folder / "config.json")
        heads_n, layers = int(config["medusa_num_heads"]), int(config.get("medusa_num_layers", 1))
        tensors = published.read_tensors(folder, MEDUSA_WEIGHTS)
        if "0.0.linear.weight" not in tensors:
            raise SpecbenchError(f"{folder}: not a Medusa heads file (no '0.0.linear.weight')")
        hidden = int(tensors["0.0.linear.weight"].shape[0])
        projections = [tensors.pop(f"{i}.{layers}.weight", None) for i in range(heads_n)]
        vocab = int(projections[0].shape[0]) if projections[0] is not None else None
        published.check_shapes(
            f"Medusa heads {folder} (base model {config.get('base_model_name_or_path')})", hidden, vocab, target
        )
        net = checked_module(lambda: MedusaHeads(hidden, heads_n, layers), f"Medusa heads {folder}", tensors)
        published.load_into(net, tensors, f"Medusa heads {folder}")
        lm = target.model.get_output_embeddings().weight.detach().float().cpu()
        shared = all(p is None or torch.allclose(p.float(), lm, atol=1e-3) for p in projections)
        return net, None, None if shared else [p.float() if p is not None else lm for p in projections]

    def export_published(
        self, folder: Path, net: MedusaHeads, target, draft_vocab=None, *, base_model: str | None = None
    ) -> Path:
        """Write the heads in Medusa's layout (each head's vocabulary projection = the target's LM head)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        lm = target.model.get_output_embeddings().weight.detach().float()
        tensors = {k: v.float() for k, v in net.state_dict().items()}
        for i in range(net.num_heads):
            tensors[f"{i}.{net.num_layers}.weight"] = lm.clone()
        published.write_tensors(folder / "medusa_lm_head.pt", tensors)
        write_json(
            folder / "config.json",
            {
                "medusa_num_heads": net.num_heads,
                "medusa_num_layers": net.num_layers,
                "base_model_name_or_path": base_model or target.name,
            },
            what="checkpoint file",
        )
        return folder

"""Semi-autoregressive drafting in the style of DSpark (arXiv 2607.05147): a parallel block head
followed by a light serial head.

Notation as in `medusa.py`: f_t the target's final hidden state at position t (W_lm f_t gives
x_{t+1}), e(x) the target's embedding, W_lm its LM head, both shared.

*Parallel backbone* — K Medusa heads (`MedusaHeads`) read f_t once and give one hidden state per
depth, all in one forward: h_k = head_k(f_t), k = 1..K, meant for token x_{t+k+1}. Alone, these
are Medusa: each depth is predicted without knowing what was drafted before it, and acceptance
collapses along the block.

*Serial head* — one small residual MLP, run once per depth, injects the dependency on the drafted
prefix: depth k sees the token just before it, x̂_{t+k} (for k = 1 the root x_{t+1}), and the mean
embedding of all drafted tokens before it, c_k = mean(e(x̂_{t+1}), …, e(x̂_{t+k})):

    s_k = h_k + W_down SiLU(W_up [RMSNorm(h_k); RMSNorm(e(x̂_{t+k})); RMSNorm(c_k)])
    q_k(x_{t+k+1}) = softmax(W_lm s_k)

W_down starts at zero, so an untrained serial head is exactly Medusa. On a tree, x̂ are the node's
ancestors (root first): each branch is conditioned on its own path. A round costs one backbone
forward plus one serial-head forward per depth (a matrix-vector product 3H → I → H per node, about
a quarter of a decoder layer at the default sizes); ``draft_steps`` counts each as a forward.

Training (`specbench.training.objectives.medusa_objective`, which applies the serial head when the
net has one): depth k against the teacher T_{t+k}, weighted 0.8^(k−1), teacher-forced on the true
tokens x_{t+1..t+k} — the tokens a drafted path holds whenever it is still being verified.

`SemiARType` is the registry entry: defaults 4 heads of 1 block, serial MLP width = hidden size.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from specbench.engine.drafters.networks.feature_layers import RMSNorm, VocabHead, embed
from specbench.engine.drafters.networks.medusa import MedusaDrafter, MedusaHeads
from specbench.engine.drafters.networks.trained import TrainedType


class SerialHead(nn.Module):
    """s = h + W_down SiLU(W_up [norm(h); norm(e_prev); norm(c)]): one residual MLP per depth."""

    def __init__(self, hidden: int, intermediate: int, eps: float = 1e-5, zero_init: bool = True):
        super().__init__()
        self.h_norm, self.e_norm, self.c_norm = (RMSNorm(hidden, eps) for _ in range(3))
        self.up = nn.Linear(3 * hidden, intermediate, bias=False)
        self.down = nn.Linear(intermediate, hidden, bias=False)
        if zero_init:  # starts as the parallel heads alone
            nn.init.zeros_(self.down.weight)

    def forward(self, h: torch.Tensor, e_prev: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """h, e_prev, c [..., H] -> [..., H]."""
        x = torch.cat((self.h_norm(h), self.e_norm(e_prev.to(h.dtype)), self.c_norm(c.to(h.dtype))), dim=-1)
        return h + self.down(F.silu(self.up(x)))


class SemiARNet(nn.Module):
    """Parallel Medusa-style heads (``heads``) and one serial head (``serial``)."""

    def __init__(
        self,
        hidden: int,
        heads: int = 4,
        layers: int = 1,
        intermediate: int | None = None,
        eps: float = 1e-5,
        zero_init: bool = True,
    ):
        super().__init__()
        self.heads = MedusaHeads(hidden, heads, layers, zero_init)
        self.serial = SerialHead(hidden, intermediate or hidden, eps, zero_init)
        self.eps = eps

    @property
    def num_heads(self) -> int:
        return self.heads.num_heads

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        """The parallel block: f [..., H] -> [K, ..., H] (the serial head is applied per depth)."""
        return self.heads(f)

    def architecture(self) -> dict:
        return {**self.heads.architecture(), "intermediate": self.serial.up.out_features, "eps": self.eps}

    @classmethod
    def from_architecture(cls, arch: dict, zero_init: bool = True) -> SemiARNet:
        return cls(
            int(arch["hidden"]),
            int(arch["heads"]),
            int(arch.get("layers", 1)),
            int(arch["intermediate"]),
            float(arch.get("eps", 1e-5)),
            zero_init,
        )


class SemiARDrafter(MedusaDrafter):
    """Medusa's drafting with the serial head between each depth's hidden state and the LM head."""

    name = "semi-ar"

    def __init__(self, net: SemiARNet, target_model, head: VocabHead):
        super().__init__(net.heads, [head] * net.num_heads)
        self.net, self.target_model, self.head = net.eval(), target_model, head

    def depth_logits(self, hidden: torch.Tensor, depths: list[int], paths: list[list[int]]) -> torch.Tensor:
        """Logits [n, V] of the tokens at ``depths`` (1-based) after ``paths`` (root, then drafted ancestors)."""
        dtype = hidden.dtype
        prev = embed(self.target_model, torch.tensor([p[-1] for p in paths], device=hidden.device)).to(dtype)  # [n, H]
        mean = torch.stack(
            [embed(self.target_model, torch.tensor(p, device=hidden.device)).to(dtype).mean(0) for p in paths]
        )  # [n, H]
        s = self.net.serial(hidden[torch.tensor(depths, device=hidden.device) - 1], prev, mean)
        return self.head.logits(s)

    def draft_steps(self, expansions: int) -> int:
        return 2 + expansions  # the parallel block, then one serial-head forward per depth


class SemiARType(TrainedType):
    name = "semi-ar"
    defaults: ClassVar[dict] = {"heads": 4, "layers": 1, "intermediate": None}  # intermediate None: the hidden size
    objective = "specbench.training.objectives:medusa_objective"

    def architecture(self, target_config, **options) -> dict:
        opts = self.options(**options)
        hidden = int(target_config.hidden_size)
        return {
            "hidden": hidden,
            "heads": int(opts["heads"]),
            "layers": int(opts["layers"]),
            "intermediate": int(opts["intermediate"] or hidden),
            "eps": float(getattr(target_config, "rms_norm_eps", 1e-5)),
        }

    def new_net(self, architecture: dict, *, zero_init: bool = True) -> SemiARNet:
        return SemiARNet.from_architecture(architecture, zero_init=zero_init)

    def wrap(self, net, target, draft_vocab=None, head_weights=None) -> SemiARDrafter:
        head = VocabHead(
            target.model.get_output_embeddings(),
            target.vocab_size,
            draft_vocab,
            weight=None if head_weights is None else head_weights[0],
        )
        return SemiARDrafter(net, target.model, head)

    def net_of(self, drafter: SemiARDrafter) -> SemiARNet:
        return drafter.net

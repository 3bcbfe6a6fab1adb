"""Multi-token prediction modules in the style of DeepSeek-V3 (arXiv 2412.19437, §2.2).

D sequential modules share the target's embedding e and LM head W_lm. Module k (k = 1..D) at
position i combines the previous depth's representation with the embedding of token i+k and
predicts token i+k+1:

    h'_i^k = M_k [RMSNorm(h_i^{k−1}); RMSNorm(e(x_{i+k}))]
    h_i^k  = Block_k(h'_{≤i}^k)                    (one decoder layer, causal over positions)
    q_k(x_{i+k+1}) = softmax(W_lm RMSNorm(h_i^k))

with h_i^0 = f_i, the target's final hidden state. Drafting from a context of L tokens runs all
modules at position i = L−2 (the newest target feature): module 1 with the root x_{L−1} gives
the first draft token, module k with the draft token of depth k−1 gives depth k — so drafts
are at most D deep and each module runs once per round.

Module k keeps a KV cache of the positions whose inputs are all verified (i ≤ L−1−k: it needs
x_{i+k}); the draft query at L−2 sees those and itself. So that training sees exactly what
drafting sees, module k attends, at every position i, to positions j ≤ i−(k−1) and to i itself
(`band_mask`): for k ≤ 2 that is plain causal attention; deeper modules skip the k−2 most recent
positions, whose inputs would be drafts at inference. A static or dynamic tree works the same
way: the nodes of depth d are queries of module d+1, each seeing the verified positions and
itself.

`MTPType` is the registry entry: defaults (2 modules, MLP width 768) and objective
(`specbench.training.objectives.mtp_objective`: module k against the teacher at i+k with this
band mask, modules weighted equally).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from specbench.engine.drafters import growth as tree_growth
from specbench.engine.drafters.base import BaseDrafter, Proposal, RoundOutcome, Shape
from specbench.engine.drafters.networks.feature_layers import (
    DraftLayer,
    FeatureBuffer,
    LayerShape,
    RMSNorm,
    VocabHead,
    embed,
    new_cache,
)
from specbench.engine.drafters.networks.trained import TrainedType
from specbench.engine.sampling import SamplingParams


def band_mask(query_positions: torch.Tensor, key_positions: torch.Tensor, depth: int) -> torch.Tensor:
    """[Tq, Tk] bool: module ``depth`` (1-based) at position i sees j ≤ i − (depth − 1), and j = i."""
    i, j = query_positions[:, None], key_positions[None, :]
    return (j <= i - (depth - 1)) | (j == i)


class MTPModule(nn.Module):
    """One module: RMSNorms of both inputs, the projection M_k, a decoder layer, an output norm."""

    def __init__(self, shape: LayerShape):
        super().__init__()
        self.enorm = RMSNorm(shape.hidden, shape.eps)
        self.hnorm = RMSNorm(shape.hidden, shape.eps)
        self.eh_proj = nn.Linear(2 * shape.hidden, shape.hidden, bias=False)
        self.block = DraftLayer(shape, input_norm=True)
        self.norm = RMSNorm(shape.hidden, shape.eps)

    def step_inputs(self, h_prev: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(attention input, residual) from h^{k−1} [..., H] and e(x_{i+k}) [..., H]."""
        x = self.eh_proj(torch.cat((self.enorm(e), self.hnorm(h_prev.to(e.dtype))), dim=-1))
        return self.block.input_layernorm(x), x

    def head_input(self, out: torch.Tensor) -> torch.Tensor:
        return self.norm(out)


class MTPNet(nn.Module):
    kind = "mtp"
    feature_layers = ("final",)

    def __init__(self, shape: LayerShape, depth: int = 2):
        super().__init__()
        self.shape = shape
        self.layers = nn.ModuleList([MTPModule(shape) for _ in range(depth)])

    @property
    def depth(self) -> int:
        return len(self.layers)

    def architecture(self) -> dict:
        return {"layer": self.shape.to_dict(), "modules": self.depth}

    @classmethod
    def from_architecture(cls, arch: dict) -> MTPNet:
        return cls(LayerShape(**arch["layer"]), int(arch["modules"]))


class MTPDrafter(BaseDrafter):
    """Drafts with D MTP modules: chains and trees of depth ≤ D, one forward per module and round."""

    name = "mtp"
    feature_layers = ("final",)
    confident = True  # proposes with probabilities: confidence-reading schedules can cut its chain

    @property
    def max_gamma(self) -> int:
        """Drafts are at most as deep as the modules (module k predicts depth k)."""
        return self.net.depth

    def __init__(self, net: MTPNet, target_model, head: VocabHead):
        self.net = net.eval()
        self.target_model = target_model
        self.head = head
        param = next(net.parameters())
        self.dtype, self.device = param.dtype, param.device
        self.features = FeatureBuffer()  # h^0: the target's final hidden states by position
        self.outputs: list[torch.Tensor] = []  # outputs[k−1][i] = h_i^k at verified positions (k < D)
        self.caches: list = []

    def _previous(self, k: int, start: int, stop: int) -> torch.Tensor:
        """h^{k−1} at positions start..stop−1 -> [n, H]."""
        if k == 1:
            return self.features.get("final", start, stop)
        return self.outputs[k - 2][start:stop]

    def _run_module(self, k: int, tokens: torch.Tensor, last: int, queries=None):
        """Module k (1-based) over its not-yet-cached verified positions ..``last`` (inclusive) and
        then draft ``queries`` = (h_prev [n, H], ids [n], position), which see the verified
        positions and themselves only. Returns (verified outputs [m, H], query outputs [n, H] | None);
        the cache keeps the verified entries only."""
        module, cache = self.net.layers[k - 1], self.caches[k - 1]
        start = cache.length
        h_rows, ids, positions = [], [], []
        if last >= start:
            h_rows.append(self._previous(k, start, last + 1))
            ids.append(tokens[start + k : last + 1 + k])  # x_{i+k}
            positions.append(torch.arange(start, last + 1, device=self.device))
        verified = int(positions[0].numel()) if positions else 0
        if queries is not None:
            h_q, ids_q, position = queries
            h_rows.append(h_q)
            ids.append(ids_q)
            positions.append(torch.full((ids_q.numel(),), position, dtype=torch.long, device=self.device))
        if not positions:
            return None, None
        positions = torch.cat(positions)
        a, r = module.step_inputs(
            torch.cat(h_rows)[None], embed(self.target_model, torch.cat(ids))[None].to(self.dtype)
        )
        mask = band_mask(positions, torch.cat([torch.arange(start, device=self.device), positions]), k)
        if queries is not None:  # draft queries never see one another: each is its own path
            n = positions.numel() - verified
            mask[verified:, start + verified :] = torch.eye(n, dtype=torch.bool, device=self.device)
        out = module.block.forward_cached(a, r, positions, cache, mask)[0]  # [m + n, H]
        cache.truncate(start + verified)
        if verified and k < self.net.depth:
            self._store(k, start, out[:verified])
        return out[:verified], (out[verified:] if queries is not None else None)

    def _store(self, k: int, start: int, rows: torch.Tensor) -> None:
        buf = self.outputs[k - 1]
        if start + rows.shape[0] > buf.shape[0]:
            grown = buf.new_zeros(max(2 * buf.shape[0], start + rows.shape[0]), buf.shape[1])
            grown[:start] = buf[:start]
            self.outputs[k - 1] = buf = grown
        buf[start : start + rows.shape[0]] = rows

    @torch.inference_mode()
    def start(self, prompt: torch.Tensor, capacity: int, features: dict | None = None) -> None:
        self.features.reset({"final": features["final"]}, capacity)
        hidden = self.net.shape.hidden
        self.outputs = [
            torch.zeros(capacity, hidden, dtype=self.dtype, device=self.device) for _ in range(self.net.depth - 1)
        ]
        self.caches = [new_cache(self.net.shape, capacity + 8, self.dtype, self.device) for _ in range(self.net.depth)]
        length = prompt.shape[1]
        for k in range(1, self.net.depth + 1):  # verified positions of module k: i ≤ T − 1 − k
            if length - 1 - k >= 0:
                self._run_module(k, prompt[0], length - 1 - k)

    @torch.inference_mode()
    def propose(
        self,
        context: torch.Tensor,
        shape: Shape,
        sampling: SamplingParams,
        generator: torch.Generator | None,
        keep_drafting=None,
    ) -> Proposal:
        shape = tree_growth.capped(shape, self.net.depth)
        tokens = context[0]
        length = tokens.shape[0]
        verified, _ = self._run_module(1, tokens, length - 2)  # ends at position L−2: the root's output
        outputs = {-1: verified[-1]}

        def expand(growth: tree_growth.Growth, nodes: list[int]) -> torch.Tensor:
            k = growth.depths[nodes[0]] + 1  # nodes of depth d get their children from module d + 1
            h_prev = torch.stack([outputs[growth.parents[n]] for n in nodes])
            ids = torch.tensor([growth.tokens[n] for n in nodes], device=self.device)
            _, out = self._run_module(k, tokens, length - 1 - k, queries=(h_prev, ids, length - 2))
            outputs.update(zip(nodes, out))
            return self.head.logits(self.net.layers[k - 1].head_input(out))

        root_logits = self.head.logits(self.net.layers[0].head_input(outputs[-1]))
        return tree_growth.grow_proposal(
            root_logits, shape, sampling, generator, expand, context.device, keep_drafting=keep_drafting
        )[0]

    @torch.inference_mode()
    def observe(self, outcome: RoundOutcome) -> None:
        if outcome.features is not None:
            self.features.append({"final": outcome.features["final"]})


class MTPType(TrainedType):
    name = "mtp"
    defaults = {"intermediate": 768, "modules": 2}  # sized so that the four SmolLM2-135M drafters stay under 30 MB
    objective = "specbench.training.objectives:mtp_objective"

    def architecture(self, target_config, **options) -> dict:
        opts = self.options(**options)
        return {
            "layer": LayerShape.for_target(target_config, intermediate=opts["intermediate"]).to_dict(),
            "modules": int(opts["modules"]),
        }

    def new_net(self, architecture: dict, *, zero_init: bool = True) -> MTPNet:
        return MTPNet.from_architecture(architecture)

    def wrap(self, net, target, draft_vocab=None, head_weights=None) -> MTPDrafter:
        head = VocabHead(
            target.model.get_output_embeddings(),
            target.vocab_size,
            draft_vocab,
            weight=None if head_weights is None else head_weights[0],
        )
        return MTPDrafter(net, target.model, head)

"""EAGLE and EAGLE-3: drafting autoregressively in the target's feature space.

Notation: x_t tokens, e(x) the target's (shared) embedding, f_t the target's final hidden state
at position t (the LM head's input; W_lm f_t gives x_{t+1}), W_lm the target's LM head.

EAGLE (Li et al. 2024, arXiv 2401.15077). Entry t of the drafter fuses the feature at t with
the embedding of the token that feature produced, and one decoder layer predicts the next
feature, decoded by the target's own LM head:

    z_t = W_fc [e(x_{t+1}); f_t] + b,   f̂_{t+1} = Layer(z_≤t),   q(x_{t+2}) = softmax(W_lm f̂_{t+1})

Trained on both ‖f̂_{t+1} − f_{t+1}‖ (smooth L1) and the token loss.

EAGLE-3 (Li et al. 2025, arXiv 2503.01840). The context vector fuses a low, a middle and a
high layer of the target (outputs of layers 2, N/2 and N−3 of N), g_t = W_fc [l_t; m_t; h_t];
the layer attends over [RMSNorm(e(x_{t+1})); RMSNorm(g_t)] with g_t as its residual, and its
output o_t is decoded through its own norm and the target's LM head:

    q(x_{t+2}) = softmax(W_lm RMSNorm(o_t))

It is trained on the token loss only, with *training-time test*: the layer is unrolled on its
own outputs for several steps, as it runs when drafting.

EAGLE-3.1 (EAGLE × vLLM × TorchSpec, May 2026; vLLM PR #42764, the ``fc_norm`` / ``norm_output``
drafter-config toggles). Two normalisations against the "attention drift" of EAGLE-3 drafters:
the three fused streams have very different scales (deeper layers' hidden states grow in norm,
and more so along a long context), so one dominates W_fc; and the unrolled steps feed back the
*pre-norm* output o_t, whose scale drifts from step to step and away from the g_t the layer saw
for true context entries. The fix normalises each stream before the fusion and hands on the
normalised output:

    g_t = W_fc [RMSNorm_l(l_t); RMSNorm_m(m_t); RMSNorm_h(h_t)]          (fc_norm)
    n_t = RMSNorm(o_t),  q(x_{t+2}) = softmax(W_lm n_t),  next step fed n_t  (norm_output)

Everything else is EAGLE-3's (same layer, inputs, training-time test); both flags live in the
checkpoint's ``architecture`` and are absent for EAGLE-3.

Drafting, both variants. The drafter's KV cache holds entries computed from the target's
*true* features: for a context of L tokens (root x_{L−1}) the entries 0..L−2 (entry t needs
f_t and x_{t+1}). Their last output gives the root's distribution. A draft node of depth d is
the entry at position L−2+d whose inputs are its parent's output (in place of the unknown
true feature) and the node's own token; it attends the context entries and its ancestors
(`growth.block_mask`). After verification the draft entries are dropped and the accepted
positions are fed again next round from the true features the target computed for them
(`RoundOutcome.features`), so the cache never holds a drafted feature.

`EagleType`, `Eagle3Type` and `Eagle31Type` are the registry entries. Both train with
`specbench.training.objectives.eagle_objective` (EAGLE: feature + 0.1 × token loss, 1 step;
EAGLE-3: token loss only, 3 training-time-test steps) and read and write the EAGLE project's
layouts. EAGLE (EAGLE-1/2): a Llama ``config.json`` (hidden size, heads, MLP width, one layer,
optional ``bias`` for the fc) and ``pytorch_model.bin`` (or ``model.safetensors``) with
``fc.weight`` [H, 2H] over [embedding; feature], ``fc.bias``, ``layers.0.*`` (no input norm on
layer 0) and, optionally, ``embed_tokens.weight`` (ignored on load: the target's embedding is
used). EAGLE-3: a Llama ``config.json`` plus ``draft_vocab_size``; weights ``fc.weight``
[H, 3H], ``midlayer.{input_layernorm, hidden_norm, self_attn, post_attention_layernorm, mlp}.*``,
``norm.weight``, its own ``lm_head.weight`` [Vd, H] and the vocabulary maps ``d2t`` [Vd]
(target id = draft id + d2t[draft id]) and ``t2d`` [V] (bool).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from specbench.engine.drafters import growth as tree_growth
from specbench.engine.drafters.base import BaseDrafter, Proposal, RoundOutcome, Shape
from specbench.engine.drafters.checkpoints import published
from specbench.engine.drafters.networks.feature_layers import (
    DraftLayer,
    FeatureBuffer,
    LayerShape,
    RMSNorm,
    VocabHead,
    cache_mask,
    causal_mask,
    embed,
    new_cache,
)
from specbench.engine.drafters.networks.trained import TrainedType
from specbench.engine.sampling import SamplingParams
from specbench.errors import SpecbenchError
from specbench.models.memory import checked_module
from specbench.safe_files import write_json

EAGLE_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def eagle3_layers(num_layers: int) -> tuple[int, int, int]:
    """Target layers EAGLE-3 fuses: outputs of layers 2, N//2 and N−3 (0 would be the embeddings);
    on very shallow targets the distinct ones among them, clamped to 1..N."""
    picks = (2, num_layers // 2, num_layers - 3)
    if num_layers >= 6:
        return picks
    return tuple(sorted({max(1, min(num_layers, i)) for i in picks}))


class StepNet(nn.Module):
    """What drafting (`FeatureDrafter`) and the unrolled objective ask of a one-layer feature drafter:
    ``layer``, ``context(features)``, ``step_inputs(g, e)``, ``head_input(out)``, and the two hooks
    below, whose defaults are EAGLE's."""

    def step_output(self, out: torch.Tensor) -> torch.Tensor:
        """The state a step hands on to the head and the next step (default: the layer output)."""
        return out

    def next_inputs(
        self, out: torch.Tensor, e: torch.Tensor, logits: torch.Tensor, truth: torch.Tensor, head: VocabHead
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training: inputs of unrolled step s+1 from step s's output out [B, T, H] and the embedding e
        [B, T, H] of the token step s predicted (the true one, teacher forcing); ``logits`` [B, T, Vd]
        and ``truth`` [B, T] (that token's id) serve drafters whose inputs depend on the ranking."""
        return self.step_inputs(out, e)


class Eagle1Net(StepNet):
    """z = W_fc [e; f] + b, then one decoder layer without input norm (EAGLE's layout)."""

    kind = "eagle"

    def __init__(self, shape: LayerShape, fc_bias: bool = True):
        super().__init__()
        self.shape = shape
        self.fc = nn.Linear(2 * shape.hidden, shape.hidden, bias=fc_bias)
        self.layers = nn.ModuleList([DraftLayer(shape, input_norm=False)])
        self.feature_layers = ("final",)

    @property
    def layer(self) -> DraftLayer:
        return self.layers[0]

    def context(self, features: dict) -> torch.Tensor:
        """Per-position context vector from target features {key: [..., H]} -> [..., H]."""
        return features["final"]

    def step_inputs(self, g: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(attention input, residual) of entries with context g [..., H] and token embeddings e."""
        z = self.fc(torch.cat((e, g.to(e.dtype)), dim=-1))
        return z, z

    def head_input(self, out: torch.Tensor) -> torch.Tensor:
        return out

    def architecture(self) -> dict:
        return {"layer": self.shape.to_dict(), "fc_bias": self.fc.bias is not None}

    @classmethod
    def from_architecture(cls, arch: dict) -> Eagle1Net:
        return cls(LayerShape(**arch["layer"]), fc_bias=bool(arch.get("fc_bias", True)))


class Eagle3Net(StepNet):
    """g = W_fc [l; m; h]; layer over [norm(e); norm(g)] with residual g; output norm (EAGLE-3's layout).

    ``fc_norm`` and ``norm_output`` are EAGLE-3.1's two changes (module docstring); both off is
    EAGLE-3 exactly, and the architecture dict then carries neither key. ``norm_before_residual``
    (a speculators-format option, read from such checkpoints) makes the residual RMSNorm(g) instead
    of g; off, the architecture dict does not carry it."""

    def __init__(
        self,
        shape: LayerShape,
        feature_layers: tuple[int, ...],
        *,
        fc_norm: bool = False,
        norm_output: bool = False,
        norm_before_residual: bool = False,
    ):
        super().__init__()
        if shape.attn_in != 2 * shape.hidden:
            raise ValueError("EAGLE-3's layer attends over [embedding; hidden]: attn_in must be 2·hidden")
        self.shape = shape
        self.feature_layers = tuple(int(i) for i in feature_layers)
        self.norm_output = bool(norm_output)
        self.norm_before_residual = bool(norm_before_residual)
        self.kind = "eagle3.1" if fc_norm or norm_output else "eagle3"
        if fc_norm:  # one RMSNorm per fused target layer, before the fusion projection
            self.fc_norm = nn.ModuleList([RMSNorm(shape.hidden, shape.eps) for _ in self.feature_layers])
        self.fc = nn.Linear(len(self.feature_layers) * shape.hidden, shape.hidden, bias=False)
        self.midlayer = DraftLayer(shape, input_norm=True, hidden_norm=True)
        self.norm = RMSNorm(shape.hidden, shape.eps)

    @property
    def layer(self) -> DraftLayer:
        return self.midlayer

    def context(self, features: dict) -> torch.Tensor:
        streams = [features[i].to(self.fc.weight.dtype) for i in self.feature_layers]  # each [..., H]
        if hasattr(self, "fc_norm"):
            streams = [norm(x) for norm, x in zip(self.fc_norm, streams)]
        return self.fc(torch.cat(streams, dim=-1))

    def step_inputs(self, g: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        g = g.to(e.dtype)
        normed = self.midlayer.hidden_norm(g)
        return torch.cat((self.midlayer.input_layernorm(e), normed), dim=-1), normed if self.norm_before_residual else g

    def step_output(self, out: torch.Tensor) -> torch.Tensor:
        """The state a step hands on (to the head and to the next step): o_t, or RMSNorm(o_t) (3.1)."""
        return self.norm(out) if self.norm_output else out

    def head_input(self, out: torch.Tensor) -> torch.Tensor:
        return out if self.norm_output else self.norm(out)

    def architecture(self) -> dict:
        arch = {"layer": self.shape.to_dict(), "feature_layers": list(self.feature_layers)}
        if self.kind == "eagle3.1":  # added only when set: an EAGLE-3 checkpoint's architecture is unchanged
            arch.update(fc_norm=hasattr(self, "fc_norm"), norm_output=self.norm_output)
        if self.norm_before_residual:
            arch["norm_before_residual"] = True
        return arch

    @classmethod
    def from_architecture(cls, arch: dict) -> Eagle3Net:
        return cls(
            LayerShape(**arch["layer"]),
            tuple(arch["feature_layers"]),
            fc_norm=bool(arch.get("fc_norm")),
            norm_output=bool(arch.get("norm_output")),
            norm_before_residual=bool(arch.get("norm_before_residual")),
        )


class FeatureDrafter(BaseDrafter):
    """EAGLE / EAGLE-3 drafting: chains, static trees and dynamic (EAGLE-2) trees."""

    drafts_ahead = True  # propose_ahead: nested speculation
    predicts_experts = True  # from its output at a node: expert-aware trees

    confident = True  # proposes with probabilities: confidence-reading schedules can cut its chain

    def __init__(self, net: Eagle1Net | Eagle3Net, target_model, head: VocabHead):
        self.name = net.kind
        self.net = net.eval()
        self.feature_layers = net.feature_layers
        self.target_model = target_model
        self.head = head
        param = next(net.parameters())
        self.dtype, self.device = param.dtype, param.device
        self.buffer = FeatureBuffer()  # fused context vectors g, one row per target position
        self.cache = None
        self.committed = 0  # context entries in the cache (computed from true features)
        # expert-aware trees on an MoE target: the target's `RoutingLog`, set by the engine; the predictor reads
        # the drafter's output at a node's position (≈ the target's final feature there), in the target's space
        self.expert_router = None
        self.feature_size = int(net.shape.hidden)
        self._last_output = None  # output of the last committed entry (the root's distribution comes from it)

    # ------------------------------------------------------------------ entries
    def _context_entries(
        self, tokens: torch.Tensor, start: int, stop: int, queries: tuple | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Feed entries start..stop−1 (context g_t with token x_{t+1}); tokens [L]. ``queries`` =
        (a [n, A], r [n, H], positions [n], block [n, n] bool): draft queries fed in the same forward,
        each seeing every context entry and, among the queries, where ``block`` allows; they are
        dropped from the cache afterwards. Returns (entry outputs [m, H], query outputs [n, H] | None)."""
        g = self.buffer.get("g", start, stop)[None]  # [1, m, H]
        e = embed(self.target_model, tokens[start + 1 : stop + 1])[None].to(self.dtype)  # [1, m, H]
        a, r = self.net.step_inputs(g, e)
        m, before = stop - start, self.cache.length
        positions = torch.arange(start, stop, device=self.device)
        block = None  # causal over the entries
        if queries is not None:
            qa, qr, qpos, qblock = queries
            n = qpos.numel()
            a, r = torch.cat((a, qa[None].to(a.dtype)), dim=1), torch.cat((r, qr[None].to(r.dtype)), dim=1)
            positions = torch.cat((positions, qpos.to(self.device)))
            block = torch.zeros(m + n, m + n, dtype=torch.bool, device=self.device)
            block[:m, :m] = causal_mask(m, self.device)
            block[m:, :m] = True
            block[m:, m:] = qblock.to(self.device)
        new = a.shape[1]
        mask = None if new == 1 else cache_mask(before, new, block, device=self.device)
        out = self.net.step_output(self.net.layer.forward_cached(a, r, positions, self.cache, mask)[0])  # [m + n, H]
        self.cache.truncate(before + m)
        return out[:m], (out[m:] if queries is not None else None)

    @torch.inference_mode()
    def start(self, prompt: torch.Tensor, capacity: int, features: dict | None = None) -> None:
        g = self.net.context({k: v[0] for k, v in features.items()})  # [T, H]
        self.buffer.reset({"g": g[None]}, capacity)
        self._last_output = None
        self.cache = new_cache(self.net.shape, capacity + 8, self.dtype, self.device)
        length = prompt.shape[1]
        if length >= 2:  # every entry whose token is known already: 0..T−2
            self._context_entries(prompt[0], 0, length - 1)
        self.committed = self.cache.length

    def _commit_verified(self, tokens: torch.Tensor, stop: int) -> torch.Tensor:
        """Context entries up to entry stop−1 (true features); returns the output of entry stop−1 [H]."""
        self.cache.truncate(self.committed)
        if self.committed < stop:
            self._last_output = self._context_entries(tokens, self.committed, stop)[0][-1]
            self.committed = self.cache.length
        return self._last_output

    def _node_inputs(
        self, growth: tree_growth.Growth, nodes: list[int], outputs: dict
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(a [1, n, A], r [1, n, H]) of draft nodes: their parents' outputs with their own tokens."""
        g = torch.stack([outputs[growth.parents[n]] for n in nodes])[None]  # parents' outputs [1, n, H]
        ids = torch.tensor([growth.tokens[n] for n in nodes], device=self.device)
        return self.net.step_inputs(g, embed(self.target_model, ids)[None].to(self.dtype))

    def _feeder(self, length: int, outputs: dict):
        """feed(growth, nodes) -> outputs [n, H]: one layer forward over a block of draft nodes (after
        those fed before), attending the context and their ancestors; ``outputs`` collects them."""
        fed: list[int] = []

        def feed(growth: tree_growth.Growth, nodes: list[int]) -> torch.Tensor:
            block, _ = tree_growth.block_mask(growth, fed, nodes)
            a, r = self._node_inputs(growth, nodes, outputs)
            positions = torch.tensor([length - 2 + growth.depths[n] for n in nodes], device=self.device)
            mask = cache_mask(self.cache.length, len(nodes), block, prior=len(fed), device=self.device)
            out = self.net.step_output(self.net.layer.forward_cached(a, r, positions, self.cache, mask)[0])  # [n, H]
            outputs.update(zip(nodes, out))
            fed.extend(nodes)
            return out

        return feed

    @torch.inference_mode()
    def propose(
        self,
        context: torch.Tensor,
        shape: Shape,
        sampling: SamplingParams,
        generator: torch.Generator | None,
        keep_drafting=None,
    ) -> Proposal:
        root = self._commit_verified(context[0], context.shape[1] - 1)  # output of entry L−2
        return self._grow(root, context, shape, sampling, generator, keep_drafting)

    @torch.inference_mode()
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

        Their features are unknown (the target is computing them), so their entries take the
        previous entry's output in place of the feature, exactly as draft nodes do: entry t
        (t = verified−1 .. L'−2) fuses output(t−1) with x_{t+1}. Afterwards the cache holds the
        committed (true-feature) entries only, as after `observe`.
        """
        tokens = context[0]
        out = self._commit_verified(tokens, verified - 1)  # output of entry verified−2
        for t in range(verified - 1, context.shape[1] - 1):
            a, r = self.net.step_inputs(
                out[None, None], embed(self.target_model, tokens[t + 1 : t + 2])[None].to(self.dtype)
            )
            out = self.net.step_output(
                self.net.layer.forward_cached(a, r, torch.tensor([t], device=self.device), self.cache, None)[0]
            )[-1]
        proposal = self._grow(out, context, shape, sampling, generator)
        self.cache.truncate(self.committed)
        return proposal

    def _grow(
        self,
        root: torch.Tensor,
        context: torch.Tensor,
        shape: Shape,
        sampling: SamplingParams,
        generator: torch.Generator | None,
        keep_drafting=None,
    ) -> Proposal:
        """Draft nodes continuing context [1, L]; root [H] is the output of entry L−2."""
        length = context.shape[1]
        outputs = {-1: root}
        feed = self._feeder(length, outputs)

        def expand(growth: tree_growth.Growth, nodes: list[int]) -> torch.Tensor:
            return self.head.logits(self.net.head_input(feed(growth, nodes)))

        def experts(growth: tree_growth.Growth) -> tree_growth.NodeExperts:
            """The target's routers on the drafter's output at every node's position (one more drafter step
            for the nodes growth never fed)."""
            unfed = [n for n in range(len(growth.tokens)) if n not in outputs]
            if unfed:
                feed(growth, unfed)
            features = self.net.head_input(torch.stack([outputs[n] for n in [-1, *range(len(growth.tokens))]]))
            return tree_growth.node_experts(self.expert_router.predict(features), draft_steps=1 if unfed else 0)

        root_logits = self.head.logits(self.net.head_input(root))
        return tree_growth.grow_proposal(
            root_logits,
            shape,
            sampling,
            generator,
            expand,
            context.device,
            keep_drafting=keep_drafting,
            experts=experts if self.expert_router is not None else None,
        )[0]

    @torch.inference_mode()
    def observe(self, outcome: RoundOutcome) -> None:
        """Drop the draft entries; keep the true features of the kept positions for the next round."""
        self.cache.truncate(self.committed)
        if outcome.features is not None:
            g = self.net.context({k: v[0] for k, v in outcome.features.items()})
            self.buffer.append({"g": g[None]})


# ----------------------------------------------------------------------------- registry entries


class _FeatureType(TrainedType):
    """What EAGLE and EAGLE-3 share: the drafter, the objective, the weights files of the layout."""

    defaults = {"intermediate": 768}  # sized so that the four SmolLM2-135M drafters stay under 30 MB in bf16
    objective = "specbench.training.objectives:eagle_objective"
    drafter_class = FeatureDrafter  # how the network drafts (parallel-tree: its one-forward trees)

    def wrap(self, net, target, draft_vocab=None, head_weights=None) -> FeatureDrafter:
        head = VocabHead(
            target.model.get_output_embeddings(),
            target.vocab_size,
            draft_vocab,
            weight=None if head_weights is None else head_weights[0],
        )
        return self.drafter_class(net, target.model, head)

    def feature_layers(self, architecture: dict) -> tuple:
        return tuple(architecture.get("feature_layers") or ("final",))

    @staticmethod
    def _start_export(folder: Path, net) -> tuple[Path, dict]:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        return folder, {k: v.float() for k, v in net.state_dict().items()}

    @staticmethod
    def _read(folder: Path, target, attn_factor: int, what: str) -> tuple[dict, LayerShape, dict]:
        config = published.read_config(folder / "config.json")
        shape = published.layer_shape(config, attn_factor)
        published.check_shapes(
            f"{what} checkpoint {folder}", shape.hidden, int(config.get("vocab_size", target.vocab_size)), target
        )
        tensors = published.read_tensors(folder, EAGLE_WEIGHTS)
        tensors.pop("embed_tokens.weight", None)
        return config, shape, tensors


class EagleType(_FeatureType):
    name = "eagle"
    objective_args = {"feature_weight": 1.0, "token_weight": 0.1}
    unrolled_steps = 1
    published = "EAGLE"

    def architecture(self, target_config, **options) -> dict:
        opts = self.options(**options)
        return {
            "layer": LayerShape.for_target(target_config, intermediate=opts["intermediate"]).to_dict(),
            "fc_bias": True,
        }

    def new_net(self, architecture: dict, *, zero_init: bool = True) -> Eagle1Net:
        return Eagle1Net.from_architecture(architecture)

    def recognizes(self, config: dict, folder: Path) -> bool:
        return (
            "hidden_size" in config
            and "draft_vocab_size" not in config
            and "medusa_num_heads" not in config
            and any((folder / n).is_file() for n in EAGLE_WEIGHTS)
        )

    def load_published(self, folder: Path, target):
        folder = Path(folder)
        _, shape, tensors = self._read(folder, target, 1, "EAGLE")
        where = f"EAGLE checkpoint {folder}"
        net = checked_module(lambda: Eagle1Net(shape, fc_bias="fc.bias" in tensors), where, tensors)
        published.load_into(net, tensors, where)
        return net, None, None

    def export_published(
        self, folder: Path, net: Eagle1Net, target, draft_vocab=None, *, with_embeddings: bool = False
    ) -> Path:
        """Write the net in EAGLE's layout (config.json + pytorch_model.bin); EAGLE's own loader is
        strict and expects the embeddings too (``with_embeddings``)."""
        folder, tensors = self._start_export(folder, net)
        if with_embeddings:
            tensors["embed_tokens.weight"] = target.model.get_input_embeddings().weight.detach().float().clone()
        published.write_tensors(folder / "pytorch_model.bin", tensors)
        write_json(
            folder / "config.json",
            published.llama_config(net.shape, int(target.vocab_size), {"bias": net.fc.bias is not None}),
            what="checkpoint file",
        )
        return folder


class Eagle3Type(_FeatureType):
    name = "eagle3"
    objective_args = {"feature_weight": 0.0, "token_weight": 1.0}
    unrolled_steps = 3
    published = "EAGLE-3"

    def architecture(self, target_config, **options) -> dict:
        opts = self.options(**options)
        layers = opts.get("feature_layers") or eagle3_layers(int(target_config.num_hidden_layers))
        return {
            "layer": LayerShape.for_target(
                target_config, intermediate=opts["intermediate"], attn_in_factor=2
            ).to_dict(),
            "feature_layers": list(layers),
        }

    def new_net(self, architecture: dict, *, zero_init: bool = True) -> Eagle3Net:
        return Eagle3Net.from_architecture(architecture)

    def recognizes(self, config: dict, folder: Path) -> bool:
        return "draft_vocab_size" in config and "medusa_num_heads" not in config

    def load_published(self, folder: Path, target):
        """The fused target layers are EAGLE-3's convention: outputs of layers 2, N/2 and N−3."""
        folder = Path(folder)
        config, shape, tensors = self._read(folder, target, 2, "EAGLE-3")
        head = tensors.pop("lm_head.weight", None)
        d2t = tensors.pop("d2t", None)
        tensors.pop("t2d", None)  # implied by d2t
        size = int(config["draft_vocab_size"])
        ids = torch.arange(size) + (d2t.long() if d2t is not None else 0)
        if int(ids.max()) >= target.vocab_size:
            raise SpecbenchError(
                f"EAGLE-3 checkpoint {folder}: draft vocabulary reaches id {int(ids.max())}, beyond "
                f"target '{target.name}' ({target.vocab_size} tokens)"
            )
        layers = eagle3_layers(int(target.model.config.num_hidden_layers))
        where = f"EAGLE-3 checkpoint {folder}"
        net = checked_module(lambda: Eagle3Net(shape, layers), where, tensors)
        published.load_into(net, tensors, where)
        draft_vocab = None if size == target.vocab_size and bool((ids == torch.arange(size)).all()) else ids
        own = None
        if head is not None:
            lm = target.model.get_output_embeddings().weight.detach().float().cpu()
            if not torch.allclose(head.float(), lm.index_select(0, ids), atol=1e-3):
                own = [head.float()]
        return net, draft_vocab, own

    def export_published(self, folder: Path, net: Eagle3Net, target, draft_vocab=None) -> Path:
        """Write the net in EAGLE-3's layout, with the (target) head rows and d2t / t2d maps."""
        folder, tensors = self._start_export(folder, net)
        vocab = int(target.vocab_size)
        ids = torch.arange(vocab) if draft_vocab is None else draft_vocab.long().cpu()
        lm = target.model.get_output_embeddings().weight.detach().float().cpu()
        tensors["lm_head.weight"] = lm.index_select(0, ids).clone()
        tensors["d2t"] = ids - torch.arange(ids.numel())
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[ids] = True
        tensors["t2d"] = t2d
        published.write_tensors(folder / "pytorch_model.bin", tensors)
        write_json(
            folder / "config.json",
            published.llama_config(net.shape, vocab, {"draft_vocab_size": int(ids.numel())}),
            what="checkpoint file",
        )
        return folder


class Eagle31Type(Eagle3Type):
    """EAGLE-3 with EAGLE-3.1's two normalisations (``fc_norm``, ``norm_output``); no published layout yet."""

    name = "eagle3.1"
    published = None

    def architecture(self, target_config, **options) -> dict:
        return {**super().architecture(target_config, **options), "fc_norm": True, "norm_output": True}

    def recognizes(self, config: dict, folder: Path) -> bool:
        return False

    load_published = TrainedType.load_published
    export_published = TrainedType.export_published

"""Building blocks shared by the trained drafters (Medusa, EAGLE, EAGLE-3, MTP).

* `RMSNorm`, `SwiGLU`, `DraftAttention`, `DraftLayer` — one Llama-style decoder layer whose
  attention input ``a`` and residual stream ``r`` are given separately:

      y = r + Attn(a),    out = y + MLP(RMSNorm(y))

  so EAGLE (a = r = fc output, no input norm), EAGLE-3 (a = [norm(e); norm(g)], r = g) and
  MTP (a = RMSNorm(r)) are the same module. Attention runs either over the layer's own
  `StaticKVCache` with an explicit boolean mask (inference: context entries plus a tree block)
  or over a whole training sequence, optionally with *training-time test* extra keys: the
  keys of the chain's own earlier unrolled steps, one per step, seen only by that chain.
* `VocabHead` — logits from a drafter hidden state through the target's LM head, shared by
  reference, optionally restricted to a draft vocabulary (EAGLE-3's reduced vocabulary); the
  restricted rows are gathered once in memory, never written to a checkpoint.
* `FeatureBuffer` — the target features a drafter has received so far, by position.

Shapes: B batch, T new positions, S attended positions, H hidden, A attention-input width,
h/k query/key heads, D head dim, V target vocabulary, Vd draft vocabulary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from specbench.engine.kv_cache import StaticKVCache


@dataclass(frozen=True)
class LayerShape:
    """Architecture of one drafter decoder layer."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    attn_in: int  # width of the attention input: hidden (EAGLE, MTP) or 2·hidden (EAGLE-3)
    rope_theta: float = 10000.0
    eps: float = 1e-5

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def for_target(cls, cfg, *, intermediate: int | None = None, attn_in_factor: int = 1) -> LayerShape:
        """A layer shaped like the target's (heads, head dim, RoPE θ), with its own MLP width."""
        heads = int(cfg.num_attention_heads)
        kv_heads = int(getattr(cfg, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // heads)
        theta = getattr(cfg, "rope_theta", None)
        if theta is None:
            theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
        return cls(
            hidden=int(cfg.hidden_size),
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=int(intermediate or cfg.intermediate_size),
            attn_in=attn_in_factor * int(cfg.hidden_size),
            rope_theta=float(theta),
            eps=float(getattr(cfg, "rms_norm_eps", 1e-5)),
        )


class RMSNorm(nn.Module):
    """x · w / sqrt(mean(x²) + ε), computed in float32."""

    def __init__(self, size: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class SwiGLU(nn.Module):
    """down(SiLU(gate x) ⊙ up x)."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rope(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [..., T, D] of rotary embeddings at integer positions [..., T]."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    angles = positions.float()[..., None] * inv_freq  # [..., T, D/2]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, h, T, D] rotated by RoPE: x cos + rotate_half(x) sin."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class DraftAttention(nn.Module):
    """softmax(q kᵀ / sqrt(D) + mask) v with grouped key/value heads and RoPE; no biases."""

    def __init__(self, shape: LayerShape):
        super().__init__()
        self.shape = shape
        self.q_proj = nn.Linear(shape.attn_in, shape.heads * shape.head_dim, bias=False)
        self.k_proj = nn.Linear(shape.attn_in, shape.kv_heads * shape.head_dim, bias=False)
        self.v_proj = nn.Linear(shape.attn_in, shape.kv_heads * shape.head_dim, bias=False)
        self.o_proj = nn.Linear(shape.heads * shape.head_dim, shape.hidden, bias=False)

    def project(self, a: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """a [B, T, A], positions [T] -> q [B, h, T, D], k, v [B, k, T, D] (q and k rotated)."""
        s = self.shape
        bsz, new, _ = a.shape
        q = self.q_proj(a).view(bsz, new, s.heads, s.head_dim).transpose(1, 2)
        k = self.k_proj(a).view(bsz, new, s.kv_heads, s.head_dim).transpose(1, 2)
        v = self.v_proj(a).view(bsz, new, s.kv_heads, s.head_dim).transpose(1, 2)
        cos, sin = rope(positions, s.head_dim, s.rope_theta, q.dtype)  # [T, D]
        return rotate(q, cos, sin), rotate(k, cos, sin), v

    def output(self, out: torch.Tensor) -> torch.Tensor:
        """[B, h, T, D] -> [B, T, H]."""
        bsz, _, new, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(bsz, new, self.shape.heads * self.shape.head_dim))

    def _groups(self, x: torch.Tensor) -> torch.Tensor:
        """[B, k, T, D] -> [B, h, T, D] (each key head serves h / k query heads)."""
        repeat = self.shape.heads // self.shape.kv_heads
        return x if repeat == 1 else x.repeat_interleave(repeat, dim=1)

    def cached(
        self, a: torch.Tensor, positions: torch.Tensor, cache: StaticKVCache, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Inference: append the new k, v to ``cache`` and attend over it. mask [T, S] bool or None (all)."""
        q, k, v = self.project(a, positions)
        cache.reserve(a.shape[1])
        keys, values = cache.write(0, k.to(cache.keys.dtype), v.to(cache.values.dtype))  # [B, k, S, D]
        cache.advance(a.shape[1])
        out = F.scaled_dot_product_attention(
            q,
            self._groups(keys).to(q.dtype),
            self._groups(values).to(q.dtype),
            attn_mask=None if mask is None else mask.to(q.device),
            scale=self.shape.head_dim**-0.5,
        )
        return self.output(out)

    def unrolled(
        self,
        q: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        mask: torch.Tensor,
        own: list[tuple[torch.Tensor, torch.Tensor]] = (),
    ) -> torch.Tensor:
        """Training over whole sequences: q [B, h, T, D] attends keys/values [B, k, T, D] where
        mask [T, T] allows, plus, for training-time test, each chain's own earlier steps:
        ``own`` lists (k_j, v_j) [B, k, T, D], row t of which only query row t sees."""
        scale = self.shape.head_dim**-0.5
        keys, values = self._groups(keys), self._groups(values)
        scores = torch.matmul(q, keys.transpose(-1, -2)) * scale  # [B, h, T, T]
        scores = scores.masked_fill(~mask.to(q.device), float("-inf"))
        extra = [((q * self._groups(k)).sum(-1, keepdim=True) * scale) for k, _ in own]  # each [B, h, T, 1]
        weights = torch.cat([scores, *extra], dim=-1).float().softmax(-1).to(q.dtype)
        t = keys.shape[2]
        out = torch.matmul(weights[..., :t], values)
        for j, (_, v) in enumerate(own):
            out = out + weights[..., t + j : t + j + 1] * self._groups(v)
        return self.output(out)


class DraftLayer(nn.Module):
    """y = r + Attn(a); out = y + MLP(RMSNorm(y)). The norms that build ``a`` belong to the caller's
    architecture and live here only so that published key names are kept (``input_layernorm``,
    EAGLE-3's ``hidden_norm``)."""

    def __init__(self, shape: LayerShape, *, input_norm: bool = True, hidden_norm: bool = False):
        super().__init__()
        self.shape = shape
        if input_norm:
            self.input_layernorm = RMSNorm(shape.hidden, shape.eps)
        if hidden_norm:
            self.hidden_norm = RMSNorm(shape.hidden, shape.eps)
        self.self_attn = DraftAttention(shape)
        self.post_attention_layernorm = RMSNorm(shape.hidden, shape.eps)
        self.mlp = SwiGLU(shape.hidden, shape.intermediate)

    def finish(self, residual: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        y = residual + attended
        return y + self.mlp(self.post_attention_layernorm(y))

    def forward_cached(
        self,
        a: torch.Tensor,
        residual: torch.Tensor,
        positions: torch.Tensor,
        cache: StaticKVCache,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """Inference step over T new entries: a [B, T, A], residual [B, T, H] -> [B, T, H]."""
        return self.finish(residual, self.self_attn.cached(a, positions, cache, mask))


def causal_mask(length: int, device=None) -> torch.Tensor:
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def new_cache(shape: LayerShape, capacity: int, dtype: torch.dtype, device) -> StaticKVCache:
    """A one-layer KV cache for a drafter layer."""
    return StaticKVCache(1, 1, shape.kv_heads, shape.head_dim, capacity, dtype, device)


def cache_mask(cache_length: int, new: int, block: torch.Tensor | None, prior: int = 0, device=None) -> torch.Tensor:
    """[new, cache_length + new] bool: everything before the block is visible; inside the block
    (the last ``prior`` cached entries and the new ones) ``block`` [new, prior + new] decides,
    causal when None."""
    mask = torch.ones(new, cache_length + new, dtype=torch.bool, device=device)
    if block is None:
        block = torch.ones(new, prior + new, dtype=torch.bool, device=device)
        block[:, prior:] = causal_mask(new, device)
    mask[:, cache_length - prior :] = block.to(device)
    return mask


# ----------------------------------------------------------------------------- target pieces


class VocabHead(nn.Module):
    """logits = W h over the target's ids, W the target's LM head (shared, frozen).

    With a draft vocabulary (ids [Vd]) only those rows are scored: `sub_logits` gives [.., Vd]
    (training, and EAGLE-3's reduced head), `logits` scatters them into [.., V] with −inf
    elsewhere (a distribution with no mass outside the draft vocabulary, so sampling and
    verification stay exact). A published checkpoint with its own head passes ``weight``.
    """

    def __init__(
        self,
        lm_head: nn.Module | None,
        vocab_size: int,
        draft_vocab: torch.Tensor | None = None,
        weight: torch.Tensor | None = None,
    ):
        super().__init__()
        self.vocab_size = int(vocab_size)
        if weight is None:
            weight = lm_head.weight  # [V, H], by reference
            if draft_vocab is not None:
                weight = weight.detach().index_select(0, draft_vocab.to(weight.device))  # [Vd, H], in memory only
        self.register_buffer("weight", weight.detach(), persistent=False)
        self.register_buffer("ids", None if draft_vocab is None else draft_vocab.long(), persistent=False)

    @property
    def draft_size(self) -> int:
        return int(self.weight.shape[0])

    def sub_logits(self, h: torch.Tensor) -> torch.Tensor:
        """h [..., H] -> [..., Vd] float32."""
        return F.linear(h, self.weight.to(h.dtype)).float()

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """h [..., H] -> [..., V] float32 (−inf outside the draft vocabulary)."""
        sub = self.sub_logits(h)
        if self.ids is None:
            return sub
        full = sub.new_full(sub.shape[:-1] + (self.vocab_size,), float("-inf"))
        return full.index_copy_(-1, self.ids.to(sub.device), sub)


class FeatureBuffer:
    """Target features by position: key -> [capacity, H] rows, ``length`` of them filled."""

    def __init__(self):
        self.rows: dict = {}
        self.length = 0

    def reset(self, features: dict, capacity: int) -> None:
        """Start from the prompt's features {key: [B=1, T, H]}."""
        self.rows, self.length = {}, 0
        for key, value in features.items():
            self.rows[key] = value.new_zeros(max(capacity, value.shape[1]), value.shape[-1])
        self.append(features)

    def append(self, features: dict) -> None:
        """Add rows {key: [1, n, H]} after the filled ones."""
        n = next(iter(features.values())).shape[1]
        for key, value in features.items():
            buf = self.rows[key]
            if self.length + n > buf.shape[0]:
                grown = buf.new_zeros(max(2 * buf.shape[0], self.length + n), buf.shape[1])
                grown[: self.length] = buf[: self.length]
                self.rows[key] = buf = grown
            buf[self.length : self.length + n] = value[0]
        self.length += n

    def get(self, key, start: int, stop: int) -> torch.Tensor:
        return self.rows[key][start:stop]


def embed(target_model, ids: torch.Tensor) -> torch.Tensor:
    """The target's input embeddings of ids [...] -> [..., H] (shared, never copied)."""
    return target_model.get_input_embeddings()(ids)

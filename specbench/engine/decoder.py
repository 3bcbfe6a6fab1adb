"""Running a causal LM step by step with a KV cache the engine controls.

`NativeDecoder` drives the Llama-family models of transformers (llama, qwen2, qwen3, mistral)
layer by layer over a `StaticKVCache`: one code path serves prefill, single-token decode,
chain verification and tree verification (a tree is a set of nodes whose attention mask is
their ancestor relation and whose positions are prefix length + depth). `HFDecoder` is the
fallback for any other `AutoModelForCausalLM`; it runs chains only.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from specbench.engine.kv_cache import StaticKVCache
from specbench.engine.weight_layout import prefer_column_major
from specbench.errors import SpecbenchError
from specbench.kernels._triton import interpreter_enabled, triton_available
from specbench.kernels.tree_attention import tree_attention

NATIVE_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral")
COMPILED_MAX_TOKENS = 64  # decode and verify shapes go through the compiled graph; prefills stay eager


@dataclass
class DecoderOutput:
    logits: torch.Tensor | None  # [B, T', V] float32 (T' = T, or 1 with logits="last")
    hidden: torch.Tensor  # [B, T, H] final hidden state (after the last norm), the LM head's input
    layer_hidden: dict[int, torch.Tensor] = field(default_factory=dict)  # i -> [B, T, H] output of layer i


@dataclass
class TreeLayout:
    """How T new tokens attend when they are tree nodes rather than a causal chain.

    The last ``prior`` cached positions and the T new tokens form the tree block; everything
    before it is the shared prefix, which every new token sees.

    mask: [T, prior + T] bool, mask[i, j] = new token i may attend to block position j (its
        ancestors and itself).
    offsets: [T] long, new token i sits at position (cache length − prior) + offsets[i], i.e.
        prefix length + depth below the block's first position.
    """

    mask: torch.Tensor
    offsets: torch.Tensor
    prior: int = 0



def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class NativeDecoder:
    """Llama-family forward over a static KV cache.

    The attention of T new tokens over S = length + T cached positions is
    softmax(q kᵀ / sqrt(d) + mask) v with q, k rotated by RoPE at their positions; the mask lets
    every new token see the whole prefix, and among the new tokens either the causal order
    (chain) or the ancestor relation (tree).
    """

    supports_trees = True

    def __init__(self, model, kernels: str = "auto", compile: bool = False):
        cfg = model.config
        if cfg.model_type not in NATIVE_MODEL_TYPES:
            raise SpecbenchError(f"no native decoder for model type '{cfg.model_type}'")
        self.model = model
        self.body = model.model
        self.layers = list(self.body.layers)
        self.num_heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.scale = self.layers[0].self_attn.scaling
        window = getattr(cfg, "sliding_window", None)
        self.window = window if (window and getattr(cfg, "use_sliding_window", True)) else None
        self.cache: StaticKVCache | None = None
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        if self.device.type == "cpu":  # few-token GEMMs stream column-major weights once (weight_layout)
            prefer_column_major(model)
        self.use_kernel = _use_attention_kernel(kernels, self.device)
        self._compiled = None
        if compile:
            # Static shapes for every step of T tokens: attention spans the whole preallocated cache
            # under a mask and the cache is written by index, so one graph per T serves all steps
            # (and CUDA graphs can replay it: mode "reduce-overhead" on GPUs).
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            self._compiled = torch.compile(self._layers, mode=mode, dynamic=False)

    # ---------------------------------------------------------------- cache control
    def reset(self, batch_size: int, capacity: int) -> None:
        if self.cache is None or self.cache.keys.shape[1] != batch_size or self.cache.capacity < capacity:
            self.cache = StaticKVCache(len(self.layers), batch_size, self.kv_heads, self.head_dim, capacity,
                                       self.dtype, self.device)
        self.cache.length = 0

    @property
    def length(self) -> int:
        return self.cache.length

    def truncate(self, length: int) -> None:
        self.cache.truncate(length)

    def keep(self, start: int, offsets: torch.Tensor) -> None:
        self.cache.keep(start, offsets)

    # ---------------------------------------------------------------- forward
    def _mask(self, new: int, tree: TreeLayout | None) -> torch.Tensor | None:
        """Boolean attention mask [T, S] (True = attend), or None when everything is visible."""
        start = self.cache.length
        total = start + new
        if tree is None and new == 1 and not (self.window and total > self.window):
            return None
        mask = torch.ones(new, total, dtype=torch.bool, device=self.device)
        if tree is not None:
            mask[:, start - tree.prior:] = tree.mask.to(self.device)
        else:
            mask[:, start:] = torch.ones(new, new, dtype=torch.bool, device=self.device).tril()
        if self.window and total > self.window:
            pos_q = self._positions(new, tree)[0]  # [T]
            pos_k = torch.arange(total, device=self.device)
            mask &= (pos_q[:, None] - pos_k[None, :]) < self.window
        return mask

    def _positions(self, new: int, tree: TreeLayout | None) -> torch.Tensor:
        start = self.cache.length - (tree.prior if tree is not None else 0)
        offsets = tree.offsets.to(self.device) if tree is not None else torch.arange(new, device=self.device)
        return (start + offsets)[None, :]  # [1, T]

    def _attention(self, layer_idx: int, attn, x: torch.Tensor, cos, sin, mask, write_at: torch.Tensor, end: int,
                   kernel: bool) -> torch.Tensor:
        """Self-attention of x [B, T, H]: its keys/values go to cache positions ``write_at`` [T] and
        the queries attend over cache positions [0, end) under ``mask`` [T, end]."""
        bsz, new, _ = x.shape
        q = attn.q_proj(x).view(bsz, new, self.num_heads, self.head_dim)
        k = attn.k_proj(x).view(bsz, new, self.kv_heads, self.head_dim)
        v = attn.v_proj(x).view(bsz, new, self.kv_heads, self.head_dim).transpose(1, 2)  # [B, Hkv, T, D]
        if hasattr(attn, "q_norm"):  # qwen3
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # [B, H, T, D], [B, Hkv, T, D]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, 1, T, D]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        self.cache.write_at(layer_idx, write_at, k, v)
        if kernel:
            out = self._kernel_attention(layer_idx, q, mask)
        else:
            keys, values = self.cache.keys[layer_idx, :, :, :end], self.cache.values[layer_idx, :, :, :end]
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scale,
                                                 enable_gqa=self.kv_heads != self.num_heads)  # [B, H, T, D]
        return attn.o_proj(out.transpose(1, 2).reshape(bsz, new, self.num_heads * self.head_dim))

    def _layers(self, x: torch.Tensor, cos, sin, mask, write_at: torch.Tensor, end: int, kernel: bool,
                hidden_layers: tuple[int, ...]) -> tuple[torch.Tensor, dict]:
        """Every decoder layer over x [B, T, H]; returns the output and the requested layer outputs."""
        layer_hidden = {0: x} if 0 in hidden_layers else {}
        for i, layer in enumerate(self.layers):
            x = x + self._attention(i, layer.self_attn, layer.input_layernorm(x), cos, sin, mask, write_at, end,
                                    kernel)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            if i + 1 in hidden_layers:
                layer_hidden[i + 1] = x
        return x, layer_hidden

    def _kernel_attention(self, layer_idx: int, q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The Triton tree-attention kernel over the whole cache: prefix + [T, T] node mask."""

        start, new = self.cache.length, q.shape[2]
        return tree_attention(q, self.cache.keys[layer_idx], self.cache.values[layer_idx], start,
                              mask[:, start:start + new], self.scale, impl="triton", max_prefix_len=start)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, *, tree: TreeLayout | None = None, logits: str = "all",
                hidden_layers: tuple[int, ...] = ()) -> DecoderOutput:
        """Run input_ids [B, T] after the cached prefix and append them to the cache.

        logits: "all" (every new position), "last" (the final one only) or "none".
        hidden_layers: indices i whose layer output (i = 0: embeddings) is returned too.
        """
        new = input_ids.shape[1]
        self.cache.reserve(new)
        start = self.cache.length
        mask = self._mask(new, tree)
        positions = self._positions(new, tree)
        write_at = torch.arange(start, start + new, device=self.device)
        x = self.body.embed_tokens(input_ids)  # [B, T, H]
        cos, sin = self.body.rotary_emb(x, positions)  # [1, T, D]
        if (self._compiled is not None and start > 0 and new <= COMPILED_MAX_TOKENS and not hidden_layers
                and not self.window):
            # one static shape per T: attend over the whole preallocated cache, the tail masked off
            full = torch.zeros(new, self.cache.capacity, dtype=torch.bool, device=self.device)
            full[:, : start + new] = True if mask is None else mask
            x, layer_hidden = self._compiled(x, cos, sin, full, write_at, self.cache.capacity, False, ())
        else:
            # the kernel covers verification: whole prefix visible, a node mask among the new tokens
            kernel = (self.use_kernel and new > 1 and start > 0 and not self.window
                      and (tree is None or tree.prior == 0))
            x, layer_hidden = self._layers(x, cos, sin, mask, write_at, start + new, kernel, hidden_layers)
        self.cache.advance(new)
        hidden = self.body.norm(x)
        return DecoderOutput(logits=_logits(self.model, hidden, logits), hidden=hidden, layer_hidden=layer_hidden)


def _use_attention_kernel(kernels: str, device: torch.device) -> bool:
    """Whether verification attention runs the Triton kernel: 'auto' = on CUDA when available."""
    if kernels not in ("auto", "triton", "torch"):
        raise SpecbenchError(f"unknown kernels choice '{kernels}' (auto, triton or torch)")
    if kernels == "torch":
        return False

    if kernels == "triton":
        if not triton_available():
            raise SpecbenchError("--kernels triton needs the triton package")
        if device.type != "cuda":

            if not interpreter_enabled():
                raise SpecbenchError("--kernels triton needs a CUDA device (or TRITON_INTERPRET=1 for testing)")
        return True
    return device.type == "cuda" and triton_available()


def _logits(model, hidden: torch.Tensor, which: str) -> torch.Tensor | None:
    if which == "none":
        return None
    if which == "last":
        hidden = hidden[:, -1:]
    return model.lm_head(hidden).float()


class HFDecoder:
    """Any transformers causal LM through its own forward and a DynamicCache (chains only)."""

    supports_trees = False

    def __init__(self, model):
        self.model = model
        self.past = None
        self._length = 0

        params = inspect.signature(model.forward).parameters
        self._cache_kwarg = "cache" if "cache" in params else "past_key_values"
        param = next(model.parameters())
        self.device = param.device

    def reset(self, batch_size: int, capacity: int) -> None:
        from transformers import DynamicCache

        self.past = DynamicCache(config=self.model.config)
        self._length = 0

    @property
    def length(self) -> int:
        return self._length

    def truncate(self, length: int) -> None:
        for layer in self.past.layers:
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                layer.keys = layer.keys[..., :length, :]
                layer.values = layer.values[..., :length, :]
        self._length = length

    def keep(self, start: int, offsets: torch.Tensor) -> None:
        raise SpecbenchError("tree verification needs a natively supported architecture "
                             f"({', '.join(NATIVE_MODEL_TYPES)})")

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, *, tree: TreeLayout | None = None, logits: str = "all",
                hidden_layers: tuple[int, ...] = ()) -> DecoderOutput:
        if tree is not None:
            self.keep(0, torch.empty(0))
        new = input_ids.shape[1]
        positions = torch.arange(self._length, self._length + new, device=self.device)[None, :]
        out = self.model(input_ids=input_ids, position_ids=positions, use_cache=True, output_hidden_states=True,
                         **{self._cache_kwarg: self.past})
        self._length += new
        states = out.hidden_states
        logits_t = None if logits == "none" else (out.logits[:, -1:] if logits == "last" else out.logits).float()
        return DecoderOutput(logits=logits_t, hidden=states[-1],
                             layer_hidden={i: states[i] for i in hidden_layers})


def make_decoder(model, backend: str = "auto", kernels: str = "auto", compile: bool = False):
    """The native decoder when the architecture allows it (or ``backend='hf'`` is forced)."""
    if backend not in ("auto", "native", "hf"):
        raise SpecbenchError(f"unknown decoder backend '{backend}' (auto, native or hf)")
    if backend == "hf" or (backend == "auto" and model.config.model_type not in NATIVE_MODEL_TYPES):
        return HFDecoder(model)
    return NativeDecoder(model, kernels=kernels, compile=compile)

"""Running a causal LM step by step with a KV cache the engine controls.

`NativeDecoder` drives the Llama-family models of transformers (llama, qwen2, qwen3, mistral, and the
MoE qwen3_moe and mixtral, whose sparse blocks run their own forward)
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

from specbench.engine.cpu.weight_layout import (
    REDUCED_PRECISION,
    CpuLayout,
    apply_layout,
    default_layout,
    linear,
    packed_weight,
    single_row_weight,
)
from specbench.engine.kv_cache import StaticKVCache
from specbench.errors import SpecbenchError
from specbench_kernels._triton import interpreter_enabled, triton_available
from specbench_kernels.tree_attention import tree_attention

# the MoE types share the Llama-family attention; their sparse MLP blocks run through their own forward
NATIVE_MODEL_TYPES = ("llama", "qwen2", "qwen3", "mistral", "qwen3_moe", "mixtral")
COMPILED_MAX_TOKENS = 64  # decode and verify shapes go through the compiled graph; prefills stay eager
# 16-bit weights on the CPU with `CpuLayout.upcast_prefill`: a prefill of at least this many tokens into an
# empty cache runs its products in float32 (weights upcast layer by layer); every other forward keeps the
# 16-bit product
UPCAST_PREFILL_MIN_TOKENS = 8


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
        # 16-bit weights on a CPU: attention runs in float32 over a float32 KV cache (torch's 16-bit CPU
        # attention measured ~3x slower than its float32 one; the keys and values are the 16-bit
        # projections' outputs, stored exactly), one query row at a time when verifying
        # (`_row_attention`), so that a verified row is bit for bit a decode step's and greedy speculative
        # output equals target-only output exactly (in 16 bits a last-bit difference is a 2^-8 relative
        # error, enough to flip near-tied argmaxes). The products keep that property in the layouts that
        # `weight_layout` and the probe (`specbench.engine.cpu.layout_probe`) allow for 16 bits.
        self.reduced_cpu = self.device.type == "cpu" and self.dtype in REDUCED_PRECISION
        self.cache_dtype = torch.float32 if self.reduced_cpu else self.dtype
        self.row_attention = self.reduced_cpu and not self.window
        # how the CPU stores and computes the weights (`use_layout`); off the CPU: as loaded, F.linear, and
        # the LM head over every row at once
        self.cpu_layout: CpuLayout | None = None
        self.layout, self.lazy_head, self.upcast_prefill = "as loaded", False, False
        self._forms = {"weight_first": False, "two_row": False}
        self._compiled = None
        if self.device.type == "cpu":
            self.use_layout(default_layout(self.dtype))
        self._row_keys: list | None = None  # set by forward for the rows of one eager verify forward
        # a set (`specbench.engine.warm_up.ShapeLog`) to record the shapes of forwards, LM-head calls and cache
        # allocations in; None: nothing recorded
        self.shape_log: set | None = None
        self.use_kernel = _use_attention_kernel(kernels, self.device)
        if compile:
            self.compile_steps()

    def use_layout(self, layout: CpuLayout) -> None:
        """Store the weights as ``layout`` says (in place) and compute them in its forms from now on.

        CPU, any dtype, with ``layout.lazy_head``: chain verification computes the LM head one row at a
        time, only for the rows whose acceptance is decided (`head`, `verify_chain_rows`: greedy up to the
        first mismatch, sampling up to the first rejection), where a single-row product costs no more per
        row than the few-row one."""
        if self.device.type != "cpu":
            raise SpecbenchError(f"a CPU weight layout on device {self.device}")
        self.cpu_layout = apply_layout(self.model, layout)
        self.layout = layout.describe()
        self.lazy_head = layout.lazy_head
        self.upcast_prefill = self.reduced_cpu and layout.upcast_prefill
        self._forms = {"weight_first": layout.weight_first, "two_row": layout.two_row}
        if self._compiled is not None:  # a fresh graph: the traced one read the old forms
            self._compiled = None
            self.compile_steps()

    def compile_steps(self) -> None:
        """torch.compile the layer loop of decode and verify steps (a no-op when it already is).

        Static shapes for every step of T tokens: attention spans the whole preallocated cache
        under a mask and the cache is written by index, so one graph per T serves all steps
        (and CUDA graphs can replay it: mode "reduce-overhead" on GPUs)."""
        if self._compiled is None:
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            self._compiled = torch.compile(self._layers, mode=mode, dynamic=False)

    # ---------------------------------------------------------------- cache control
    def reset(self, batch_size: int, capacity: int) -> None:
        if self.cache is None or self.cache.keys.shape[1] != batch_size or self.cache.capacity < capacity:
            self.cache = StaticKVCache(
                len(self.layers), batch_size, self.kv_heads, self.head_dim, capacity, self.cache_dtype, self.device
            )
            self._log(("cache", capacity))
        self.cache.length = 0

    def _log(self, shape: tuple) -> None:
        if self.shape_log is not None:
            self.shape_log.add(shape)

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
            mask[:, start - tree.prior :] = tree.mask.to(self.device)
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

    def _linear(self, module: torch.nn.Linear, x: torch.Tensor, wide: bool) -> torch.Tensor:
        """module(x) in the layout's forms; with ``wide`` (a 16-bit prefill on the CPU, `upcast_prefill`)
        computed in float32 from a per-call float32 copy of the weight, rounded back to x's dtype: where
        torch's 16-bit CPU product costs one weight pass per row, the float32 GEMM costs about one for all
        rows, and the copy one more."""
        if not wide:
            return linear(
                x, module.weight, module.bias, single_row_weight(module), packed=packed_weight(module), **self._forms
            )
        bias = None if module.bias is None else module.bias.float()
        return F.linear(x.float(), module.weight.float(), bias).to(x.dtype)

    def _mlp(self, mlp, x: torch.Tensor, wide: bool) -> torch.Tensor:
        """The gated MLP down(act(gate(x)) · up(x)) of the Llama family (an upcycled MoE layer,
        `specbench.models.moe_upcycle`: routed and recorded, then this MLP, every expert's)."""
        if hasattr(mlp, "route"):
            mlp.route(x)
        if not hasattr(mlp, "gate_proj"):  # a sparse MoE block (qwen3_moe, mixtral): its own forward
            return mlp(x)
        gate, up = self._linear(mlp.gate_proj, x, wide), self._linear(mlp.up_proj, x, wide)
        return self._linear(mlp.down_proj, mlp.act_fn(gate) * up, wide)

    def _attention(
        self,
        layer_idx: int,
        attn,
        x: torch.Tensor,
        cos,
        sin,
        mask,
        write_at: torch.Tensor,
        end: int,
        kernel: bool,
        wide: bool = False,
    ) -> torch.Tensor:
        """Self-attention of x [B, T, H]: its keys/values go to cache positions ``write_at`` [T] and
        the queries attend over cache positions [0, end) under ``mask`` [T, end]."""
        bsz, new, _ = x.shape
        q = self._linear(attn.q_proj, x, wide).view(bsz, new, self.num_heads, self.head_dim)
        k = self._linear(attn.k_proj, x, wide).view(bsz, new, self.kv_heads, self.head_dim)
        v = self._linear(attn.v_proj, x, wide).view(bsz, new, self.kv_heads, self.head_dim).transpose(1, 2)
        if hasattr(attn, "q_norm"):  # qwen3
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # [B, H, T, D], [B, Hkv, T, D]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # [B, 1, T, D]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.cache_dtype != q.dtype:  # 16-bit on the CPU: float32 cache and attention (see __init__)
            q, k, v = q.to(self.cache_dtype), k.to(self.cache_dtype), v.to(self.cache_dtype)
        self.cache.write_at(layer_idx, write_at, k, v)
        if kernel:
            out = self._kernel_attention(layer_idx, q, mask)
        elif self._row_keys is not None:
            out = self._row_attention(layer_idx, q)
        else:
            keys, values = self.cache.keys[layer_idx, :, :, :end], self.cache.values[layer_idx, :, :, :end]
            out = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, scale=self.scale, enable_gqa=self.kv_heads != self.num_heads
            )  # [B, H, T, D]
        out = out.transpose(1, 2).reshape(bsz, new, self.num_heads * self.head_dim).to(x.dtype)
        return self._linear(attn.o_proj, out, wide)

    def _layers(
        self,
        x: torch.Tensor,
        cos,
        sin,
        mask,
        write_at: torch.Tensor,
        end: int,
        kernel: bool,
        hidden_layers: tuple[int, ...],
        wide: bool = False,
    ) -> tuple[torch.Tensor, dict]:
        """Every decoder layer over x [B, T, H]; returns the output and the requested layer outputs."""
        layer_hidden = {0: x} if 0 in hidden_layers else {}
        for i, layer in enumerate(self.layers):
            x = x + self._attention(
                i, layer.self_attn, layer.input_layernorm(x), cos, sin, mask, write_at, end, kernel, wide
            )
            x = x + self._mlp(layer.mlp, layer.post_attention_layernorm(x), wide)
            if i + 1 in hidden_layers:
                layer_hidden[i + 1] = x
        return x, layer_hidden

    @staticmethod
    def _rows_of(mask: torch.Tensor) -> list:
        """Per query row of mask [T, S]: the length n when it sees exactly positions [0, n) (a chain),
        else the index tensor of the positions it sees (a tree node: prefix + ancestors)."""
        rows = []
        for allowed in mask:
            n = int(allowed.sum())
            rows.append(n if bool(allowed[:n].all()) else allowed.nonzero().squeeze(1))
        return rows

    def _row_attention(self, layer_idx: int, q: torch.Tensor) -> torch.Tensor:
        """Attention of q [B, H, T, D] one query row at a time, each over exactly the cache positions it
        sees (`_rows_of`), through the same call a decode step makes: every row's numbers are a decode
        step's whatever T (the 16-bit CPU path, where that is what makes greedy verification exact)."""
        keys, values = self.cache.keys[layer_idx], self.cache.values[layer_idx]
        gqa = self.kv_heads != self.num_heads
        out = []
        for i, seen in enumerate(self._row_keys):
            if isinstance(seen, int):
                k_i, v_i = keys[:, :, :seen], values[:, :, :seen]
            else:
                k_i, v_i = keys.index_select(2, seen), values.index_select(2, seen)
            out.append(F.scaled_dot_product_attention(q[:, :, i : i + 1], k_i, v_i, scale=self.scale, enable_gqa=gqa))
        return torch.cat(out, dim=2)

    def _kernel_attention(self, layer_idx: int, q: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The Triton tree-attention kernel over the whole cache: prefix + [T, T] node mask."""

        start, new = self.cache.length, q.shape[2]
        return tree_attention(
            q,
            self.cache.keys[layer_idx],
            self.cache.values[layer_idx],
            start,
            mask[:, start : start + new],
            self.scale,
            impl="triton",
            max_prefix_len=start,
        )

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        tree: TreeLayout | None = None,
        logits: str = "all",
        hidden_layers: tuple[int, ...] = (),
    ) -> DecoderOutput:
        """Run input_ids [B, T] after the cached prefix and append them to the cache.

        logits: "all" (every new position), "last" (the final one only) or "none".
        hidden_layers: indices i whose layer output (i = 0: embeddings) is returned too.
        """
        new = input_ids.shape[1]
        if self.cache.length + new > self.cache.capacity:
            self._log(("cache", self.cache.length + new))
        self.cache.reserve(new)
        start = self.cache.length
        self._log(("step", input_ids.shape[0], new, logits) if start > 0 else ("prefill", input_ids.shape[0]))
        mask = self._mask(new, tree)
        positions = self._positions(new, tree)
        write_at = torch.arange(start, start + new, device=self.device)
        x = self.body.embed_tokens(input_ids)  # [B, T, H]
        cos, sin = self.body.rotary_emb(x, positions)  # [1, T, D]
        # a 16-bit prefill into an empty cache runs in float32 (`_linear`); every later forward (decode,
        # verify, catch-up) keeps the 16-bit product, whose rows do not depend on how many run together
        wide = self.upcast_prefill and start == 0 and new >= UPCAST_PREFILL_MIN_TOKENS
        if (
            self._compiled is not None
            and start > 0
            and new <= COMPILED_MAX_TOKENS
            and not hidden_layers
            and not self.window
        ):
            # one static shape per T: attend over the whole preallocated cache, the tail masked off
            full = torch.zeros(new, self.cache.capacity, dtype=torch.bool, device=self.device)
            full[:, : start + new] = True if mask is None else mask
            x, layer_hidden = self._compiled(x, cos, sin, full, write_at, self.cache.capacity, False, ())
        else:
            # the kernel covers verification: whole prefix visible, a node mask among the new tokens
            kernel = self.use_kernel and new > 1 and start > 0 and not self.window and (tree is None or tree.prior == 0)
            exact_rows = self.row_attention and new > 1 and start > 0 and not kernel
            self._row_keys = self._rows_of(mask[:, : start + new]) if exact_rows else None
            try:
                x, layer_hidden = self._layers(x, cos, sin, mask, write_at, start + new, kernel, hidden_layers, wide)
            finally:
                self._row_keys = None
        self.cache.advance(new)
        hidden = self.body.norm(x)
        return DecoderOutput(logits=self._logits(hidden, logits, wide), hidden=hidden, layer_hidden=layer_hidden)

    @torch.inference_mode()
    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head over hidden [B, T, H] (final-norm output) -> float32 logits [B, T, V]."""
        self._log(("head", hidden.shape[0] * hidden.shape[1]))
        return self._logits(hidden, "all")

    def _logits(self, hidden: torch.Tensor, which: str, wide: bool = False) -> torch.Tensor | None:
        """The LM head over every position ("all"), the final one ("last") or none; float32."""
        if which == "none":
            return None
        if which == "last":
            hidden = hidden[:, -1:]
        # a 16-bit prefill that wants every position's logits: one float32 GEMM (`_linear`, wide)
        return self._linear(self.model.lm_head, hidden, wide and which == "all").float()


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


class HFDecoder:
    """Any transformers causal LM through its own forward and a DynamicCache (chains only)."""

    supports_trees = False
    lazy_head = False  # its LM head runs inside the model's own forward, over every row

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
        raise SpecbenchError(
            f"tree verification needs a natively supported architecture ({', '.join(NATIVE_MODEL_TYPES)})"
        )

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        *,
        tree: TreeLayout | None = None,
        logits: str = "all",
        hidden_layers: tuple[int, ...] = (),
    ) -> DecoderOutput:
        if tree is not None:
            self.keep(0, torch.empty(0))
        new = input_ids.shape[1]
        positions = torch.arange(self._length, self._length + new, device=self.device)[None, :]
        out = self.model(
            input_ids=input_ids,
            position_ids=positions,
            use_cache=True,
            output_hidden_states=True,
            **{self._cache_kwarg: self.past},
        )
        self._length += new
        states = out.hidden_states
        logits_t = None if logits == "none" else (out.logits[:, -1:] if logits == "last" else out.logits).float()
        return DecoderOutput(logits=logits_t, hidden=states[-1], layer_hidden={i: states[i] for i in hidden_layers})


IMPLEMENTATIONS = ("auto", "native", "hf")  # auto: native where the architecture allows it, else hf


def make_decoder(model, implementation: str = "auto", kernels: str = "auto", compile: bool = False):
    """The native decoder when the architecture allows it (or ``implementation='hf'``, transformers'
    own forward, is forced)."""
    if implementation not in IMPLEMENTATIONS:
        raise SpecbenchError(f"unknown decoder implementation '{implementation}' (auto, native or hf)")
    if implementation == "hf" or (implementation == "auto" and model.config.model_type not in NATIVE_MODEL_TYPES):
        return HFDecoder(model)
    return NativeDecoder(model, kernels=kernels, compile=compile)

"""Tree attention for the verify step of tree (and chain) speculative decoding.

Per sequence b, the T draft nodes (the root's children and below; a chain is the path graph)
are queries; the keys and values are the sequence's cached prefix, positions 0 .. L_b − 1, and
the nodes themselves, positions L_b .. L_b + T − 1 of the same cache (the engine writes them
before attending). With d the head dimension, s the softmax scale (1/√d by default) and
query head h reading key/value head h // (H / H_kv) (grouped-query attention):

    out[b, h, i] = Σ_j softmax_j( s · q[b, h, i] · k[b, h_kv, j] + bias[b, i, j] ) · v[b, h_kv, j]

    bias[b, i, j] = 0    if j < L_b                                  (the whole prefix)
                    0    if j = L_b + n, n < T and mask[b, i, n]     (an ancestor of node i, or i)
                    −∞   otherwise                                   (other nodes, padding)

``mask`` is the [T, T] ancestor relation of the tree (mask[i, n]: node i may attend to node n;
its diagonal must be True), shared by the batch or given per sequence as [B, T, T]. Prefix
lengths are ragged: ``prefix_lens`` [B] indexes a padded cache [B, H_kv, S_max, D].

This module holds the Triton kernel (online softmax over key blocks, as in flash-attention; the
prefix can be split across programs and the partial results merged by their log-sum-exp, as in
flash-decoding), its wrapper `tree_attention_triton`, the torch reference
`tree_attention_reference` (what `specbench.engine.decoder.NativeDecoder` computes with
``scaled_dot_product_attention`` and an explicit boolean mask), and the switch `tree_attention`.
Nothing runs at import; without Triton the module imports and the Triton path raises.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from specbench_kernels._triton import (
    KernelUnavailable,
    cdiv,
    interpreter_enabled,
    next_power_of_2,
    require_triton,
    resolve_impl,
    sm_count,
    tl,
    triton,
    triton_available,
)

__all__ = [
    "tree_attention",
    "tree_attention_triton",
    "tree_attention_reference",
    "tree_attention_mask",
    "KernelUnavailable",
    "triton_available",
]

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


# ------------------------------------------------------------------------------------------ kernel
if triton is not None:

    @triton.jit
    def _online_softmax_step(acc, m_i, l_i, scores, v, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
        """Fold one key block into the running (acc, max, sum) of every query row.

        scores [BLOCK_M, BLOCK_N] fp32, already scaled by s·log2(e), −inf where masked;
        v [BLOCK_N, HEAD_DIM]; acc [BLOCK_M, HEAD_DIM] fp32; m_i, l_i [BLOCK_M] fp32 (base 2).
        A row that has seen only masked keys keeps m = −inf, l = 0, acc = 0. p is rounded to v's
        dtype for the second product, as flash-attention does; UPCAST then multiplies in fp32
        (Triton's interpreter cannot multiply bfloat16 blocks).
        """
        m_new = tl.maximum(m_i, tl.max(scores, 1))  # [BLOCK_M]
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # avoid (−inf) − (−inf)
        p = tl.math.exp2(scores - m_ref[:, None])  # [BLOCK_M, BLOCK_N]
        alpha = tl.math.exp2(m_i - m_ref)  # [BLOCK_M], rescales what was summed so far
        l_i = l_i * alpha + tl.sum(p, 1)
        p_low = p.to(v.dtype)
        if UPCAST:
            pv = tl.dot(p_low.to(tl.float32), v.to(tl.float32), input_precision="ieee")
        else:
            pv = tl.dot(p_low, v, input_precision=PRECISION)
        acc = acc * alpha[:, None] + pv
        return acc, m_new, l_i

    @triton.jit
    def _tree_attention_kernel(
        Q,
        K,
        V,
        Out,
        PrefixLens,
        Mask,
        PartOut,
        PartLse,
        qk_scale,  # softmax scale · log2(e)
        T,
        H_kv,
        S_max,
        chunk,  # chunk: prefix positions per split, a multiple of BLOCK_N
        stride_qb,
        stride_qh,
        stride_qt,
        stride_qd,
        stride_kb,
        stride_kh,
        stride_ks,
        stride_kd,
        stride_vb,
        stride_vh,
        stride_vs,
        stride_vd,
        stride_ob,
        stride_oh,
        stride_ot,
        stride_od,
        stride_mb,
        stride_mi,
        stride_mj,
        GROUP: tl.constexpr,
        HEAD_DIM: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        NUM_SPLITS: tl.constexpr,
        PRECISION: tl.constexpr,
        UPCAST: tl.constexpr,
    ):
        """One program: rows (g, i) of one key/value head, over one split of the prefix.

        Grid (cdiv(GROUP·T, BLOCK_M), B·H_kv, NUM_SPLITS). The GROUP query heads that share a
        key/value head are stacked along the rows (row r = g·T + i is node i of query head
        h_kv·GROUP + g), so each key block is read once for all of them. Split p covers prefix
        positions [p·chunk, min((p+1)·chunk, L_b)); the last split runs from its start to L_b and
        also covers the T nodes.
        With one split the normalised output is stored; otherwise the split's normalised
        partial output [B, H, NUM_SPLITS, T, D] and its log2-sum-exp [B, H, NUM_SPLITS, T].
        """
        pid_m = tl.program_id(0)
        pid_bh = tl.program_id(1)
        pid_s = tl.program_id(2)
        b = pid_bh // H_kv
        h_kv = pid_bh % H_kv
        b64 = b.to(tl.int64)

        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BLOCK_M]
        row_ok = rows < GROUP * T
        node = rows % T  # query node i
        head = h_kv * GROUP + rows // T  # query head h
        dims = tl.arange(0, HEAD_DIM)  # [D]
        cols = tl.arange(0, BLOCK_N)  # [BLOCK_N]

        q_ptrs = Q + b64 * stride_qb + head[:, None] * stride_qh + node[:, None] * stride_qt + dims[None, :] * stride_qd
        q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)  # [BLOCK_M, D]
        if UPCAST:  # interpreter: products of 16-bit blocks in fp32
            q = q.to(tl.float32)

        k_base = K + b64 * stride_kb + h_kv * stride_kh
        v_base = V + b64 * stride_vb + h_kv * stride_vh
        prefix_len = tl.load(PrefixLens + b).to(tl.int32)  # L_b

        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)

        # the prefix: every node sees every position < L_b
        start = pid_s * chunk
        end = tl.minimum(prefix_len, S_max)
        if pid_s < NUM_SPLITS - 1:  # the last split runs to L_b, whatever chunk was sized for
            end = tl.minimum(end, start + chunk)
        for j0 in range(start, end, BLOCK_N):
            pos = j0 + cols  # [BLOCK_N]
            visible = pos < end
            k = tl.load(
                k_base + pos[None, :] * stride_ks + dims[:, None] * stride_kd, mask=visible[None, :], other=0.0
            )  # [D, BLOCK_N]
            v = tl.load(
                v_base + pos[:, None] * stride_vs + dims[None, :] * stride_vd, mask=visible[:, None], other=0.0
            )  # [BLOCK_N, D]
            if UPCAST:
                k = k.to(tl.float32)
            scores = tl.dot(q, k, input_precision=PRECISION) * qk_scale  # [BLOCK_M, BLOCK_N]
            scores = tl.where(visible[None, :], scores, float("-inf"))
            acc, m_i, l_i = _online_softmax_step(acc, m_i, l_i, scores, v, PRECISION, UPCAST)

        # the nodes: node i sees node n at position L_b + n when mask[b, i, n]
        if pid_s == NUM_SPLITS - 1:
            m_base = Mask + b64 * stride_mb
            for n0 in range(0, T, BLOCK_N):
                n = n0 + cols  # [BLOCK_N]
                pos = prefix_len + n
                in_range = (n < T) & (pos < S_max)
                ancestor = tl.load(
                    m_base + node[:, None] * stride_mi + n[None, :] * stride_mj,
                    mask=row_ok[:, None] & in_range[None, :],
                    other=0,
                )  # [BLOCK_M, BLOCK_N]
                visible = (ancestor != 0) & in_range[None, :]
                k = tl.load(
                    k_base + pos[None, :] * stride_ks + dims[:, None] * stride_kd, mask=in_range[None, :], other=0.0
                )
                v = tl.load(
                    v_base + pos[:, None] * stride_vs + dims[None, :] * stride_vd, mask=in_range[:, None], other=0.0
                )
                if UPCAST:
                    k = k.to(tl.float32)
                scores = tl.dot(q, k, input_precision=PRECISION) * qk_scale
                scores = tl.where(visible, scores, float("-inf"))
                acc, m_i, l_i = _online_softmax_step(acc, m_i, l_i, scores, v, PRECISION, UPCAST)

        l_safe = tl.where(l_i == 0.0, 1.0, l_i)  # a row that saw nothing outputs 0
        out = acc / l_safe[:, None]
        if NUM_SPLITS == 1:
            o_ptrs = (
                Out
                + b64 * stride_ob
                + head[:, None] * stride_oh
                + node[:, None] * stride_ot
                + dims[None, :] * stride_od
            )
            tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=row_ok[:, None])
        else:
            part_row = ((b64 * (H_kv * GROUP) + head) * NUM_SPLITS + pid_s) * T + node  # [BLOCK_M]
            tl.store(PartOut + part_row[:, None] * HEAD_DIM + dims[None, :], out, mask=row_ok[:, None])
            lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_safe))
            tl.store(PartLse + part_row, lse, mask=row_ok)

    @triton.jit
    def _merge_splits_kernel(
        PartOut,
        PartLse,
        Out,
        T,
        stride_ob,
        stride_oh,
        stride_ot,
        stride_od,
        H: tl.constexpr,
        HEAD_DIM: tl.constexpr,
        NUM_SPLITS: tl.constexpr,
        BLOCK_T: tl.constexpr,
    ):
        """out = Σ_p 2^(lse_p − M) · out_p / Σ_p 2^(lse_p − M) with M = max_p lse_p.

        Grid (cdiv(T, BLOCK_T), B·H); lse_p is the log2-sum-exp of split p (−∞ when it saw nothing).
        """
        pid_t = tl.program_id(0)
        pid_bh = tl.program_id(1)
        b = pid_bh // H
        h = pid_bh % H
        node = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)  # [BLOCK_T]
        ok = node < T
        dims = tl.arange(0, HEAD_DIM)
        base = pid_bh.to(tl.int64) * NUM_SPLITS * T

        m = tl.full([BLOCK_T], float("-inf"), dtype=tl.float32)
        for p in range(NUM_SPLITS):
            m = tl.maximum(m, tl.load(PartLse + base + p * T + node, mask=ok, other=float("-inf")))
        m_ref = tl.where(m == float("-inf"), 0.0, m)
        acc = tl.zeros([BLOCK_T, HEAD_DIM], dtype=tl.float32)
        den = tl.zeros([BLOCK_T], dtype=tl.float32)
        for p in range(NUM_SPLITS):
            w = tl.math.exp2(tl.load(PartLse + base + p * T + node, mask=ok, other=float("-inf")) - m_ref)
            part = tl.load(
                PartOut + (base + p * T + node)[:, None] * HEAD_DIM + dims[None, :], mask=ok[:, None], other=0.0
            )
            acc += w[:, None] * part
            den += w
        out = acc / tl.where(den == 0.0, 1.0, den)[:, None]
        o_ptrs = (
            Out + b.to(tl.int64) * stride_ob + h * stride_oh + node[:, None] * stride_ot + dims[None, :] * stride_od
        )
        tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=ok[:, None])


# ------------------------------------------------------------------------------------------ checks
def _as_prefix_lens(prefix_lens: torch.Tensor | Sequence[int] | int, batch: int, device: torch.device) -> torch.Tensor:
    """prefix_lens as a [B] integer tensor on ``device``."""
    if isinstance(prefix_lens, int):
        return torch.full((batch,), prefix_lens, dtype=torch.int32, device=device)
    if not isinstance(prefix_lens, torch.Tensor):
        prefix_lens = torch.tensor(list(prefix_lens), dtype=torch.int32)
    if prefix_lens.dtype.is_floating_point or prefix_lens.dtype == torch.bool or prefix_lens.shape != (batch,):
        raise ValueError(
            f"prefix_lens must be {batch} integers (one per sequence), got dtype {prefix_lens.dtype} "
            f"and shape {tuple(prefix_lens.shape)}"
        )
    return prefix_lens.to(device)


def _check(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, tree_mask: torch.Tensor) -> None:
    if q.dim() != 4 or k_cache.dim() != 4 or v_cache.dim() != 4:
        raise ValueError(
            "expected q [B, H, T, D], k_cache and v_cache [B, H_kv, S_max, D]; got "
            f"{tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}"
        )
    bsz, heads, nodes, dim = q.shape
    if k_cache.shape != v_cache.shape:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} and v_cache {tuple(v_cache.shape)} differ in shape")
    if k_cache.shape[0] != bsz or k_cache.shape[3] != dim:
        raise ValueError(f"k_cache {tuple(k_cache.shape)} does not match q {tuple(q.shape)} in batch or head_dim")
    kv_heads, s_max = k_cache.shape[1], k_cache.shape[2]
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"query heads ({heads}) must be a multiple of key/value heads ({kv_heads})")
    if nodes < 1 or nodes > s_max:
        raise ValueError(f"T = {nodes} nodes do not fit a cache of S_max = {s_max} positions")
    if tree_mask.dtype != torch.bool:
        raise ValueError(f"tree_mask must be a boolean tensor (True = may attend), got {tree_mask.dtype}")
    if tree_mask.shape not in ((nodes, nodes), (bsz, nodes, nodes)):
        raise ValueError(
            f"tree_mask must be [T, T] or [B, T, T] = [{nodes}, {nodes}] or [{bsz}, {nodes}, {nodes}], "
            f"got {tuple(tree_mask.shape)}"
        )
    if q.dtype not in _FLOAT_DTYPES or k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(
            f"q, k_cache, v_cache must share one dtype among float32/float16/bfloat16, got "
            f"{q.dtype}, {k_cache.dtype}, {v_cache.dtype}"
        )
    devices = {q.device, k_cache.device, v_cache.device, tree_mask.device}
    if len(devices) != 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(str(d) for d in devices)}")


# ------------------------------------------------------------------------------------------ torch
def tree_attention_mask(prefix_lens: torch.Tensor, tree_mask: torch.Tensor, s_max: int) -> torch.Tensor:
    """Boolean mask [B, 1, T, S_max] (True = attend) of tree attention over a padded cache.

    Row i of sequence b sees positions j < L_b and the nodes j = L_b + n with tree_mask[(b,) i, n];
    nothing past L_b + T. For equal prefix lengths L this is NativeDecoder._mask (ones over the
    prefix, the tree mask over the last T columns) padded with False up to S_max.
    """
    nodes = tree_mask.shape[-1]
    lens = prefix_lens.to(device=tree_mask.device, dtype=torch.long)  # [B]
    bsz = lens.shape[0]
    rel = torch.arange(s_max, device=tree_mask.device)[None, :] - lens[:, None]  # [B, S] node index n = j − L_b
    in_nodes = (rel >= 0) & (rel < nodes)  # [B, S]
    per_seq = tree_mask.expand(bsz, nodes, nodes)  # [B, T, T]
    node_vis = per_seq.gather(2, rel.clamp(0, nodes - 1)[:, None, :].expand(bsz, nodes, s_max))  # [B, T, S]
    mask = (rel < 0)[:, None, :] | (in_nodes[:, None, :] & node_vis)  # [B, T, S]
    return mask[:, None]  # [B, 1, T, S]


def tree_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    prefix_lens: torch.Tensor | Sequence[int] | int,
    tree_mask: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Torch reference: ``scaled_dot_product_attention`` with the boolean mask of `tree_attention_mask`.

    q [B, H, T, D]; k_cache, v_cache [B, H_kv, S_max, D]; prefix_lens [B]; tree_mask [T, T] or
    [B, T, T] bool -> [B, H, T, D] in q's dtype. Same call as the engine (``enable_gqa`` when
    H != H_kv). Needs torch >= 2.5 for GQA.
    """
    _check(q, k_cache, v_cache, tree_mask)
    lens = _as_prefix_lens(prefix_lens, q.shape[0], q.device)
    mask = tree_attention_mask(lens, tree_mask, k_cache.shape[2])  # [B, 1, T, S]
    return F.scaled_dot_product_attention(
        q, k_cache, v_cache, attn_mask=mask, scale=scale, enable_gqa=q.shape[1] != k_cache.shape[1]
    )


# ------------------------------------------------------------------------------------------ triton
def _default_splits(
    programs: int, prefix_len: int, block_n: int, group: int, nodes: int, elsize: int, device: torch.device
) -> int:
    """Prefix splits when batch × heads × row blocks alone cannot fill the GPU (≈ 2 programs per SM).

    Each split writes and the merge reads a partial output of 8·H·T·D bytes per sequence (fp32),
    against 2·H_kv·L·D·elsize bytes of keys and values: the count is capped so that the partials
    stay within half of that, splits ≤ L·elsize / (8·GROUP·T), and at one key block per split.
    """
    target = 2 * sm_count(device)
    if programs >= target:
        return 1
    by_traffic = prefix_len * elsize // (8 * group * nodes)
    return max(1, min(cdiv(target, programs), cdiv(prefix_len, block_n), by_traffic, 32))


def tree_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    prefix_lens: torch.Tensor | Sequence[int] | int,
    tree_mask: torch.Tensor,
    scale: float | None = None,
    *,
    max_prefix_len: int | None = None,
    num_splits: int | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Triton tree attention; arguments and result as `tree_attention_reference`.

    max_prefix_len: an upper bound of prefix_lens known on the host (default S_max − T); it only
    sizes the prefix splits, so a tight bound helps when the cache is much longer than used.
    num_splits: prefix splits per (sequence, head) (default: enough programs for the GPU).
    Positions outside [0, S_max) are never read; prefix_lens[b] + T must be <= S_max for the
    result to be meaningful (not checked on the device, which would need a synchronisation).
    """
    _check(q, k_cache, v_cache, tree_mask)
    require_triton(q, k_cache, v_cache)
    bsz, heads, nodes, dim = q.shape
    kv_heads, s_max = k_cache.shape[1], k_cache.shape[2]
    if dim & (dim - 1) or not 16 <= dim <= 256:
        raise ValueError(f"head_dim must be a power of two in [16, 256] for the Triton kernel, got {dim}")
    lens = _as_prefix_lens(prefix_lens, bsz, q.device)
    if not lens.is_contiguous():
        lens = lens.contiguous()
    if lens.device.type == "cpu":  # checking costs nothing here (no device synchronisation)
        if int(lens.min()) < 0 or int(lens.max()) + nodes > s_max:
            raise ValueError(f"prefix_lens must lie in [0, S_max − T] = [0, {s_max - nodes}], got {lens.tolist()}")
    scale = 1.0 / math.sqrt(dim) if scale is None else float(scale)
    group = heads // kv_heads
    mask_u8 = tree_mask.view(torch.uint8)  # bool storage read as bytes, no copy
    if mask_u8.dim() == 2:
        stride_mb, stride_mi, stride_mj = 0, mask_u8.stride(0), mask_u8.stride(1)
    else:
        stride_mb, stride_mi, stride_mj = mask_u8.stride()

    rows = group * nodes
    block_m = block_m or min(64, max(16, next_power_of_2(rows)))
    block_n = block_n or (64 if dim <= 128 else 32)
    prefix_bound = s_max - nodes if max_prefix_len is None else max(0, min(int(max_prefix_len), s_max))
    m_blocks = cdiv(rows, block_m)
    if num_splits is None:
        num_splits = _default_splits(
            bsz * kv_heads * m_blocks, prefix_bound, block_n, group, nodes, q.element_size(), q.device
        )
    num_splits = max(1, int(num_splits))
    chunk = max(1, cdiv(cdiv(max(prefix_bound, 1), num_splits), block_n)) * block_n

    out = torch.empty_like(q, memory_format=torch.contiguous_format)  # [B, H, T, D]
    if num_splits > 1:
        part_out = torch.empty(bsz, heads, num_splits, nodes, dim, dtype=torch.float32, device=q.device)
        part_lse = torch.empty(bsz, heads, num_splits, nodes, dtype=torch.float32, device=q.device)
    else:
        part_out = part_lse = out  # unused
    precision = "ieee" if q.dtype == torch.float32 else "tf32"
    grid = (m_blocks, bsz * kv_heads, num_splits)
    _tree_attention_kernel[grid](
        q,
        k_cache,
        v_cache,
        out,
        lens,
        mask_u8,
        part_out,
        part_lse,
        scale * math.log2(math.e),
        nodes,
        kv_heads,
        s_max,
        chunk,
        *q.stride(),
        *k_cache.stride(),
        *v_cache.stride(),
        *out.stride(),
        stride_mb,
        stride_mi,
        stride_mj,
        GROUP=group,
        HEAD_DIM=dim,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        NUM_SPLITS=num_splits,
        PRECISION=precision,
        UPCAST=interpreter_enabled() and q.dtype != torch.float32,
        num_warps=4 if dim <= 64 else 8,
        num_stages=2,
    )
    if num_splits > 1:
        block_t = min(32, max(2, next_power_of_2(nodes)))
        _merge_splits_kernel[(cdiv(nodes, block_t), bsz * heads)](
            part_out,
            part_lse,
            out,
            nodes,
            *out.stride(),
            H=heads,
            HEAD_DIM=dim,
            NUM_SPLITS=num_splits,
            BLOCK_T=block_t,
            num_warps=4,
        )
    return out


# ------------------------------------------------------------------------------------------ switch
def tree_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    prefix_lens: torch.Tensor | Sequence[int] | int,
    tree_mask: torch.Tensor,
    scale: float | None = None,
    *,
    impl: str = "auto",
    **triton_options,
) -> torch.Tensor:
    """Tree attention [B, H, T, D] by the Triton kernel or the torch reference.

    impl: "auto" (Triton on CUDA tensors when Triton is installed, torch otherwise), "triton" or
    "torch". ``triton_options`` (max_prefix_len, num_splits, block_m, block_n) go to the kernel.
    """
    if resolve_impl(impl, q, k_cache, v_cache) == "triton":
        return tree_attention_triton(q, k_cache, v_cache, prefix_lens, tree_mask, scale, **triton_options)
    return tree_attention_reference(q, k_cache, v_cache, prefix_lens, tree_mask, scale)

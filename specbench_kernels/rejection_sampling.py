"""Fused speculative-sampling verification of a batch of drafted chains.

For sequence b with draft tokens x_1..x_K, draft distributions q_1..q_K (one-hot on x_i when
the drafter has none), target distributions p_1..p_{K+1}, uniforms u_1..u_K and exponentials
E_v ~ Exp(1) over the vocabulary (positions are 0-based below, as in the tensors):

    keep_i      = u_i · q_i(x_i) < p_i(x_i)                  (u < p/q without dividing)
    accepted    = number of leading kept positions, a in 0..K
    weights w   = norm(max(p_a − q_a, 0))   if a < K         (recovered token; p_a when the
                                                              residual has no mass, p_a = q_a)
                  p_K                         if a = K         (bonus token)
    next_token  = argmax_v  w_v / E_v                        (exponential race: P(v) = w_v / Σ w)

The normalisation of w does not change the argmax, so it is never computed. The torch
reference is `rejection_sampling_reference.verify_sampling` (the engine's own rule); the kernel
reproduces it token for token given the same random tensors, including its rounding: each
step is rounded to the dtype torch would produce (u·q in promote(u, q), p − q in p's dtype,
w / E in promote(p, E), divisions correctly rounded), ties go to the lowest index as in
``torch.argmax``.

The Triton kernel splits the vocabulary across programs (grid B × splits): each program redoes
the K accept tests (K gathers), then scans its slice of the rows p_a, q_a and E once, keeping
per lane the best ratio of the residual and of p and whether the residual has mass; a second,
tiny kernel merges the splits and picks the token. HBM traffic: ≈ 3 · V elements per sequence
(2 · V for one-hot drafts), against several passes for the torch reference.
"""

from __future__ import annotations

import torch

from specbench_kernels._triton import (
    DTYPE_CODES,
    KernelUnavailable,
    cdiv,
    next_power_of_2,
    require_triton,
    resolve_impl,
    sm_count,
    tl,
    triton,
    triton_available,
)
from specbench_kernels.rejection_sampling_reference import Verdict, verify_sampling

__all__ = [
    "rejection_sampling",
    "rejection_sampling_triton",
    "verify_sampling",
    "Verdict",
    "KernelUnavailable",
    "triton_available",
]

rejection_sampling_reference = verify_sampling  # the torch reference, also the engine's own rule


# ------------------------------------------------------------------------------------------ kernels
if triton is not None:

    @triton.jit
    def _round_to(x, CODE: tl.constexpr):
        """Round fp32 x to float32 (0), float16 (1) or bfloat16 (2), keeping it in fp32.

        bfloat16 rounds to nearest even by bit arithmetic, which behaves the same compiled and
        under the interpreter (whose fp32 -> bf16 cast truncates).
        """
        if CODE == 1:
            x = x.to(tl.float16).to(tl.float32)
        elif CODE == 2:
            bits = x.to(tl.uint32, bitcast=True)
            bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
            x = bits.to(tl.float32, bitcast=True)
        return x

    @triton.jit
    def _accepted_count(
        DraftTokens,
        DraftProbs,
        TargetProbs,
        Uniform,
        b64,
        K,
        stride_db,
        stride_dk,
        stride_qb,
        stride_qk,
        stride_qv,
        stride_pb,
        stride_pk,
        stride_pv,
        stride_ub,
        stride_uk,
        HAS_Q: tl.constexpr,
        ACC_CODE: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        """Leading accepted draft positions of sequence b: first i with not (u_i·q_i(x_i) < p_i(x_i)), else K."""
        ks = tl.arange(0, BLOCK_K)  # [BLOCK_K]
        valid = ks < K
        tokens = tl.load(DraftTokens + b64 * stride_db + ks * stride_dk, mask=valid, other=0).to(tl.int64)
        p_x = tl.load(TargetProbs + b64 * stride_pb + ks * stride_pk + tokens * stride_pv, mask=valid, other=0.0).to(
            tl.float32
        )
        if HAS_Q:
            q_x = tl.load(DraftProbs + b64 * stride_qb + ks * stride_qk + tokens * stride_qv, mask=valid, other=1.0).to(
                tl.float32
            )
        else:
            q_x = tl.full([BLOCK_K], 1.0, dtype=tl.float32)
        u = tl.load(Uniform + b64 * stride_ub + ks * stride_uk, mask=valid, other=1.0).to(tl.float32)
        keep = _round_to(u * q_x, ACC_CODE) < p_x
        return tl.min(tl.where(valid & (keep == 0), ks, K), 0)

    @triton.jit
    def _rejection_scan_kernel(
        DraftTokens,
        DraftProbs,
        TargetProbs,
        Uniform,
        Expo,
        Accepted,
        BestRes,
        BestResIdx,
        BestP,
        BestPIdx,
        HasMass,
        K,
        V,
        v_chunk,
        stride_db,
        stride_dk,
        stride_qb,
        stride_qk,
        stride_qv,
        stride_pb,
        stride_pk,
        stride_pv,
        stride_ub,
        stride_uk,
        stride_eb,
        stride_ev,
        NUM_SPLITS: tl.constexpr,
        HAS_Q: tl.constexpr,
        ACC_CODE: tl.constexpr,
        RES_CODE: tl.constexpr,
        RATIO_CODE: tl.constexpr,
        BLOCK_K: tl.constexpr,
        BLOCK_V: tl.constexpr,
    ):
        """Grid (B, NUM_SPLITS): program (b, s) scans vocabulary [s·v_chunk, min((s+1)·v_chunk, V)).

        Writes accepted[b] (split 0) and per split: the best residual ratio max_v r_v / E_v and its
        first index, the best p ratio and its first index, and whether any r_v > 0, where
        r = max(p_a − q_a, 0) (q_a = 0 when a = K), into [B, NUM_SPLITS] buffers.
        """
        b = tl.program_id(0)
        split = tl.program_id(1)
        b64 = b.to(tl.int64)
        accepted = _accepted_count(
            DraftTokens,
            DraftProbs,
            TargetProbs,
            Uniform,
            b64,
            K,
            stride_db,
            stride_dk,
            stride_qb,
            stride_qk,
            stride_qv,
            stride_pb,
            stride_pk,
            stride_pv,
            stride_ub,
            stride_uk,
            HAS_Q,
            ACC_CODE,
            BLOCK_K,
        )
        if split == 0:
            tl.store(Accepted + b, accepted.to(tl.int64))
        rejected = accepted < K
        at = tl.minimum(accepted, K - 1)  # row of q_a (ignored when a = K)

        p_row = TargetProbs + b64 * stride_pb + accepted.to(tl.int64) * stride_pk
        q_row = DraftProbs + b64 * stride_qb + at.to(tl.int64) * stride_qk
        e_row = Expo + b64 * stride_eb
        if not HAS_Q:
            x_at = tl.load(DraftTokens + b64 * stride_db + at * stride_dk, mask=rejected, other=-1)

        lanes = tl.arange(0, BLOCK_V)  # [BLOCK_V]
        best_res = tl.full([BLOCK_V], -1.0, dtype=tl.float32)  # ratios are >= 0: −1 loses to any
        best_res_idx = tl.zeros([BLOCK_V], dtype=tl.int32)
        best_p = tl.full([BLOCK_V], -1.0, dtype=tl.float32)
        best_p_idx = tl.zeros([BLOCK_V], dtype=tl.int32)
        mass = tl.zeros([BLOCK_V], dtype=tl.int32)

        v_start = split * v_chunk
        v_end = tl.minimum(v_start + v_chunk, V)
        q_end = tl.where(rejected, v_end, 0)  # q_a is read only after a rejection
        for v0 in range(v_start, v_end, BLOCK_V):
            vocab = v0 + lanes  # [BLOCK_V]
            ok = vocab < v_end
            p = tl.load(p_row + vocab * stride_pv, mask=ok, other=0.0).to(tl.float32)
            if HAS_Q:
                q = tl.load(q_row + vocab * stride_qv, mask=vocab < q_end, other=0.0).to(tl.float32)
            else:
                q = tl.where(vocab == x_at, 1.0, 0.0)  # one-hot draft (x_at = −1 when nothing was rejected)
            e = tl.load(e_row + vocab * stride_ev, mask=ok, other=1.0).to(tl.float32)
            res = tl.maximum(_round_to(p - q, RES_CODE), 0.0)  # max(p − q, 0) in p's dtype
            ratio_res = tl.where(ok, _round_to(tl.fdiv(res, e, ieee_rounding=True), RATIO_CODE), -1.0)
            ratio_p = tl.where(ok, _round_to(tl.fdiv(p, e, ieee_rounding=True), RATIO_CODE), -1.0)
            # each lane meets its indices in increasing order: strict > keeps the first maximum
            better = ratio_res > best_res
            best_res = tl.where(better, ratio_res, best_res)
            best_res_idx = tl.where(better, vocab, best_res_idx)
            better = ratio_p > best_p
            best_p = tl.where(better, ratio_p, best_p)
            best_p_idx = tl.where(better, vocab, best_p_idx)
            mass = mass | (ok & (res > 0.0)).to(tl.int32)

        big = 2147483647
        top_res = tl.max(best_res, 0)
        top_res_idx = tl.min(tl.where(best_res == top_res, best_res_idx, big), 0)
        top_p = tl.max(best_p, 0)
        top_p_idx = tl.min(tl.where(best_p == top_p, best_p_idx, big), 0)
        slot = b64 * NUM_SPLITS + split
        tl.store(BestRes + slot, top_res)
        tl.store(BestResIdx + slot, top_res_idx)
        tl.store(BestP + slot, top_p)
        tl.store(BestPIdx + slot, top_p_idx)
        tl.store(HasMass + slot, tl.max(mass, 0))

    @triton.jit
    def _rejection_pick_kernel(
        Accepted,
        BestRes,
        BestResIdx,
        BestP,
        BestPIdx,
        HasMass,
        NextToken,
        K,
        NUM_SPLITS: tl.constexpr,
        BLOCK_S: tl.constexpr,
    ):
        """Grid (B,): merge the splits (first index among equal ratios) and choose residual or p."""
        b64 = tl.program_id(0).to(tl.int64)
        splits = tl.arange(0, BLOCK_S)
        ok = splits < NUM_SPLITS
        slot = b64 * NUM_SPLITS + splits
        big = 2147483647
        res = tl.load(BestRes + slot, mask=ok, other=-2.0)
        res_idx = tl.load(BestResIdx + slot, mask=ok, other=big)
        p = tl.load(BestP + slot, mask=ok, other=-2.0)
        p_idx = tl.load(BestPIdx + slot, mask=ok, other=big)
        mass = tl.max(tl.load(HasMass + slot, mask=ok, other=0), 0)
        token_res = tl.min(tl.where(res == tl.max(res, 0), res_idx, big), 0)
        token_p = tl.min(tl.where(p == tl.max(p, 0), p_idx, big), 0)
        rejected = tl.load(Accepted + b64) < K
        use_res = rejected & (mass > 0)  # an empty residual (p_a = q_a) falls back to p_a
        tl.store(NextToken + b64, tl.where(use_res, token_res, token_p).to(tl.int64))


# ------------------------------------------------------------------------------------------ wrapper
def _check(draft_tokens, draft_probs, target_probs, uniform, exponential) -> None:
    if draft_tokens.dim() != 2 or draft_tokens.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"draft_tokens must be [B, K] int64/int32, got {tuple(draft_tokens.shape)} {draft_tokens.dtype}"
        )
    bsz, k = draft_tokens.shape
    if target_probs.dim() != 3 or target_probs.shape[:2] != (bsz, k + 1):
        raise ValueError(f"target_probs must be [B, K+1, V] = [{bsz}, {k + 1}, V], got {tuple(target_probs.shape)}")
    vocab = target_probs.shape[2]
    if draft_probs is not None:
        if draft_probs.shape != (bsz, k, vocab):
            raise ValueError(
                f"draft_probs must be [B, K, V] = [{bsz}, {k}, {vocab}] or None, got {tuple(draft_probs.shape)}"
            )
        if draft_probs.dtype != target_probs.dtype:
            raise ValueError(
                f"draft_probs ({draft_probs.dtype}) and target_probs ({target_probs.dtype}) must share a dtype"
            )
    if uniform.shape != (bsz, k):
        raise ValueError(f"uniform must be [B, K] = [{bsz}, {k}], got {tuple(uniform.shape)}")
    if exponential.shape != (bsz, vocab):
        raise ValueError(f"exponential must be [B, V] = [{bsz}, {vocab}], got {tuple(exponential.shape)}")
    for name, t in (("target_probs", target_probs), ("uniform", uniform), ("exponential", exponential)):
        if t.dtype not in DTYPE_CODES:
            raise ValueError(f"{name} must be float32, float16 or bfloat16 for the Triton kernel, got {t.dtype}")
    tensors = [draft_tokens, target_probs, uniform, exponential] + ([draft_probs] if draft_probs is not None else [])
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise ValueError(f"all tensors must be on one device, got {sorted(str(d) for d in devices)}")
    if vocab >= 2**31:
        raise ValueError(f"vocabulary of {vocab} entries is beyond the kernel's int32 indices")


def rejection_sampling_triton(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    uniform: torch.Tensor,
    exponential: torch.Tensor,
    *,
    num_splits: int | None = None,
    block_v: int | None = None,
) -> Verdict:
    """Triton speculative-sampling verification; arguments and result as `verify_sampling`.

    draft_tokens [B, K] long; draft_probs [B, K, V] or None (one-hot drafts); target_probs
    [B, K+1, V]; uniform [B, K]; exponential [B, V] -> Verdict(accepted [B], next_token [B]).
    num_splits: vocabulary slices per sequence (default: enough programs to fill the GPU).
    Draft tokens must lie in [0, V) (not checked on the device).
    """
    _check(draft_tokens, draft_probs, target_probs, uniform, exponential)
    require_triton(*(t for t in (draft_tokens, draft_probs, target_probs, uniform, exponential) if t is not None))
    bsz, k = draft_tokens.shape
    vocab = target_probs.shape[2]
    device = target_probs.device
    accepted = torch.empty(bsz, dtype=torch.int64, device=device)
    next_token = torch.empty(bsz, dtype=torch.int64, device=device)
    if bsz == 0:
        return Verdict(accepted, next_token)

    block_v = block_v or min(2048, max(16, next_power_of_2(vocab)))
    v_blocks = cdiv(vocab, block_v)
    if num_splits is None:
        num_splits = min(v_blocks, max(1, cdiv(2 * sm_count(device), bsz)))
    num_splits = max(1, min(int(num_splits), v_blocks))
    v_chunk = cdiv(v_blocks, num_splits) * block_v
    num_splits = cdiv(vocab, v_chunk)  # drop splits that would scan nothing

    q_dtype = target_probs.dtype  # torch: q(x) is draft_probs' (= target_probs') dtype, or ones_like(p)
    acc_code = DTYPE_CODES[torch.promote_types(uniform.dtype, q_dtype)]
    res_code = DTYPE_CODES[target_probs.dtype]
    ratio_code = DTYPE_CODES[torch.promote_types(target_probs.dtype, exponential.dtype)]

    best_res = torch.empty(bsz, num_splits, dtype=torch.float32, device=device)
    best_res_idx = torch.empty(bsz, num_splits, dtype=torch.int32, device=device)
    best_p = torch.empty_like(best_res)
    best_p_idx = torch.empty_like(best_res_idx)
    has_mass = torch.empty_like(best_res_idx)
    has_q = draft_probs is not None
    dp = draft_probs if has_q else target_probs  # a valid pointer, never read when HAS_Q is False
    dp_strides = draft_probs.stride() if has_q else (0, 0, 0)

    _rejection_scan_kernel[(bsz, num_splits)](
        draft_tokens,
        dp,
        target_probs,
        uniform,
        exponential,
        accepted,
        best_res,
        best_res_idx,
        best_p,
        best_p_idx,
        has_mass,
        k,
        vocab,
        v_chunk,
        *draft_tokens.stride(),
        *dp_strides,
        *target_probs.stride(),
        *uniform.stride(),
        *exponential.stride(),
        NUM_SPLITS=num_splits,
        HAS_Q=has_q,
        ACC_CODE=acc_code,
        RES_CODE=res_code,
        RATIO_CODE=ratio_code,
        BLOCK_K=max(2, next_power_of_2(k)),
        BLOCK_V=block_v,
        num_warps=8 if block_v >= 2048 else 4,
        enable_fp_fusion=False,  # no fused multiply-add: every step rounds as torch does
    )
    _rejection_pick_kernel[(bsz,)](
        accepted,
        best_res,
        best_res_idx,
        best_p,
        best_p_idx,
        has_mass,
        next_token,
        k,
        NUM_SPLITS=num_splits,
        BLOCK_S=max(2, next_power_of_2(num_splits)),
        num_warps=1,
    )
    return Verdict(accepted, next_token)


# ------------------------------------------------------------------------------------------ switch
def rejection_sampling(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_probs: torch.Tensor,
    uniform: torch.Tensor,
    exponential: torch.Tensor,
    *,
    impl: str = "auto",
    **triton_options,
) -> Verdict:
    """Speculative-sampling verification by the Triton kernel or `verify_sampling`.

    impl: "auto" (Triton on CUDA tensors when Triton is installed and the dtypes are float32,
    float16 or bfloat16; torch otherwise), "triton" or "torch". ``triton_options``
    (num_splits, block_v) go to the kernel.
    """
    tensors = [t for t in (draft_tokens, draft_probs, target_probs, uniform, exponential) if t is not None]
    choice = resolve_impl(impl, *tensors)
    if impl == "auto" and any(t.dtype not in DTYPE_CODES for t in (target_probs, uniform, exponential)):
        choice = "torch"  # e.g. float64 probabilities: only the reference handles them
    if choice == "triton":
        return rejection_sampling_triton(
            draft_tokens, draft_probs, target_probs, uniform, exponential, **triton_options
        )
    return verify_sampling(draft_tokens, draft_probs, target_probs, uniform, exponential)

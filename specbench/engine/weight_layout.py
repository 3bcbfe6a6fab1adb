"""Storing linear weights in the layout the CPU's matrix multiply handles best when verifying drafts.

A linear layer computes y = x Wᵀ with x [T, in] and W [out, in]. torch keeps W row-major
([out, in], stride (in, 1)), so the product is an "NT" GEMM. On the CPU (MKL / oneDNN) an NT
GEMM with 5 or more rows costs about twice a single row (as if W were repacked first), while
the same product with W stored column-major (the memory of Wᵀ = [in, out] contiguous, i.e. W
with stride (1, out)) is an "NN" GEMM that, measured, scales far better with T. Decode (T = 1)
is a GEMV either way; verifying a draft is the small-T case.

Measured on the 2-core development CPU (`make bench-layout`, docs/benchmarks.md): SmolLM2-135M
verify of 5 tokens 112 → 72 ms with one thread; Qwen2.5-Coder-1.5B verify of 8 tokens 658 →
449 ms with two — but the 1.5B's verify of 2–3 tokens gets slower (276 → 404 ms), so this is a
trade that favours the longer drafts. The values are unchanged — only the strides are — so every
module that reads the weight (transformers' own forward included) computes the same thing.
"""

from __future__ import annotations

import torch


def is_column_major(weight: torch.Tensor) -> bool:
    return weight.dim() == 2 and weight.stride() == (1, weight.shape[0])


def to_column_major(weight: torch.Tensor) -> torch.Tensor:
    """The same [out, in] values stored as [in, out] contiguous memory (a transposed view)."""
    return weight if is_column_major(weight) else weight.t().contiguous().t()


def prefer_column_major(model: torch.nn.Module) -> int:
    """Re-store every 2-D linear weight of ``model`` (LM head included, tied embeddings with it:
    an embedding lookup reads rows of a column-major table correctly, only strided) column-major,
    in place; returns how many tensors changed. Only worth it on the CPU; call it there."""
    changed = 0
    seen: set[int] = set()
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or id(module.weight) in seen:
            continue
        seen.add(id(module.weight))
        if not is_column_major(module.weight):
            with torch.no_grad():
                module.weight.data = to_column_major(module.weight.data)
            changed += 1
    return changed

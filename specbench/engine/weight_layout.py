"""Storing linear weights in the layout the CPU's matrix multiply reads fastest for few tokens.

A linear layer computes y = x Wᵀ with x [T, in] and W [out, in]. torch keeps W row-major
([out, in], stride (in, 1)), so the product is an "NT" GEMM. On the CPU (MKL / oneDNN) an NT
GEMM with 3 ≤ T ≤ 64 rows first repacks W — a full extra pass over the weights — while the
same product with W stored column-major (the memory of Wᵀ = [in, out] contiguous, i.e. W with
stride (1, out)) is an "NN" GEMM that streams the weights once. Decode (T = 1) is a GEMV and
unaffected; verification of a few draft tokens is exactly the small-T case.

Measured on the 2-core development CPU, SmolLM2-135M, one thread, context 256: verify of 5
tokens 107.6 → 73.9 ms and of 8 tokens 142.3 → 88.8 ms, decode 58.0 → 49.8 ms
(docs/benchmarks.md, "Roofline"). The values are unchanged — only the strides are — so every
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

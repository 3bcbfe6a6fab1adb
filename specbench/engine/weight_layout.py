"""Storing linear weights in the layout the CPU's matrix multiply handles best for their dtype.

A linear layer computes y = x Wᵀ with x [T, in] and W [out, in]. torch keeps W row-major
([out, in], stride (in, 1)), so the product is an "NT" GEMM.

float32. On the CPU (MKL / oneDNN) an NT GEMM with 5 or more rows costs about twice a single
row (as if W were repacked first), while the same product with W stored column-major (the
memory of Wᵀ = [in, out] contiguous, i.e. W with stride (1, out)) is an "NN" GEMM that,
measured, scales far better with T. Decode (T = 1) is a GEMV either way; verifying a draft is
the small-T case. Measured on the 2-core development CPU (`make bench-layout`,
docs/benchmarks.md): SmolLM2-135M verify of 5 tokens 112 → 72 ms with one thread;
Qwen2.5-Coder-1.5B verify of 8 tokens 658 → 449 ms with two — but the 1.5B's verify of 2–3
tokens gets slower (276 → 404 ms), so this is a trade that favours the longer drafts.

bfloat16 / float16. On a CPU without a native 16-bit GEMM (no AVX512-BF16 / AMX, e.g. the
AVX2 hosts this project runs on) torch's 16-bit product behaves as one dot product with float32
arithmetic per output element over *contiguous rows* of both operands (cost linear in the rows,
each row's result independent of the row count: both measured, torch 2.13). That needs W
row-major. A column-major 16-bit W falls into a far slower strided path, measured 5–25× slower
(SmolLM2's 49152 × 576 LM head, one token: 9 ms row-major, 172 ms column-major; this was why
`--dtype bf16` decoded 5× slower than fp32). So 16-bit weights stay (or are put back) row-major.
The dot-product form has a second property the engine relies on: every output element is the
same dot product whatever the number of rows T, so a verify forward over k tokens gives each
row bit-for-bit what a single-token forward gives (greedy losslessness holds exactly, not
only up to rounding). Its cost grows linearly with T (the weights are re-read per row).

The values are unchanged — only the strides are — so every module that reads the weight
(transformers' own forward included) computes the same thing.
"""

from __future__ import annotations

import torch

REDUCED_PRECISION = (torch.bfloat16, torch.float16)


def is_column_major(weight: torch.Tensor) -> bool:
    return weight.dim() == 2 and weight.stride() == (1, weight.shape[0])


def to_column_major(weight: torch.Tensor) -> torch.Tensor:
    """The same [out, in] values stored as [in, out] contiguous memory (a transposed view)."""
    return weight if is_column_major(weight) else weight.t().contiguous().t()


def _relayout(model: torch.nn.Module, column_major: bool) -> int:
    changed = 0
    seen: set[int] = set()
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or id(module.weight) in seen:
            continue
        seen.add(id(module.weight))
        weight = module.weight.data
        done = is_column_major(weight) if column_major else weight.is_contiguous()
        if not done:
            with torch.no_grad():
                module.weight.data = to_column_major(weight) if column_major else weight.contiguous()
            changed += 1
    return changed


def prefer_column_major(model: torch.nn.Module) -> int:
    """Re-store every 2-D linear weight of ``model`` (LM head included, tied embeddings with it:
    an embedding lookup reads rows of a column-major table correctly, only strided) column-major,
    in place; returns how many tensors changed. Only worth it on the CPU, in float32."""
    return _relayout(model, column_major=True)


def prefer_row_major(model: torch.nn.Module) -> int:
    """Re-store every linear weight row-major (contiguous [out, in]), in place; returns how many
    tensors changed."""
    return _relayout(model, column_major=False)


def cpu_layout_for(dtype: torch.dtype) -> str:
    """The weight layout whose product is fastest on the CPU for ``dtype`` (see above)."""
    return "row-major" if dtype in REDUCED_PRECISION else "column-major"


def apply_cpu_layout(model: torch.nn.Module) -> str:
    """Store ``model``'s linear weights in `cpu_layout_for` its dtype; returns the layout's name."""
    layout = cpu_layout_for(next(model.parameters()).dtype)
    (prefer_row_major if layout == "row-major" else prefer_column_major)(model)
    return layout

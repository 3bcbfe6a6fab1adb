"""Storing linear weights in the layout, and computing them in the form, the CPU handles best.

A linear layer computes y = x Wᵀ with x [N, in] and W [out, in]: N = 1 in a decode step, N = k in
a verify step over k tokens, N = prompt length in a prefill.

float32, measured on the 2-core AMD EPYC (AVX2, MKL 2024.2) this project runs on
(`make bench-layout`, docs/benchmarks.md "Engine speed, third step"):

* ``F.linear`` (x · Wᵀ) costs about one pass over W per row of x whatever W's layout: an NT GEMM
  from a row-major W, an NN GEMM from a column-major one (W with stride (1, out), the memory of
  Wᵀ = [in, out] contiguous). Qwen2.5-Coder-1.5B's 28 MLP up-projections, 2 threads
  (`scripts/bench_product_forms.py`): 91 ms at N = 1, 175 ms at N = 2, 294 ms at N = 5 (column-major).
* The same product computed weight-first, y = (W · xᵀ)ᵀ, from a *row-major* W streams W about once
  for any small N: 110 ms at N = 2, 137 ms at N = 5. From a column-major W that operand order
  is 5–20× slower. So every float32 weight is stored row-major and computed weight-first for
  2 ≤ N ≤ 64 (`linear`). Above that (a prefill) x · Wᵀ is as fast as the NN GEMM and weight-first
  15–35 % slower (N = 512), so long inputs go through ``F.linear``.
* At N = 1 (a matrix-vector product) what counts is the length of W's contiguous runs: a W wider
  than deep (in < out: the MLP's gate and up, the LM head) reads fastest column-major (runs of
  length out; the 1.5B's 28 up-projections 91 ms vs 128 ms row-major), any other row-major. So those
  wide matrices also keep a column-major copy for single rows (`single_row_weight`), and the LM
  head — computed one row at a time by the lazy chain verifier (`verify_chain_rows`) — is stored
  column-major only. The copies cost memory: about +50 % of the weights of a Llama-family model
  (Qwen2.5-Coder-1.5B: 6.2 → 9.3 GB in float32); in exchange decode costs what it did with the
  column-major layout, and the 1.5B's verify step over 5 tokens ~1.5× a decode step instead of ~2.3×.

bfloat16 / float16. On a CPU without a native 16-bit GEMM (no AVX512-BF16 / AMX, e.g. the
AVX2 hosts this project runs on) torch's 16-bit product behaves as one dot product with float32
arithmetic per output element over *contiguous rows* of both operands (cost linear in the rows,
each row's result independent of the row count: both measured, torch 2.13). That needs W
row-major. A column-major 16-bit W falls into a far slower strided path, measured 5–25× slower
(SmolLM2's 49152 × 576 LM head, one token: 9 ms row-major, 172 ms column-major; this was why
`--dtype bf16` decoded 5× slower than fp32). So 16-bit weights stay (or are put back) row-major
and go through ``F.linear``. The dot-product form has a second property the engine relies on:
every output element is the same dot product whatever the number of rows N, so a verify forward
over k tokens gives each row bit-for-bit what a single-token forward gives (greedy losslessness
holds exactly, not only up to rounding). Its cost grows linearly with N.

The values are unchanged — only the strides are — so every module that reads the weight
(transformers' own forward included) computes the same thing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

REDUCED_PRECISION = (torch.bfloat16, torch.float16)
SINGLE_ROW_ATTR = "single_row_weight"  # (weight data_ptr, weight version, column-major copy)
# above this many rows (a prefill) x · Wᵀ is as fast as any form and weight-first 15–35 % slower (N = 512)
WEIGHT_FIRST_MAX_ROWS = 64


def is_column_major(weight: torch.Tensor) -> bool:
    return weight.dim() == 2 and weight.stride() == (1, weight.shape[0])


def to_column_major(weight: torch.Tensor) -> torch.Tensor:
    """The same [out, in] values stored as [in, out] contiguous memory (a transposed view)."""
    return weight if is_column_major(weight) else weight.t().contiguous().t()


def _relayout(model: torch.nn.Module, column_major) -> int:
    """Store each linear weight column-major where ``column_major(module)`` says so, else row-major,
    in place; drops single-row copies that are stale or that a column-major weight does not need.
    Returns how many tensors changed."""
    changed = 0
    seen: set[int] = set()
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or id(module.weight) in seen:
            continue
        seen.add(id(module.weight))
        weight, want_column = module.weight.data, column_major(module)
        if not (is_column_major(weight) if want_column else weight.is_contiguous()):
            with torch.no_grad():
                module.weight.data = to_column_major(weight) if want_column else weight.contiguous()
            changed += 1
        if hasattr(module, SINGLE_ROW_ATTR) and (want_column or single_row_weight(module) is None):
            delattr(module, SINGLE_ROW_ATTR)
    return changed


def prefer_column_major(model: torch.nn.Module) -> int:
    """Re-store every 2-D linear weight of ``model`` (LM head included, tied embeddings with it:
    an embedding lookup reads rows of a column-major table correctly, only strided) column-major,
    in place; returns how many tensors changed (the layout before `apply_cpu_layout`'s, kept for
    comparisons: `make bench-layout`, and transformers' fastest float32 layout in `make bench-engine`)."""
    return _relayout(model, lambda module: True)


def prefer_row_major(model: torch.nn.Module) -> int:
    """Re-store every linear weight row-major (contiguous [out, in]), in place; returns how many
    tensors changed."""
    return _relayout(model, lambda module: False)


def single_row_weight(module: torch.nn.Module) -> torch.Tensor | None:
    """The column-major copy of ``module``'s weight for one-row products, if it has one and the
    weight has not been replaced or modified in place since it was made."""
    copy = getattr(module, SINGLE_ROW_ATTR, None)
    if copy is None:
        return None
    pointer, version, tensor = copy
    if torch.compiler.is_compiling():  # a traced step: no pointer checks (weights are fixed while compiled)
        return tensor
    weight = module.weight
    return tensor if (weight.data_ptr(), weight._version) == (pointer, version) else None


def _add_single_row_copy(module: torch.nn.Linear) -> None:
    weight = module.weight
    if single_row_weight(module) is None:
        setattr(module, SINGLE_ROW_ATTR, (weight.data_ptr(), weight._version, to_column_major(weight.data)))


def cpu_layout_for(dtype: torch.dtype) -> str:
    """The weight layout whose products are fastest on the CPU for ``dtype`` (see above)."""
    if dtype in REDUCED_PRECISION:
        return "row-major"
    return "row-major, weight-first products; column-major LM head and single-row copies of wide matrices"


def apply_cpu_layout(model: torch.nn.Module) -> str:
    """Store ``model``'s linear weights in `cpu_layout_for` its dtype (idempotent); returns its name."""
    dtype = next(model.parameters()).dtype
    if dtype in REDUCED_PRECISION:
        prefer_row_major(model)
        return cpu_layout_for(dtype)
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    _relayout(model, lambda module: module is head)
    for name, module in model.named_modules():
        # not a sparse MoE block's experts: they run through their own forward, which never reads a copy
        if (isinstance(module, torch.nn.Linear) and module is not head and ".experts." not in name
                and module.in_features < module.out_features):
            _add_single_row_copy(module)
    return cpu_layout_for(dtype)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           single_row: torch.Tensor | None = None) -> torch.Tensor:
    """y = x Wᵀ + b for x [..., in], W [out, in]: y [..., out], in the form this CPU computes fastest.

    One row with a ``single_row`` copy (column-major W, `single_row_weight`): ``F.linear`` on it.
    2 ≤ N ≤ WEIGHT_FIRST_MAX_ROWS rows and a float32 row-major W on the CPU: weight-first,
    W [out, in] · xᵀ [in, N] = [out, N], transposed back (the same sums in another order; one pass of
    W for any small N). Everything else (a prefill, GPU, 16-bit, column-major W, one row without a
    copy): ``F.linear``."""
    rows = x.numel() // x.shape[-1]
    if rows == 1:
        return F.linear(x, weight if single_row is None else single_row, bias)
    if (rows > WEIGHT_FIRST_MAX_ROWS or x.device.type != "cpu" or x.dtype != torch.float32 or weight.dim() != 2
            or not weight.is_contiguous()):
        return F.linear(x, weight, bias)
    flat_t = x.reshape(rows, x.shape[-1]).t()  # [in, N]
    out = torch.mm(weight, flat_t) if bias is None else torch.addmm(bias.unsqueeze(1), weight, flat_t)  # [out, N]
    return out.t().contiguous().view(*x.shape[:-1], weight.shape[0])

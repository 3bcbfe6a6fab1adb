"""Storing linear weights in the layout, and computing them in the form, the CPU handles best.

A linear layer computes y = x Wᵀ with x [N, in] and W [out, in]: N = 1 in a decode step, N = k in
a verify step over k tokens, N = prompt length in a prefill.

float32, measured on a 2-core AMD EPYC with AVX2 only (MKL 2024.2)
(`make bench-layout`, docs/bench-engine-steps.md "Engine speed, third step"):

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

On a CPU with AVX-512 the picture changes again (AMD EPYC Zen 5, AVX512-BF16, measured in
docs/bench-engine-steps.md "Engine speed, fourth step"): torch sends a bfloat16 product of two or more rows
to oneDNN, whose cost barely grows with the rows, and a single row to a separate matrix-vector kernel.
The two kernels sum in different orders, so a verify row no longer equals a decode row bit for bit
(SmolLM2's 576 × 1536 down projection at k = 5, 6, 8; every Qwen2.5-1.5B MLP shape). Computing a
single row as two (the second zero, `CpuLayout.two_row`) sends it through the same oneDNN kernel, and
the rows are bit-identical again for every k measured (2–33). Which of these holds is a property of
the machine, so the engine measures it (`specbench.engine.cpu.layout_probe`) rather than assuming it.
One more trap on that CPU: a single row handed to ``F.linear`` as a 3-D view of a longer tensor (a
verify row for the lazy LM head, the last position of a prefill) took a path ~25× slower in bfloat16
(SmolLM2's LM head: 126 ms against 5 ms), so `linear` always computes on a flat [N, in] input.

oneDNN's packed products (measured on the AVX-512 EPYC, docs/bench-engine-steps.md "Engine speed, fifth step"). Both
forms above still call a general GEMM (MKL for float32) that is tuned for many rows: on that CPU a five-row
float32 product from a plain weight cost 2.5–3.5× a one-row one (SmolLM2's 1536 × 576 up projection: 0.08 ms
at N = 1, 0.27 ms at N = 5; its 49152 × 576 LM head 11 ms and 22 ms), so a verify step over 5 tokens cost 1.3–1.4×
a decode step. oneDNN's inner-product primitive, fed a weight re-ordered once into its own blocked format
(``torch.ops.mkldnn._reorder_linear_weight``; torch's inductor does the same when it freezes a graph), streams
the weight once for every row count we run and uses the CPU's widest vectors: the same up projection 0.07 ms at
N = 1 and N = 5, the LM head 5.3 and 5.8 ms, and 2.5× faster than MKL at N = 64 (a prefill chunk). The `packed`
layouts keep that copy beside each weight (`packed_weight`; the weights' memory doubles, the plain tensor
stays for every module that reads it: the embedding lookup of a tied head, transformers' forward, drafters)
and run every product through ``torch.ops.mkldnn._linear_pointwise``. Its rows are not always bit-identical
across row counts (a 576 × 1536 product at N = 1 against N = 8 in float32), so 16-bit packed layouts face the
probe's exact-rows check like every other.

`CpuLayout` names one way of storing and computing the weights; `LAYOUTS` lists the candidates the
probe may choose, `default_layout` is what a decoder uses when nobody measured.

The values are unchanged — only the strides are — so every module that reads the weight
(transformers' own forward included) computes the same thing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F

from specbench.engine.cpu.cpu_info import cpu_features, onednn_16bit
from specbench.errors import SpecbenchError

REDUCED_PRECISION = (torch.bfloat16, torch.float16)
SINGLE_ROW_ATTR = "single_row_weight"  # (weight data_ptr, weight version, column-major copy)
PACKED_ATTR = "packed_weight"  # (weight data_ptr, weight version, oneDNN blocked copy)
# above this many rows (a prefill) x · Wᵀ is as fast as any form and weight-first 15–35 % slower (N = 512)
WEIGHT_FIRST_MAX_ROWS = 64
DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class CpuLayout:
    """How the CPU engine stores its linear weights and computes their products.

    column_major: which weights are stored column-major: "none", "head" (the LM head) or "all".
    weight_first: products of 2..WEIGHT_FIRST_MAX_ROWS rows computed (W · xᵀ)ᵀ from a row-major W.
    single_row_copies: wide matrices (in < out, not the head) keep a column-major copy for one-row products.
    two_row: a one-row product (without a copy) is computed as two rows, the second zero, so that it runs
        the kernel a verify step's products run (see the module docstring).
    lazy_head: chain verification computes the LM head one row at a time, only for the rows whose
        acceptance is decided (`verify_chain_rows`); else all rows in one product.
    upcast_prefill: a 16-bit prefill into an empty cache computes its products in float32.
    packed: every linear weight keeps a copy in oneDNN's blocked format and every product, of any row count,
        runs through oneDNN (`packed_weight`, `linear`); the other product settings then apply to nothing.
    """

    name: str
    column_major: str = "none"
    weight_first: bool = False
    single_row_copies: bool = False
    two_row: bool = False
    lazy_head: bool = True
    upcast_prefill: bool = False
    packed: bool = False

    def describe(self) -> str:
        """The name with the head and prefill settings, e.g. ``row-major two-row, batched head``."""
        parts = [self.name, "lazy head" if self.lazy_head else "batched head"]
        if self.upcast_prefill:
            parts.append("float32 prefill")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return asdict(self)


MIXED = CpuLayout("mixed", column_major="head", weight_first=True, single_row_copies=True)
ROW_MAJOR_WEIGHT_FIRST = CpuLayout("row-major weight-first", weight_first=True)
COLUMN_MAJOR = CpuLayout("column-major", column_major="all")
ROW_MAJOR = CpuLayout("row-major")
ROW_MAJOR_TWO_ROW = CpuLayout("row-major two-row", two_row=True)
PACKED = CpuLayout("onednn-packed", packed=True)
PACKED_TWO_ROW = CpuLayout("onednn-packed two-row", packed=True, two_row=True)
LAYOUTS = {
    layout.name: layout
    for layout in (MIXED, ROW_MAJOR_WEIGHT_FIRST, COLUMN_MAJOR, ROW_MAJOR, ROW_MAJOR_TWO_ROW, PACKED, PACKED_TWO_ROW)
}


def onednn_packing() -> bool:
    """Whether this torch can re-order a linear weight for oneDNN and run products from it on the CPU
    (`cpu_info.CpuFeatures.onednn`)."""
    return cpu_features().onednn


def layout_refusal(layout: CpuLayout, dtype: torch.dtype) -> str | None:
    """Why this CPU cannot run ``layout`` for weights of ``dtype``, naming the feature it lacks; None when it
    can. Asked before a layout is built (`apply_layout`), chosen (`candidate_layouts`, a cached probe entry)
    or accepted from a user (`layout_probe.check_cpu_settings`)."""
    if not layout.packed:
        return None
    features = cpu_features()
    missing = features.packing_refusal(DTYPE_NAMES.get(dtype, str(dtype)))
    if missing is None:
        return None
    have = ", ".join(features.named()) or "none of AVX2, AVX-512, AMX"
    return f"layout {layout.name} in {DTYPE_NAMES.get(dtype, dtype)} needs {missing}; this CPU ({features.model}: {have}) lacks it"


def candidate_layouts(dtype: torch.dtype) -> list[CpuLayout]:
    """The layouts the probe tries for weights of ``dtype`` on this CPU.

    float32: the mix (`MIXED`), row-major weight-first, column-major, and oneDNN-packed where torch has
    oneDNN. 16 bits: row-major, row-major two-row, row-major weight-first, and column-major and the two
    oneDNN-packed layouts only where oneDNN's kernels for the dtype are native (elsewhere a column-major
    16-bit product was measured 5–25× slower: the module docstring)."""
    if dtype not in REDUCED_PRECISION:
        layouts = [MIXED, ROW_MAJOR_WEIGHT_FIRST, COLUMN_MAJOR, PACKED]
    else:
        native = onednn_16bit(DTYPE_NAMES[dtype])
        layouts = [ROW_MAJOR, ROW_MAJOR_TWO_ROW, ROW_MAJOR_WEIGHT_FIRST] + (
            [COLUMN_MAJOR, PACKED, PACKED_TWO_ROW] if native else []
        )
    return [layout for layout in layouts if layout_refusal(layout, dtype) is None]


def default_layout(dtype: torch.dtype) -> CpuLayout:
    """The layout a CPU decoder uses unless told otherwise (nothing measured): the mix for float32;
    for 16 bits row-major, two-row where torch's multi-row product is oneDNN's (so that verify rows
    stay bit-identical to decode rows), and a float32 prefill where it is not (its cost is linear in
    the rows there)."""
    if dtype not in REDUCED_PRECISION:
        return MIXED
    if onednn_16bit(DTYPE_NAMES[dtype]):
        return ROW_MAJOR_TWO_ROW
    return replace(ROW_MAJOR, upcast_prefill=True)


def layout_named(name: str, dtype: torch.dtype) -> CpuLayout:
    """A layout forced by name, with the head and prefill settings of `default_layout` for ``dtype``."""
    base = default_layout(dtype)
    return replace(LAYOUTS[name], lazy_head=base.lazy_head, upcast_prefill=base.upcast_prefill)


def is_column_major(weight: torch.Tensor) -> bool:
    return weight.dim() == 2 and weight.stride() == (1, weight.shape[0])


def to_column_major(weight: torch.Tensor) -> torch.Tensor:
    """The same [out, in] values stored as [in, out] contiguous memory (a transposed view)."""
    return weight if is_column_major(weight) else weight.t().contiguous().t()


def _relayout(model: torch.nn.Module, column_major) -> int:
    """Store each linear weight column-major where ``column_major(module)`` says so, else row-major,
    in place; drops copies (single-row, packed) that are stale, and single-row copies that a column-major
    weight does not need. Returns how many tensors changed."""
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
        for attr in (SINGLE_ROW_ATTR, PACKED_ATTR):
            unneeded = attr == SINGLE_ROW_ATTR and want_column
            if hasattr(module, attr) and (unneeded or _fresh_copy(module, attr) is None):
                delattr(module, attr)
    return changed


def prefer_column_major(model: torch.nn.Module) -> int:
    """Re-store every 2-D linear weight of ``model`` (LM head included, tied embeddings with it:
    an embedding lookup reads rows of a column-major table correctly, only strided) column-major,
    in place; returns how many tensors changed (transformers' fastest float32 layout on the AVX2 EPYC,
    used for it in `make bench-engine`; `COLUMN_MAJOR` for the engine)."""
    return _relayout(model, lambda module: True)


def prefer_row_major(model: torch.nn.Module) -> int:
    """Re-store every linear weight row-major (contiguous [out, in]), in place; returns how many
    tensors changed."""
    return _relayout(model, lambda module: False)


def _fresh_copy(module: torch.nn.Module, attr: str) -> torch.Tensor | None:
    """The copy of ``module``'s weight kept under ``attr``, if it has one and the weight has not been
    replaced or modified in place since it was made."""
    copy = getattr(module, attr, None)
    if copy is None:
        return None
    pointer, version, tensor = copy
    if torch.compiler.is_compiling():  # a traced step: no pointer checks (weights are fixed while compiled)
        return tensor
    weight = module.weight
    return tensor if (weight.data_ptr(), weight._version) == (pointer, version) else None


def single_row_weight(module: torch.nn.Module) -> torch.Tensor | None:
    """The column-major copy of ``module``'s weight for one-row products (fresh, `_fresh_copy`), or None."""
    return _fresh_copy(module, SINGLE_ROW_ATTR)


def packed_weight(module: torch.nn.Module) -> torch.Tensor | None:
    """The oneDNN blocked copy of ``module``'s weight (fresh, `_fresh_copy`), or None."""
    return _fresh_copy(module, PACKED_ATTR)


def _keep_copy(module: torch.nn.Linear, attr: str, wanted: bool, make) -> None:
    """Give ``module`` a fresh copy of its weight under ``attr`` (``make(weight)``) when ``wanted``, else none."""
    if not wanted:
        if hasattr(module, attr):
            delattr(module, attr)
        return
    weight = module.weight
    if _fresh_copy(module, attr) is None:
        setattr(module, attr, (weight.data_ptr(), weight._version, make(weight.data)))


def pack_for_onednn(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` [out, in] re-ordered into oneDNN's blocked format for products of any row count; a dtype this
    CPU's oneDNN cannot run is refused in one line naming the missing feature (`cpu_info`)."""
    refusal = layout_refusal(PACKED, weight.dtype)
    if refusal is not None:
        raise SpecbenchError(refusal)
    return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), None)


def apply_layout(model: torch.nn.Module, layout: CpuLayout) -> CpuLayout:
    """Store ``model``'s linear weights as ``layout`` says, in place (idempotent); returns ``layout``."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None

    def column_major(module) -> bool:
        return layout.column_major == "all" or (layout.column_major == "head" and module is head)

    refusal = layout_refusal(layout, next(model.parameters()).dtype)
    if refusal is not None:  # before any weight moves: the model stays as it was
        raise SpecbenchError(refusal)
    _relayout(model, column_major)
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        # not a sparse MoE block's experts: they run through their own forward, which never reads a copy
        engine_run = ".experts." not in name
        _keep_copy(
            module,
            SINGLE_ROW_ATTR,
            layout.single_row_copies
            and engine_run
            and module is not head
            and module.in_features < module.out_features
            and not column_major(module),
            to_column_major,
        )
        _keep_copy(module, PACKED_ATTR, layout.packed and engine_run, pack_for_onednn)
    return layout


def cpu_layout_for(dtype: torch.dtype) -> str:
    """The description of `default_layout` for ``dtype`` on this CPU."""
    return default_layout(dtype).describe()


def apply_cpu_layout(model: torch.nn.Module) -> str:
    """Store ``model``'s linear weights in `default_layout` for its dtype (idempotent); returns its description."""
    return apply_layout(model, default_layout(next(model.parameters()).dtype)).describe()


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    single_row: torch.Tensor | None = None,
    *,
    weight_first: bool = True,
    two_row: bool = False,
    packed: torch.Tensor | None = None,
) -> torch.Tensor:
    """y = x Wᵀ + b for x [..., in], W [out, in]: y [..., out], in the form a `CpuLayout` asks for.

    A ``packed`` copy (oneDNN's blocked W, `packed_weight`) on the CPU: oneDNN's product for any N (one
    row with ``two_row`` as [x; 0], first row kept); not inside a graph torch.compile traces (inductor's
    lowering of that op rejects a weight packed outside the graph; it lowers the plain forms itself). One row with a ``single_row`` copy (column-major W, `single_row_weight`): ``F.linear`` on it. One
    row with ``two_row``: ``F.linear`` over [x; 0] [2, in], first row kept (the multi-row kernel, whose
    rows a verify step shares). 2 ≤ N ≤ WEIGHT_FIRST_MAX_ROWS rows, ``weight_first`` and a row-major W
    on the CPU: weight-first, W [out, in] · xᵀ [in, N] = [out, N], transposed back (the same sums in
    another order; one pass of W for any small N). Everything else (a prefill, GPU, column-major W):
    ``F.linear``."""
    rows = x.numel() // x.shape[-1]
    flat = x.reshape(rows, x.shape[-1])  # [N, in]: a 3-D row view (a verify row, the last position) sent to
    # F.linear as it is takes a path ~25x slower for bf16 on the AVX-512 EPYC (SmolLM2's head: 126 vs 5 ms)
    if packed is not None and x.device.type == "cpu" and not torch.compiler.is_compiling():
        if rows == 1 and two_row:
            flat = torch.cat([flat, flat.new_zeros(1, flat.shape[1])])  # [2, in]
        out = torch.ops.mkldnn._linear_pointwise(flat, packed, bias, "none", [], "")[:rows]  # [N, out]
    elif rows == 1:
        if single_row is not None:
            out = F.linear(flat, single_row, bias)
        elif two_row and x.device.type == "cpu":
            out = F.linear(torch.cat([flat, flat.new_zeros(1, flat.shape[1])]), weight, bias)[:1]  # [2, in] -> [1, out]
        else:
            out = F.linear(flat, weight, bias)
    elif (
        not weight_first
        or rows > WEIGHT_FIRST_MAX_ROWS
        or x.device.type != "cpu"
        or weight.dim() != 2
        or not weight.is_contiguous()
    ):
        out = F.linear(flat, weight, bias)
    else:
        flat_t = flat.t()  # [in, N]
        out = (
            torch.mm(weight, flat_t) if bias is None else torch.addmm(bias.unsqueeze(1), weight, flat_t)
        ).t()  # [N, out]
    return out.contiguous().view(*x.shape[:-1], out.shape[-1])

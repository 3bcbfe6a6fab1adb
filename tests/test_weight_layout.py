"""Column-major linear weights on the CPU (specbench.engine.cpu.weight_layout): same values, same
outputs, tied embeddings stay tied, and the native decoder applies it."""

from __future__ import annotations

import pytest
import torch

from specbench.engine.cpu.weight_layout import (
    PACKED,
    apply_cpu_layout,
    is_column_major,
    layout_refusal,
    linear,
    onednn_packing,
    packed_weight,
    prefer_column_major,
    single_row_weight,
)

needs_onednn = pytest.mark.skipif(not onednn_packing(), reason="this torch has no oneDNN")


def packable(dtype):
    """The parameter ``dtype``, skipped (with the missing feature as the reason) where this CPU cannot pack it."""
    refusal = layout_refusal(PACKED, dtype)
    return pytest.param(
        dtype, id=str(dtype).removeprefix("torch."), marks=pytest.mark.skipif(refusal is not None, reason=refusal or "")
    )


def _row_major_copy(model):
    import copy

    twin = copy.deepcopy(model)
    for module in twin.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight.data = module.weight.data.contiguous()
    return twin


def test_layout_changes_strides_not_values_or_outputs():
    from specbench.models.resolve import load_model

    model = load_model("tiny-random-llama").model
    reference = _row_major_copy(model)
    assert not any(is_column_major(m.weight) for m in reference.modules() if isinstance(m, torch.nn.Linear))
    changed = prefer_column_major(reference)
    assert changed > 0
    linears = [m for m in reference.modules() if isinstance(m, torch.nn.Linear)]
    assert all(is_column_major(m.weight) for m in linears)
    assert prefer_column_major(reference) == 0  # idempotent
    row = _row_major_copy(model)
    for a, b in zip(row.parameters(), reference.parameters()):
        assert torch.equal(a, b)
    ids = torch.randint(0, model.config.vocab_size, (1, 12))
    with torch.no_grad():
        torch.testing.assert_close(reference(ids).logits, row(ids).logits, rtol=1e-4, atol=1e-5)


def test_tied_head_stays_tied_and_native_decoder_applies_it(smollm2):
    model = smollm2.model
    from specbench.engine.decoder import NativeDecoder

    NativeDecoder(model)
    head, embed = model.get_output_embeddings().weight, model.get_input_embeddings().weight
    assert head is embed  # still one parameter: no second copy of the 49152 × 576 table
    assert is_column_major(head)  # the LM head: one-row products (lazy verification) read it fastest so
    mlp = model.model.layers[0].mlp
    assert mlp.down_proj.weight.is_contiguous() and mlp.up_proj.weight.is_contiguous()  # weight-first
    assert single_row_weight(mlp.up_proj) is not None and single_row_weight(mlp.down_proj) is None
    assert torch.equal(single_row_weight(mlp.up_proj), mlp.up_proj.weight) and is_column_major(
        single_row_weight(mlp.up_proj)
    )


def test_linear_forms_match_f_linear_for_every_row_count_and_layout():
    """`linear` (weight-first for N >= 2, the single-row copy for N = 1) computes x Wᵀ + b."""
    torch.manual_seed(0)
    weight, bias = torch.randn(96, 40), torch.randn(96)
    for rows in (1, 2, 3, 5, 8, 33):
        x = torch.randn(1, rows, 40)
        expected = torch.nn.functional.linear(x, weight, bias)
        for w, copy in ((weight, None), (weight, weight.t().contiguous().t()), (weight.t().contiguous().t(), None)):
            for b in (bias, None):
                got = linear(x, w, b, copy)
                assert got.shape == (1, rows, 96) and got.is_contiguous()
                torch.testing.assert_close(got, expected - (0 if b is not None else bias), rtol=1e-5, atol=1e-5)


def test_single_row_copy_is_dropped_when_the_weight_changes():
    from specbench.models.resolve import load_model

    model = load_model("tiny-random-llama").model
    apply_cpu_layout(model)
    up = model.model.layers[0].mlp.up_proj
    assert single_row_weight(up) is not None
    with torch.no_grad():
        up.weight.add_(1.0)  # in place: the copy is stale and must not be used
    assert single_row_weight(up) is None
    apply_cpu_layout(model)  # re-made from the new values
    assert torch.equal(single_row_weight(up), up.weight)
    prefer_column_major(model)  # the previous layout: no copies
    assert not hasattr(up, "single_row_weight")


def test_every_candidate_layout_stores_what_it_names_and_keeps_the_values():
    """`apply_layout` for each `CpuLayout`: which weights are column-major, which keep single-row copies, the
    tied head stays tied, the values and the model's outputs do not change, and it is idempotent."""
    from specbench.engine.cpu.weight_layout import LAYOUTS, apply_layout
    from specbench.models.resolve import load_model

    model = load_model("tiny-random-llama").model
    reference = _row_major_copy(model)
    ids = torch.randint(0, model.config.vocab_size, (1, 12))
    with torch.no_grad():
        expected = reference(ids).logits
    head = model.get_output_embeddings()
    for layout in LAYOUTS.values():
        if layout.packed and not onednn_packing():
            continue
        apply_layout(model, layout)
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        for m in linears:
            column = layout.column_major == "all" or (layout.column_major == "head" and m is head)
            assert is_column_major(m.weight) if column else m.weight.is_contiguous(), (layout.name, m)
            wants_copy = layout.single_row_copies and m is not head and m.in_features < m.out_features
            assert (single_row_weight(m) is not None) == wants_copy, (layout.name, m)
            assert (packed_weight(m) is not None) == layout.packed, (layout.name, m)
        assert head.weight is model.get_input_embeddings().weight
        for a, b in zip(model.parameters(), reference.parameters()):
            assert torch.equal(a, b)
        with torch.no_grad():
            torch.testing.assert_close(model(ids).logits, expected, rtol=1e-4, atol=1e-5)
        strides = [m.weight.stride() for m in linears]
        apply_layout(model, layout)
        assert [m.weight.stride() for m in linears] == strides


def test_two_row_products_equal_the_multi_row_kernel_rows():
    """`linear(..., two_row=True)` on one row gives what F.linear gives it (up to rounding) and, in bf16, bit for
    bit the row a multi-row product computes — the property that keeps 16-bit verify rows exact."""
    torch.manual_seed(0)
    for dtype, shape in [(torch.float32, (96, 40)), (torch.bfloat16, (576, 1536)), (torch.bfloat16, (1536, 576))]:
        weight, bias = (torch.randn(*shape) * 0.05).to(dtype), torch.randn(shape[0]).to(dtype)
        rows = (torch.randn(1, 6, shape[1]) * 1.3).to(dtype)
        for b in (None, bias):
            single = linear(rows[:, 2:3], weight, b, two_row=True)
            assert single.shape == (1, 1, shape[0])
            torch.testing.assert_close(
                single.float(), torch.nn.functional.linear(rows[:, 2:3], weight, b).float(), rtol=2e-2, atol=2e-2
            )
            if dtype == torch.bfloat16:
                many = linear(rows, weight, b, weight_first=False)
                assert torch.equal(
                    torch.cat([linear(rows[:, i : i + 1], weight, b, two_row=True) for i in range(6)], 1), many
                )


@pytest.mark.parametrize("dtype", [packable(torch.float32), packable(torch.bfloat16)])
def test_packed_products_match_f_linear_for_every_row_count(dtype):
    """`linear` from a oneDNN-packed weight computes x Wᵀ + b for 1..64 rows (and 512: a prefill), as one row,
    as two rows (``two_row``) and from a 3-D row view, in float32 and bfloat16 (each where this CPU's oneDNN
    runs it: bfloat16 needs AVX-512 or AVX-NE-CONVERT, `cpu_info`)."""
    from specbench.engine.cpu.weight_layout import pack_for_onednn

    torch.manual_seed(0)
    tolerance = {torch.float32: 1e-4, torch.bfloat16: 3e-2}[dtype]
    weight, bias = (torch.randn(96, 40) * 0.2).to(dtype), torch.randn(96).to(dtype)
    packed = pack_for_onednn(weight)
    for rows in (1, 2, 5, 8, 64, 512):
        x = torch.randn(1, rows + 3, 40).to(dtype)[:, 3:]  # a view into a longer tensor
        for b in (bias, None):
            expected = torch.nn.functional.linear(x.float(), weight.float(), None if b is None else b.float())
            for two_row in (False, True):
                got = linear(x, weight, b, packed=packed, two_row=two_row)
                assert got.shape == (1, rows, 96) and got.dtype == dtype and got.is_contiguous()
                torch.testing.assert_close(got.float(), expected, rtol=tolerance, atol=tolerance)


@needs_onednn
def test_packed_copy_follows_the_weight_and_leaves_with_the_layout():
    """A packed copy made by `apply_layout` is used while the weight is unchanged, dropped when it is changed in
    place, re-made by the next `apply_layout`, and removed by a layout without packing; the decoder's outputs in
    the packed layout equal the row-major ones up to rounding."""
    from specbench.engine.cpu.weight_layout import LAYOUTS, apply_layout
    from specbench.engine.decoder import NativeDecoder
    from specbench.models.resolve import load_model

    model = load_model("tiny-random-llama").model
    decoder = NativeDecoder(model)
    ids = torch.randint(0, model.config.vocab_size, (1, 9))
    decoder.use_layout(LAYOUTS["row-major weight-first"])
    decoder.reset(1, 16)
    expected = decoder.forward(ids).logits  # [1, 9, V]
    decoder.use_layout(LAYOUTS["onednn-packed"])
    up = model.model.layers[0].mlp.up_proj
    assert packed_weight(up) is not None and packed_weight(model.lm_head) is not None
    assert model.lm_head.weight is model.get_input_embeddings().weight  # the tied table itself is untouched
    decoder.reset(1, 16)
    torch.testing.assert_close(decoder.forward(ids[:, :5]).logits, expected[:, :5], rtol=1e-4, atol=1e-5)
    for i in range(5, 9):  # single-token steps after a prefill
        torch.testing.assert_close(
            decoder.forward(ids[:, i : i + 1]).logits, expected[:, i : i + 1], rtol=1e-4, atol=1e-5
        )
    with torch.no_grad():
        up.weight.mul_(2.0)
    assert packed_weight(up) is None  # stale: the plain weight is read instead
    apply_layout(model, LAYOUTS["onednn-packed"])
    assert packed_weight(up) is not None
    apply_layout(model, LAYOUTS["mixed"])
    assert not hasattr(up, "packed_weight") and not hasattr(model.lm_head, "packed_weight")
    apply_layout(model, LAYOUTS["onednn-packed"])
    prefer_column_major(model)  # transformers' layout in `make bench-engine`: the re-stored weights' copies go too
    assert not hasattr(up, "packed_weight") and not hasattr(model.lm_head, "packed_weight")

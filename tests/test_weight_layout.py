"""Column-major linear weights on the CPU (specbench.engine.weight_layout): same values, same
outputs, tied embeddings stay tied, and the native decoder applies it."""

from __future__ import annotations

import torch

from specbench.engine.weight_layout import is_column_major, prefer_column_major


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
    assert is_column_major(head)
    assert is_column_major(model.model.layers[0].mlp.down_proj.weight)

"""16-bit weights on the CPU (`--dtype bf16`): the weight layout follows the dtype, a verify forward
gives each row bit for bit what a single-token forward gives, and so speculative greedy output
equals target-only greedy output *at bf16*, with every kind of drafter.

Cheap: a 2-layer random Llama (and, for the exact-rows check, the real SmolLM2-135M shapes).
"""

from __future__ import annotations

import pytest
import torch

from specbench.engine.cpu.cpu_info import onednn_16bit
from specbench.engine.cpu.weight_layout import (
    LAYOUTS,
    MIXED,
    candidate_layouts,
    cpu_layout_for,
    default_layout,
    is_column_major,
    prefer_column_major,
    single_row_weight,
)
from specbench.engine.decoder import NativeDecoder, TreeLayout
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.verify import verify_greedy, verify_greedy_rows

NEW_TOKENS = 48
PROMPTS = [
    "Speculative decoding keeps the output distribution.",
    "def merge_sort(xs):\n    if len(xs) <= 1:",
    "One two three, one two three, one two",
]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny16():
    from specbench.models.resolve import load_model

    return load_model("tiny-random-llama", dtype="bf16")


def _linears(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.Linear)]


def test_weight_layout_follows_the_dtype():
    """fp32 weights go row-major on the CPU with a column-major LM head (and single-row copies of wide
    matrices); 16-bit ones all row-major and no copies — also when an fp32 model laid out for the CPU was
    cast (``.to`` keeps the strides), since torch's fast 16-bit CPU product needs contiguous rows (the
    column-major one was 5–25× slower on the AVX2 EPYC: weight_layout). Where torch sends multi-row 16-bit
    products to oneDNN (AVX-512) single rows are computed as two (the same kernel, so exact rows) and the
    prefill stays in 16 bits; elsewhere (the dot-product path, cost linear in the rows) it runs in float32."""
    from specbench.models.resolve import load_model

    model = load_model("tiny-random-llama").model
    decoder = NativeDecoder(model)
    assert decoder.cpu_layout == default_layout(torch.float32) == MIXED and decoder.layout == cpu_layout_for(
        torch.float32
    )
    head = model.get_output_embeddings()
    assert is_column_major(head.weight)
    assert all(m.weight.is_contiguous() for m in _linears(model) if m is not head)
    assert any(single_row_weight(m) is not None for m in _linears(model))
    cast = model.to(torch.bfloat16)
    assert any(is_column_major(m.weight) for m in _linears(cast))
    decoder = NativeDecoder(cast)
    native = onednn_16bit("bf16")
    assert decoder.cpu_layout.name == ("row-major two-row" if native else "row-major")
    assert decoder.reduced_cpu and decoder.lazy_head and decoder.upcast_prefill == (not native)
    assert all(m.weight.is_contiguous() for m in _linears(cast))
    assert not any(hasattr(m, "single_row_weight") for m in _linears(cast))  # the fp32 copies are gone
    assert cast.get_output_embeddings().weight is cast.get_input_embeddings().weight  # still tied


def _decode_then_verify(model, prompt: torch.Tensor, tokens: torch.Tensor, layout=None):
    """(rows of one forward over ``tokens``, the same rows from one single-token forward each)."""
    decoder = NativeDecoder(model)
    if layout is not None:
        decoder.use_layout(layout)
    decoder.reset(1, prompt.shape[1] + tokens.shape[1] + 8)
    decoder.forward(prompt, logits="last")
    start = decoder.length
    singles = [decoder.forward(tokens[:, i : i + 1]) for i in range(tokens.shape[1])]
    decoder.truncate(start)
    together = decoder.forward(tokens)
    return decoder, start, together, singles


@pytest.mark.parametrize("which", ["tiny", "smollm2"])
def test_verify_rows_equal_decode_rows_bit_for_bit(tiny16, smollm2_bf16, which):
    """The root of exact bf16 losslessness: hidden states and logits of k tokens verified together
    equal, bit for bit, those of k single-token steps — for a chain and for a tree's kept path (in the
    default layout for this CPU)."""
    model = tiny16.model if which == "tiny" else smollm2_bf16.model
    gen = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prompt = torch.randint(4, vocab, (1, 20), generator=gen)
    tokens = torch.randint(4, vocab, (1, 6), generator=gen)
    decoder, start, together, singles = _decode_then_verify(model, prompt, tokens)
    assert torch.equal(together.hidden, torch.cat([s.hidden for s in singles], 1))
    assert torch.equal(together.logits, torch.cat([s.logits for s in singles], 1))
    # a tree over the first three tokens with a decoy sibling: the true path's rows are the chain's
    decoder.truncate(start)
    nodes = torch.tensor([[tokens[0, 0], tokens[0, 1], 3, tokens[0, 2]]])
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], dtype=torch.bool)
    tree = decoder.forward(nodes, tree=TreeLayout(mask, torch.tensor([0, 1, 1, 2])))
    assert torch.equal(tree.logits[:, [0, 1, 3]], together.logits[:, :3])


@pytest.fixture(scope="module")
def smollm2_bf16():
    from specbench.models.resolve import load_model

    return load_model("smollm2-135m", dtype="bf16")


def _rows_exact(model, layout, seeds=(0, 1, 2)) -> bool:
    """Whether verify(8) rows equal 8 single-token steps bit for bit (hidden states and logits), for
    random prompts and tokens of each seed, in ``layout``."""
    vocab = model.config.vocab_size
    for seed in seeds:
        gen = torch.Generator().manual_seed(seed)
        prompt, tokens = torch.randint(4, vocab, (1, 20), generator=gen), torch.randint(4, vocab, (1, 8), generator=gen)
        _, _, together, singles = _decode_then_verify(model, prompt, tokens, layout)
        if not (
            torch.equal(together.hidden, torch.cat([s.hidden for s in singles], 1))
            and torch.equal(together.logits, torch.cat([s.logits for s in singles], 1))
        ):
            return False
    return True


@pytest.mark.parametrize("name", [layout.name for layout in candidate_layouts(torch.bfloat16)])
def test_which_16bit_layouts_keep_exact_rows_on_this_cpu(smollm2_bf16, smollm2_prompt_ids, name):
    """SmolLM2-135M in bf16, every 16-bit layout the probe may try: its verify rows against decode rows, and
    where they are bit-identical, greedy prompt lookup γ = 4 against target-only decoding. The two-row
    layout (and `default_layout`) must be exact on every CPU; the others may not be — measured on the AVX-512
    EPYC (AVX512-BF16, torch 2.13): row-major, row-major weight-first and column-major all differ in some
    rows (oneDNN's multi-row kernel against the one-row kernel), and the probe drops them there."""
    model = smollm2_bf16.model
    layout = LAYOUTS[name]
    exact = _rows_exact(model, layout)
    if layout in (LAYOUTS["row-major two-row"], default_layout(torch.bfloat16)):
        assert exact, f"{name}: verify rows differ from decode rows on this CPU"
    if not exact:
        pytest.skip(f"{name}: verify rows differ from decode rows on this CPU (the probe never chooses it)")
    decoder = NativeDecoder(model)
    decoder.use_layout(layout)
    base = SpeculativeEngine(smollm2_bf16, None, gamma=0, decoder=decoder)
    spec = SpeculativeEngine(smollm2_bf16, make_drafter("ngram", smollm2_bf16), gamma=4, decoder=decoder)
    for ids in smollm2_prompt_ids[:2]:
        assert spec.generate(ids, 32, stop_at_eos=False).tokens == base.generate(ids, 32, stop_at_eos=False).tokens


def test_lazy_greedy_verdict_equals_the_stacked_one():
    gen = torch.Generator().manual_seed(1)
    for matched in range(5):
        logits = torch.randn(1, 5, 50, generator=gen)
        best = logits.argmax(-1)
        drafts = best[:, :4].clone()
        if matched < 4:
            drafts[0, matched] = (drafts[0, matched] + 1) % 50
        asked = []

        def row(i, logits=logits, asked=asked):
            asked.append(i)
            return logits[0, i]

        lazy, full = verify_greedy_rows(drafts, row), verify_greedy(drafts, logits)
        assert torch.equal(lazy.accepted, full.accepted) and torch.equal(lazy.next_token, full.next_token)
        assert asked == list(range(matched + 1))  # rows after the first mismatch are never computed


def _drafter(name: str, target):
    if name == "draft-model":
        return make_drafter("draft-model", target, {"model": "tiny-random-llama-draft"}, dtype="bf16")
    if name == "eagle":
        return make_drafter("eagle", target, {"checkpoint": "random", "seed": 1}, dtype="bf16")
    return make_drafter(name, target)


@pytest.mark.parametrize(
    "name,tree,gamma",
    [
        ("ngram", "chain", 4),
        ("draft-model", "chain", 3),
        ("eagle", "chain", 3),
        ("eagle", "2x2", 2),
        ("ngram", "3x2x1", 3),
    ],
)
def test_bf16_speculative_greedy_equals_bf16_target_only(tiny16, name, tree, gamma):
    drafter = _drafter(name, tiny16)
    base = SpeculativeEngine(tiny16, None, gamma=0)
    spec = SpeculativeEngine(tiny16, drafter, gamma=gamma, tree=tree, decoder=base.decoder)
    drafted = 0
    for text in PROMPTS:
        ids = tiny16.tokenizer(text)["input_ids"]
        reference = base.generate(ids, NEW_TOKENS, stop_at_eos=False)
        result = spec.generate(ids, NEW_TOKENS, stop_at_eos=False)
        assert result.tokens == reference.tokens, (name, tree, text)
        drafted += result.drafted
    assert drafted > 0


def test_bf16_real_model_speculative_greedy_is_exact(smollm2_bf16, smollm2_prompt_ids):
    """SmolLM2-135M in bf16, prompt lookup γ = 4: identical to bf16 target-only decoding."""
    target = smollm2_bf16
    base = SpeculativeEngine(target, None, gamma=0)
    spec = SpeculativeEngine(target, make_drafter("ngram", target), gamma=4, decoder=base.decoder)
    accepted = refused = 0
    for ids in smollm2_prompt_ids[:2]:
        reference = base.generate(ids, 40, stop_at_eos=False)
        result = spec.generate(ids, 40, stop_at_eos=False)
        assert result.tokens == reference.tokens
        accepted += result.accepted
        refused += result.drafted - result.accepted
    assert accepted > 0 and refused > 0


def test_column_major_bf16_is_put_back_even_after_the_decoder_is_built(tiny16):
    """A caller that re-lays the weights column-major later (bench scripts do, for fp32) gets the slow
    16-bit path only for what it does itself: a new decoder restores row-major."""
    prefer_column_major(tiny16.model)
    NativeDecoder(tiny16.model)
    assert all(m.weight.is_contiguous() for m in _linears(tiny16.model))

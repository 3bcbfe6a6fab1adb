"""Greedy losslessness on a real model: speculative output == target-only output, token for token."""

from __future__ import annotations

import pytest
import torch

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine

NEW_TOKENS = 40


def transformers_greedy(model, ids: list[int], new_tokens: int) -> list[int]:
    """Greedy decoding through transformers' own forward and DynamicCache, EOS treated as a token."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    tokens, feed = [], torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(new_tokens):
            logits = model(input_ids=feed, cache=cache, use_cache=True).logits[:, -1]
            tokens.append(int(logits.argmax(-1)))
            feed = torch.tensor([[tokens[-1]]])
    return tokens


@pytest.fixture(scope="module")
def greedy_reference(smollm2, smollm2_prompt_ids):
    """Target-only greedy outputs from transformers' implementation (independent of ours)."""
    return [transformers_greedy(smollm2.model, ids, NEW_TOKENS) for ids in smollm2_prompt_ids]


def test_engine_baseline_matches_transformers_generate(smollm2, smollm2_prompt_ids, greedy_reference):
    engine = SpeculativeEngine(smollm2, None, gamma=0)
    for ids, ref in zip(smollm2_prompt_ids, greedy_reference):
        assert engine.generate(ids, NEW_TOKENS, stop_at_eos=False).tokens == ref


# The early-exit drafter accepts little on these prompts, so its rounds are the dear ones: the default suite keeps
# it at γ 3 (with prompt lookup at γ 1, 3, 6 for the γ edges, and the tiny draft model's 600-token run below for
# both caches' roll-back); γ 1 and 6 with it are marker `long`.
@pytest.mark.parametrize(
    ("drafter_name", "gamma"),
    [
        (drafter, gamma) if drafter == "ngram" or gamma == 3 else pytest.param(drafter, gamma, marks=pytest.mark.long)
        for drafter in ("ngram", "draft-model")
        for gamma in (1, 3, 6)
    ],
)
def test_speculative_greedy_is_lossless(
    smollm2, smollm2_prompt_ids, greedy_reference, early_exit_drafter, drafter_name, gamma
):
    drafter = early_exit_drafter if drafter_name == "draft-model" else make_drafter("ngram", smollm2)
    engine = SpeculativeEngine(smollm2, drafter, gamma=gamma)
    drafted = accepted = 0
    for ids, ref in zip(smollm2_prompt_ids, greedy_reference):
        result = engine.generate(ids, NEW_TOKENS, stop_at_eos=False)
        assert result.tokens == ref
        assert result.decode_tokens == sum(result.rounds.emitted) == NEW_TOKENS - 1
        drafted, accepted = drafted + result.drafted, accepted + result.accepted
    # the test only means something if drafts were offered and some were taken and some refused
    assert drafted > 0 and 0 < accepted < drafted


def test_long_generation_rolls_back_kv_correctly(smollm2, smollm2_prompt_ids):
    """200 tokens on the real model, five times the other tests' outputs: dozens of target-cache roll-backs, still
    identical."""
    ids = smollm2_prompt_ids[0]
    base = SpeculativeEngine(smollm2, None, gamma=0).generate(ids, 200, stop_at_eos=False)
    spec = SpeculativeEngine(smollm2, make_drafter("ngram", smollm2), gamma=6).generate(ids, 200, stop_at_eos=False)
    assert len(spec.tokens) == 200
    assert spec.tokens == base.tokens
    assert spec.target_forwards < base.target_forwards
    assert sum(1 for a, d in zip(spec.rounds.accepted, spec.rounds.drafted) if a < d) > 20  # many roll-backs


def test_long_generation_with_a_draft_model_cache():
    """600 tokens with a tiny drafter: both caches rolled back every round, output unchanged."""
    from specbench.models.resolve import load_model

    target, draft = load_model("tiny-random-llama"), load_model("tiny-random-llama-draft")
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-llama-draft"})
    ids = target.tokenizer("Speculative decoding keeps the output distribution.")["input_ids"]
    base = SpeculativeEngine(target, None, gamma=0).generate(ids, 600, stop_at_eos=False)
    spec = SpeculativeEngine(target, drafter, gamma=4).generate(ids, 600, stop_at_eos=False)
    assert spec.tokens == base.tokens
    assert spec.accepted > 0 and sum(1 for a, d in zip(spec.rounds.accepted, spec.rounds.drafted) if a < d) > 50
    assert draft.vocab_size == target.vocab_size


def test_stops_at_eos_like_the_baseline(smollm2, smollm2_prompt_ids):
    ids = smollm2_prompt_ids[2]  # a short factual answer ends with <|im_end|>
    base = SpeculativeEngine(smollm2, None, gamma=0).generate(ids, 200)
    spec = SpeculativeEngine(smollm2, make_drafter("ngram", smollm2), gamma=4).generate(ids, 200)
    assert base.stop_reason == spec.stop_reason == "eos"
    assert spec.tokens == base.tokens


def test_native_decoder_matches_transformers_logits(smollm2):
    from specbench.engine.decoder import NativeDecoder, TreeLayout

    ids = torch.randint(100, 40000, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        ref = smollm2.model(ids).logits.float()
    dec = NativeDecoder(smollm2.model)
    dec.reset(1, 64)
    chunks = [dec.forward(ids[:, :16]).logits, dec.forward(ids[:, 16:17]).logits, dec.forward(ids[:, 17:]).logits]
    assert torch.allclose(torch.cat(chunks, 1), ref, atol=2e-4, rtol=1e-4)
    # tree over positions 16..18 with a decoy branch; then keep the true path and continue
    dec.truncate(16)
    decoy = 7
    nodes = torch.tensor([[ids[0, 16], ids[0, 17], decoy, ids[0, 18]]])
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], dtype=torch.bool)
    tree_logits = dec.forward(nodes, tree=TreeLayout(mask, torch.tensor([0, 1, 1, 2]))).logits
    assert torch.allclose(tree_logits[:, [0, 1, 3]], ref[:, 16:19], atol=2e-4, rtol=1e-4)
    dec.keep(16, torch.tensor([0, 1, 3]))
    assert dec.length == 19
    assert torch.allclose(dec.forward(ids[:, 19:]).logits, ref[:, 19:], atol=2e-4, rtol=1e-4)

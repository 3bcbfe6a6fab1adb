"""Architectures without a native decoder run through transformers' forward (chains only)."""

from __future__ import annotations

import pytest

from specbench.engine.decoder import HFDecoder, NativeDecoder, make_decoder
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.errors import SpecbenchError
from specbench.models.resolve import load_model


@pytest.fixture(scope="module")
def gpt2():
    return load_model("tiny-random-gpt2")


def test_gpt2_gets_the_generic_decoder(gpt2):
    assert isinstance(make_decoder(gpt2.model), HFDecoder)
    assert isinstance(make_decoder(load_model("tiny-random-llama").model), NativeDecoder)


@pytest.mark.parametrize("drafter,params", [("ngram", {}), ("draft-model", {"model": "tiny-random-gpt2"})])
def test_generic_decoder_greedy_is_lossless(gpt2, drafter, params):
    ids = gpt2.tokenizer("The generic decoder rolls its DynamicCache back.")["input_ids"]
    base = SpeculativeEngine(gpt2, None, gamma=0).generate(ids, 120, stop_at_eos=False)
    spec = SpeculativeEngine(gpt2, make_drafter(drafter, gpt2, params), gamma=3).generate(ids, 120, stop_at_eos=False)
    assert spec.tokens == base.tokens
    assert spec.drafted > 0


def test_generic_decoder_refuses_trees(gpt2):
    with pytest.raises(SpecbenchError, match="tree drafting needs a natively supported"):
        SpeculativeEngine(gpt2, make_drafter("ngram", gpt2), gamma=3, tree="2x2")

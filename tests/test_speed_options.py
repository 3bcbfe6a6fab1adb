"""Speed options keep the engine lossless: torch.compile'd decode/verify steps, forced kernels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specbench.engine.cpu.weight_layout import LAYOUTS, onednn_packing
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.models.resolve import load_model


@pytest.mark.long
def test_compiled_engine_greedy_is_lossless():
    target = load_model("tiny-random-llama")
    ids = target.tokenizer("Compiled graphs must not change a single token.")["input_ids"]
    eager = SpeculativeEngine(target, None, gamma=0).generate(ids, 80, stop_at_eos=False)
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-llama-draft"})
    compiled = SpeculativeEngine(target, drafter, gamma=3, compile=True)
    result = compiled.generate(ids, 80, stop_at_eos=False)
    assert result.tokens == eager.tokens
    assert compiled.decoder._compiled is not None and result.accepted > 0
    assert drafter.decoder._compiled is not None  # the draft model's steps are compiled too
    # another CPU layout (as the layout probe may choose) gets a fresh graph for its product forms
    graph = compiled.decoder._compiled
    compiled.decoder.use_layout(LAYOUTS["row-major weight-first"])
    assert compiled.decoder._compiled is not None and compiled.decoder._compiled is not graph
    assert compiled.generate(ids, 80, stop_at_eos=False).tokens == eager.tokens
    if onednn_packing():  # a packed layout's copies stay out of the traced graph (inductor rejects them)
        torch._dynamo.reset()  # a fresh trace (not a cached graph, nor eager after too many recompiles)
        packed = SpeculativeEngine(target, make_drafter("ngram", target), gamma=3, compile=True)
        packed.decoder.use_layout(LAYOUTS["onednn-packed"])
        assert packed.generate(ids, 80, stop_at_eos=False).tokens == eager.tokens


def test_layouts_do_not_change_outputs_when_not_compiled():
    """Without --compile (the default) every CPU layout runs the eager path: the same greedy tokens as the
    default layout, and no compiled graph anywhere."""
    target = load_model("tiny-random-llama")
    ids = target.tokenizer("Layouts change strides, not tokens.")["input_ids"]
    engine = SpeculativeEngine(target, make_drafter("ngram", target), gamma=3)
    reference = engine.generate(ids, 48, stop_at_eos=False).tokens
    for layout in LAYOUTS.values():
        engine.decoder.use_layout(layout)
        assert engine.generate(ids, 48, stop_at_eos=False).tokens == reference, layout.name
        assert engine.decoder._compiled is None


@pytest.mark.long
def test_compiled_engine_sampling_matches_target_distribution(tiny_v8):
    """n = SAMPLES = 1000: the power tests/test_engine_sampling.py states (the broken rule rejected at p < 1e-6);
    the correct rule passes at α = 0.001."""
    from tests.test_engine_sampling import SAMPLES, chi_square_pvalue, exact_distributions, sample_counts

    target, _ = tiny_v8
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"})
    engine = SpeculativeEngine(target, drafter, gamma=2, sampling=SamplingParams(temperature=1.0), compile=True)
    joint23, marginal4 = exact_distributions(target.model, 1.0, 0)
    counts23, counts4, alpha = sample_counts(engine, SAMPLES)
    assert 0.05 < alpha < 0.95
    assert chi_square_pvalue(counts23, joint23) > 1e-3 and chi_square_pvalue(counts4, marginal4) > 1e-3
    assert np.isclose(counts23.sum(), SAMPLES)

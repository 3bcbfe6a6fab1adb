"""Opt-in tests on the real Qwen2.5-Coder 1.5B target / 0.5B drafter pair (`make test-heavy`).

They need `specbench models pull qwen2.5-coder-1.5b` and `... 0.5b` (about 1.5 GB of GGUF,
8.5 GB once converted to fp32) and several minutes of CPU.
"""

from __future__ import annotations

import pytest

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine
from specbench.models.prompting import encode_conversation

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def qwen_pair():
    from specbench.models.resolve import load_model

    return load_model("qwen2.5-coder-1.5b")


@pytest.fixture(scope="module")
def code_prompts(qwen_pair):
    from specbench.workloads.catalog import load_workload

    workload = load_workload("humaneval", count=2, seed=5)
    return [encode_conversation(qwen_pair.tokenizer, list(p.turns[:1]), chat=False) for p in workload.prompts]


def test_qwen_pair_shares_a_vocabulary_and_is_lossless(qwen_pair, code_prompts):
    drafter = make_drafter("draft-model", qwen_pair, {"model": "qwen2.5-coder-0.5b"})
    base = SpeculativeEngine(qwen_pair, None, gamma=0)
    spec = SpeculativeEngine(qwen_pair, drafter, gamma=4, decoder=base.decoder)
    drafted = accepted = 0
    for ids in code_prompts:
        reference = base.generate(ids, 64, stop_at_eos=False)
        result = spec.generate(ids, 64, stop_at_eos=False)
        assert result.tokens == reference.tokens
        drafted, accepted = drafted + result.drafted, accepted + result.accepted
    assert accepted / drafted > 0.5, "the 0.5B drafter agrees with the 1.5B target most of the time"


def test_qwen_tree_is_lossless(qwen_pair, code_prompts):
    drafter = make_drafter("draft-model", qwen_pair, {"model": "qwen2.5-coder-0.5b"})
    base = SpeculativeEngine(qwen_pair, None, gamma=0).generate(code_prompts[0], 48, stop_at_eos=False)
    tree = SpeculativeEngine(qwen_pair, drafter, gamma=3, tree="2x2x1").generate(code_prompts[0], 48, stop_at_eos=False)
    assert tree.tokens == base.tokens

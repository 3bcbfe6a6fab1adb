"""The 2026 drafter types (issue 18): what each adds over the drafter it extends.

The losslessness, checkpoint and training tests they share with every trained drafter are in
tests/test_trained_drafters.py (``KINDS``); here:

* parallel-tree: a static tree costs one drafter forward; each slot sees its ancestors only
  (tree-causal), so a slot's distribution does not depend on which other branches exist; a
  dynamic tree is greedy lossless too; the ranks the training feeds;
* semi-ar: an untrained serial head is Medusa exactly, and a trained one conditions each branch
  on its own path;
* eagle3.1: EAGLE-3 with the two norms — EAGLE-3's architecture (and so its checkpoints) unchanged.
"""

from __future__ import annotations

import pytest
import torch

from specbench.engine.drafters import make_drafter, registry
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import shape_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    from specbench.models.resolve import load_model

    return load_model("tiny-random-llama")


@pytest.fixture(scope="module")
def prompt(tiny):
    return tiny.tokenizer("Parallel drafters predict a whole block at once.")["input_ids"]


def _started(kind, tiny, prompt, seed=1):
    from tests.test_trained_drafters import _features

    drafter = make_drafter(kind, tiny, {"checkpoint": "random", "seed": seed})
    p = torch.tensor([prompt])
    layers = tuple(k for k in drafter.feature_layers if k != "final")
    drafter.start(p, 128, {k: v for k, v in _features(tiny, p, layers).items() if k in drafter.feature_layers})
    return drafter


def _slot_logits(tiny, prompt, context, shape: str) -> dict:
    """Rank path -> the distribution a (fresh) parallel-tree drafter gave that node's children."""
    drafter = _started("parallel-tree", tiny, prompt)
    seen = {}
    original = drafter.head.logits
    drafter.head.logits = lambda h: seen.setdefault(len(seen), original(h))
    try:
        drafter.propose(context, shape_for(shape, 3), SamplingParams(), None)
    finally:
        del drafter.head.logits
    from specbench.engine.drafters.networks.parallel_tree import slot_plan

    return dict(zip(slot_plan(shape_for(shape, 3)), seen[1]))  # call 0: the root; call 1: every slot at once


def test_parallel_tree_is_one_forward_and_tree_causal(tiny, prompt):
    drafter = _started("parallel-tree", tiny, prompt)
    context = torch.tensor([prompt + [65]])
    proposal = drafter.propose(context, shape_for("3x2x1", 3), SamplingParams(), None)
    assert proposal.draft_steps == 1 and proposal.tree_nodes == 3 + 6 + 6 and proposal.depth == 3
    # a slot sees the context and its ancestors only: adding branches elsewhere changes nothing for it
    chain = _slot_logits(tiny, prompt, context, "chain")
    tree = _slot_logits(tiny, prompt, context, "3x2x1")
    assert set(chain) == {(0,), (0, 0)} and len(tree) == 3 + 6
    for path in chain:
        assert torch.allclose(chain[path], tree[path], atol=1e-5), path
    # ...but the rank path does: siblings' subtrees differ
    assert not torch.allclose(tree[(0,)], tree[(1,)])
    assert not torch.allclose(tree[(0, 0)], tree[(1, 0)])


@pytest.mark.parametrize("tree", ["3x2x1", "dynamic:topk=2,nodes=6", "chain"])
def test_parallel_tree_greedy_is_lossless_on_a_tiny_model(tiny, prompt, tree):
    baseline = SpeculativeEngine(tiny, None, gamma=0).generate(prompt, 24, stop_at_eos=False).tokens
    drafter = make_drafter("parallel-tree", tiny, {"checkpoint": "random", "seed": 2})
    result = SpeculativeEngine(tiny, drafter, gamma=3, tree=tree).generate(prompt, 24, stop_at_eos=False)
    assert result.tokens == baseline
    if tree.startswith("dynamic"):  # nodes known only as the tree grows: one slot forward per level
        assert max(result.rounds.drafted) > max(result.rounds.depth)


def test_training_feeds_the_slot_of_the_true_tokens_rank():
    from specbench.engine.drafters.networks.parallel_tree import token_ranks

    logits = torch.tensor([[[0.1, 3.0, 2.0, -1.0], [5.0, 4.0, 3.0, 2.0]]])  # [B=1, T=2, Vd=4]
    draft_ids = torch.tensor([2, 5, 7, 9])  # target ids of the draft vocabulary
    truth = torch.tensor([[7, 11]])  # rank 1 at t=0; t=1: not in the draft vocabulary
    assert token_ranks(logits, truth, draft_ids, worst=3).tolist() == [[1, 3]]
    assert token_ranks(logits, torch.tensor([[1, 3]]), None, worst=2).tolist() == [[0, 2]]


def test_untrained_serial_head_is_medusa_and_trained_one_reads_the_path(tiny, prompt):
    semi = registry.get("semi-ar")
    net = semi.new_net(semi.architecture(tiny.model.config), zero_init=True)
    torch.manual_seed(0)
    for block in net.heads:  # random parallel heads, serial head still at its zero start
        torch.nn.init.normal_(block[0].linear.weight, std=0.05)
    medusa = registry.get("medusa").wrap(net.heads, tiny)
    engine = {
        name: SpeculativeEngine(tiny, d, gamma=3, tree="2x2x1")
        for name, d in (("semi-ar", semi.wrap(net, tiny)), ("medusa", medusa))
    }
    runs = {name: e.generate(prompt, 16, stop_at_eos=False) for name, e in engine.items()}
    assert runs["semi-ar"].rounds.accepted == runs["medusa"].rounds.accepted
    assert runs["semi-ar"].tokens == runs["medusa"].tokens

    drafter = _started("semi-ar", tiny, prompt, seed=3)  # random serial head: depth 2 depends on depth 1
    hidden = drafter.net(drafter._last)
    root = prompt[-1]
    a, b = drafter.depth_logits(hidden, [2, 2], [[root, 10], [root, 11]])
    assert not torch.allclose(a, b)


def test_eagle31_adds_two_norms_and_leaves_eagle3_as_it_was(tiny, prompt):
    cfg = tiny.model.config
    eagle3 = registry.get("eagle3").architecture(cfg)
    eagle31 = registry.get("eagle3.1").architecture(cfg)
    assert "fc_norm" not in eagle3 and "norm_output" not in eagle3  # EAGLE-3 configurations keep their hash
    assert {k: v for k, v in eagle31.items() if k not in ("fc_norm", "norm_output")} == eagle3
    net = registry.get("eagle3.1").new_net(eagle31)
    assert len(net.fc_norm) == len(eagle3["feature_layers"]) and net.norm_output
    assert net.architecture() == eagle31 and registry.get("eagle3").new_net(eagle3).architecture() == eagle3
    # the fused streams are normalised: scaling one target layer's features leaves the context unchanged
    features = {i: torch.randn(5, cfg.hidden_size) for i in eagle3["feature_layers"]}
    scaled = {**features, eagle3["feature_layers"][-1]: 40.0 * features[eagle3["feature_layers"][-1]]}
    assert torch.allclose(net.context(features), net.context(scaled), atol=1e-4)
    plain = registry.get("eagle3").new_net(eagle3)
    assert not torch.allclose(plain.context(features), plain.context(scaled), atol=1e-2)
    drafter = make_drafter("eagle3.1", tiny, {"checkpoint": "random"})
    assert drafter.name == "eagle3.1"

"""Tree drafting: shapes, tree verification (greedy and sampling) and KV compaction."""

from __future__ import annotations

import pytest
import torch

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine, Verifier
from specbench.engine.sampling import SamplingParams
from specbench.engine.tree import DynamicTree, StaticTree, ancestor_mask, leaf_paths, parse_tree, shape_for
from specbench.engine.verify import TreeVerdict, draw_exponential_race, verify_greedy, verify_tree_greedy
from specbench.errors import SpecbenchError

NEW_TOKENS = 32
PROMPTS = 3  # tree rounds through the early-exit drafter are the slowest part of the suite


# ------------------------------------------------------------------------------------- shapes


def test_branching_spec_and_truncation():
    tree = parse_tree("3x2x1")
    assert tree.num_nodes == 3 + 6 + 6 and tree.depth == 3
    assert tree.parents[:3] == [-1, -1, -1] and tree.children_count(0) == 2
    assert shape_for("3x2x1", 2).num_nodes == 9
    assert shape_for("chain", 5) == StaticTree.chain(5) and StaticTree.chain(5).is_chain
    assert isinstance(shape_for("dynamic:topk=3,nodes=10", 4), DynamicTree)
    assert shape_for("dynamic:topk=3,nodes=10", 4).depth == 4


def test_named_and_file_paths(tmp_path):
    assert parse_tree("@wide-4x3x2x1").num_nodes == 16
    f = tmp_path / "t.json"
    f.write_text("[[0], [1], [0, 0], [0, 1], [1, 0]]")
    tree = parse_tree(f"paths:{f}")
    assert tree.parents == [-1, -1, 0, 0, 1] and tree.depth == 2


def test_buffers_mask_positions_and_paths():
    parents = [-1, -1, 0, 0, 2]  # root -> a, b; a -> c, d; c -> e
    mask = ancestor_mask(parents)
    assert mask[5].tolist() == [True, True, False, True, False, True]  # e sees root, a, c, itself
    assert mask[2].tolist() == [True, False, True, False, False, False]
    assert leaf_paths(parents).tolist() == [[1, -1, -1], [0, 3, -1], [0, 2, 4]]


@pytest.mark.parametrize(
    "content,needle",
    [
        ("[]", "empty tree"),
        ("[[0], [0, 1]]", "ranks below [0] must be 0..k-1"),
        ("[[0], [2, 0]]", "has no parent path"),
        ("[[0], []]", "depth 0"),
        ("[[0], [-1]]", "negative rank"),
        ("[[0], ['x']]", "integer ranks"),
    ],
)
def test_bad_path_files(tmp_path, content, needle):
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(SpecbenchError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        parse_tree(f"paths:{f}")


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("", "empty tree"),
        ("3x0", "at least one child"),
        ("pyramid", "unknown"),
        ("dynamic:topk=0", ">= 1"),
        ("@nope", "unknown named tree"),
        ("paths:/no/such.json", "not found"),
        ("dynamic:width=3", "unknown parameter"),
    ],
)
def test_bad_tree_specs(spec, needle):
    with pytest.raises(SpecbenchError, match=needle):
        parse_tree(spec)


def test_bad_tree_from_the_cli_is_one_line_exit_2(tmp_path):
    from typer.testing import CliRunner

    from specbench.cli import app

    f = tmp_path / "cyc.json"
    f.write_text("[[1, 0]]")
    for spec in ("3x0x2", f"paths:{f}", "9999999x1"):
        result = CliRunner().invoke(app, ["run", "--target", "tiny-random-llama", "--prompt", "hi", "--tree", spec])
        assert result.exit_code == 2, (spec, result.output)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_ranks_beyond_the_vocabulary_are_refused():
    from specbench.models.resolve import load_model

    target = load_model("tiny-random-v8")
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"})
    with pytest.raises(SpecbenchError, match="vocabulary"):
        SpeculativeEngine(target, drafter, gamma=2, tree="9x1")


# ------------------------------------------------------------------------------------- verification rules


def test_tree_greedy_on_a_chain_equals_the_chain_rule():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        logits = torch.randn(5, 6, generator=g)  # [K+1, V]
        best = logits.argmax(-1)
        drafts = torch.where(torch.rand(4, generator=g) < 0.7, best[:4], torch.randint(0, 6, (4,), generator=g))
        chain = verify_greedy(drafts[None], logits[None])
        tree = verify_tree_greedy(drafts, [-1, 0, 1, 2], logits)
        assert tree.path == list(range(int(chain.accepted))) and tree.next_token == int(chain.next_token)


def test_tree_greedy_picks_the_longest_matching_branch():
    # root -> (5, 7); 7 -> (1); target argmax: after root 7, after 7 -> 1, after 1 -> 3
    logits = torch.full((4, 10), -5.0)
    for row, best in ((0, 7), (1, 0), (2, 1), (3, 3)):
        logits[row, best] = 5.0
    verdict = verify_tree_greedy(torch.tensor([5, 7, 1]), [-1, -1, 1], logits)
    assert verdict == TreeVerdict([1, 2], 3)


# ------------------------------------------------------------------------------------- engine, real model

TREES = ["2x2x1", pytest.param("@wide-4x3x2x1", marks=pytest.mark.long), "dynamic:topk=3,nodes=12"]


@pytest.fixture(scope="module")
def prompt_ids(smollm2_prompt_ids):
    return smollm2_prompt_ids[:PROMPTS]


@pytest.fixture(scope="module")
def greedy_baseline(smollm2, prompt_ids):
    engine = SpeculativeEngine(smollm2, None, gamma=0)
    return [engine.generate(ids, NEW_TOKENS, stop_at_eos=False) for ids in prompt_ids]


@pytest.fixture(scope="module")
def draft_model_runs(smollm2, prompt_ids, early_exit_drafter):
    """The early-exit drafter's greedy generations (γ 3) per tree shape, each shape run once per module: the
    lossless test and the tree-versus-chain test read the same runs (the shape's rounds are the slowest part)."""
    runs: dict[str, list] = {}

    def run(tree: str) -> list:
        if tree not in runs:
            engine = SpeculativeEngine(smollm2, early_exit_drafter, gamma=3, tree=tree)
            runs[tree] = [engine.generate(ids, NEW_TOKENS, stop_at_eos=False) for ids in prompt_ids]
        return runs[tree]

    return run


@pytest.mark.parametrize("tree", TREES)
def test_greedy_tree_is_lossless_with_a_draft_model(greedy_baseline, draft_model_runs, tree):
    for result, base in zip(draft_model_runs(tree), greedy_baseline, strict=True):
        assert result.tokens == base.tokens
        assert max(result.rounds.drafted) > max(result.rounds.depth), "a real tree, wider than a chain"


def test_greedy_ngram_trie_is_lossless(smollm2, prompt_ids, greedy_baseline):
    engine = SpeculativeEngine(smollm2, make_drafter("ngram", smollm2), gamma=4, tree="3x2x2x1")
    accepted = 0
    for ids, base in zip(prompt_ids, greedy_baseline):
        result = engine.generate(ids, NEW_TOKENS, stop_at_eos=False)
        assert result.tokens == base.tokens
        accepted += result.accepted
    assert accepted > 0


def test_tree_accepts_at_least_as_much_as_the_chain(draft_model_runs):
    """Same prompts, same depth: τ (tokens per target forward) of a tree vs a chain. The tree is the lossless
    test's 2x2x1, whose runs this reads rather than repeats; it holds the chain's top-1 path, so it accepts at
    least as far in every round from the same position."""
    taus = {}
    for tree in ("chain", "2x2x1"):
        results = draft_model_runs(tree)
        taus[tree] = sum(r.decode_tokens for r in results) / sum(r.target_forwards for r in results)
    print(f"τ chain {taus['chain']:.3f} vs τ tree 2x2x1 {taus['2x2x1']:.3f}")
    assert taus["2x2x1"] >= taus["chain"]


# ------------------------------------------------------------------------------------- sampling distribution


def broken_tree_sampling(tokens, parents, draft_probs, target_probs, generator):
    """The bug to catch: siblings are tested against p itself, the residual is never updated."""
    children = [i for i, p in enumerate(parents) if p == -1]
    p = target_probs[0]
    for child in children:
        x = int(tokens[child])
        q_x = float(draft_probs[child][x]) if draft_probs is not None else 1.0
        if float(torch.rand((), generator=generator)) * q_x < float(p[x]):
            return TreeVerdict(
                [child],
                int(
                    draw_exponential_race(
                        target_probs[child + 1], torch.empty_like(p).exponential_(generator=generator)
                    )
                ),
            )
    return TreeVerdict([], int(draw_exponential_race(p, torch.empty_like(p).exponential_(generator=generator))))


TREE_CASES = {
    "draft-model static 3x1 (sampled without replacement)": ("draft-model", "3x1"),
    "draft-model dynamic (deterministic candidates)": ("draft-model", "dynamic:topk=2,nodes=4"),
    "ngram trie": ("ngram", "3x1"),
}


def _tree_engine(tiny_v8, drafter_name, tree, verifier=None):
    from tests.test_engine_sampling import _engine

    engine = _engine(tiny_v8, drafter_name, SamplingParams(temperature=1.0), verifier)
    return SpeculativeEngine(
        tiny_v8[0], engine.drafter, gamma=2, tree=tree, sampling=SamplingParams(temperature=1.0), verifier=verifier
    )


@pytest.mark.parametrize("case", list(TREE_CASES))
def test_tree_sampling_matches_target_distribution(tiny_v8, case):
    """Power: n = SAMPLES = 1000 (tests/test_engine_sampling.py) rejects the broken tree rule with p = 1e-82, far
    below 1e-6 (`test_broken_tree_rule_is_detected`, the same n); the correct rule passes at α = 0.001."""
    from tests.test_engine_sampling import sampled_pvalues

    p23, p4, alpha = sampled_pvalues(_tree_engine(tiny_v8, *TREE_CASES[case]), tiny_v8[0].model)
    assert alpha > 0.02
    assert p23 > 1e-3
    assert p4 > 1e-3


def test_broken_tree_rule_is_detected(tiny_v8):
    """The tree rule that samples a rejected node's replacement from p, not the residual, is caught at the n of the
    tree sampling tests (1000): p = 1e-82 on the (t2, t3) joint and 6e-21 on t4, so the bound p < 1e-6 holds with
    a wide margin (power ≈ 1)."""
    from tests.test_engine_sampling import SAMPLES, sampled_pvalues

    engine = _tree_engine(tiny_v8, "draft-model", "3x1", Verifier(tree_sampling=broken_tree_sampling))
    p23, p4, _ = sampled_pvalues(engine, tiny_v8[0].model, SAMPLES)
    assert min(p23, p4) < 1e-6

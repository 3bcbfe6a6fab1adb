"""The draft model's chain fast path (`draft_chain`) proposes exactly what the generic tree growth
proposes — tokens, distributions, path scores, draft steps, the drafter's cache afterwards and
the generator's state — greedy and sampling, with and without a verify-length schedule; and the
engine's output does not change with it. Tiny random models only."""

from __future__ import annotations

import pytest
import torch

from specbench.engine.drafters import make_drafter
from specbench.engine.drafters.base import RoundOutcome
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import SamplingParams
from specbench.engine.strategies.schedule import parse_schedule
from specbench.engine.tree import shape_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")

GAMMA = 4
SAMPLINGS = {
    "greedy": SamplingParams(),
    "T=1": SamplingParams(temperature=1.0),
    "T=0.7 top-k 5 top-p 0.9": SamplingParams(temperature=0.7, top_k=5, top_p=0.9),
}
# a confidence below which the tiny drafter's chains are sometimes cut, per sampling mode (its
# confidences: greedy ~0.05-0.4, T=1 ~0.001-0.2, T=0.7 top-k 5 ~0.1-0.8)
CUT_BELOW = {"greedy": 0.1, "T=1": 0.02, "T=0.7 top-k 5 top-p 0.9": 0.2}


@pytest.fixture(scope="module")
def tiny():
    from specbench.models.resolve import load_model

    return load_model("tiny-random-llama")


def _drafter(target, fast: bool):
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-llama-draft"})
    drafter.fast_chain = fast
    return drafter


def _rounds(drafter, prompt: list[int], sampling: SamplingParams, keep_drafting=None, rounds: int = 6):
    """Proposals of ``rounds`` rounds in which the target keeps a varying prefix of each chain."""
    context = torch.tensor([prompt])
    generator = torch.Generator().manual_seed(7)
    drafter.start(context[:, :-1], context.shape[1] + rounds * (GAMMA + 1) + 4)  # the last token: the root
    proposals, cache = [], []
    for r in range(rounds):
        proposal = drafter.propose(context, shape_for("chain", GAMMA), sampling, generator, keep_drafting)
        accepted = min(r % (GAMMA + 1), proposal.tree_nodes)
        next_token = (int(proposal.tokens[0, 0]) + 1 + r) % 200 + 4  # some token of "the target's"
        drafter.observe(
            RoundOutcome(
                context_length=context.shape[1],
                accepted=accepted,
                next_token=next_token,
                accepted_nodes=list(range(accepted)),
            )
        )
        new = proposal.tokens[0, :accepted].tolist() + [next_token]
        context = torch.cat([context, torch.tensor([new])], dim=1)
        proposals.append(proposal)
        cache.append((drafter.decoder.length, drafter.synced))
    return proposals, cache, generator.get_state()


@pytest.mark.parametrize("mode", list(SAMPLINGS))
@pytest.mark.parametrize("schedule", [False, True])
def test_chain_fast_path_proposes_what_growth_proposes(tiny, mode, schedule):
    sampling = SAMPLINGS[mode]
    # a verify-length rule that stops some chains early (after a token the drafter is unsure of)
    keep = (lambda confidences: confidences[-1] > CUT_BELOW[mode]) if schedule else None
    prompt = tiny.tokenizer("The chain fast path drafts")["input_ids"]
    fast, fast_cache, fast_state = _rounds(_drafter(tiny, True), prompt, sampling, keep)
    slow, slow_cache, slow_state = _rounds(_drafter(tiny, False), prompt, sampling, keep)
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        assert torch.equal(a.tokens, b.tokens)
        assert (a.probs is None) == (b.probs is None) == sampling.greedy
        assert a.probs is None or torch.equal(a.probs, b.probs)
        assert a.path_logq == b.path_logq and a.draft_steps == b.draft_steps and a.parents == b.parents
    assert fast_cache == slow_cache and torch.equal(fast_state, slow_state)
    lengths = {p.tree_nodes for p in fast}
    assert lengths == {GAMMA} if not schedule else len(lengths) > 1, lengths  # the schedule cut some chains


@pytest.mark.parametrize("mode", ["greedy", "T=1"])
def test_engine_output_unchanged_by_the_fast_path(tiny, mode):
    """Same tokens (and rounds) with either path: greedy, and sampling with the same seed."""
    sampling = SAMPLINGS[mode]
    base = SpeculativeEngine(tiny, None, gamma=0)
    outputs = []
    for fast in (True, False):
        engine = SpeculativeEngine(tiny, _drafter(tiny, fast), gamma=GAMMA, sampling=sampling, decoder=base.decoder)
        ids = tiny.tokenizer("One two three, one two three, one two")["input_ids"]
        result = engine.generate(ids, 40, seed=3, stop_at_eos=False)
        outputs.append((result.tokens, result.rounds.accepted, result.rounds.drafted))
    assert outputs[0] == outputs[1]
    if sampling.greedy:
        assert outputs[0][0] == base.generate(ids, 40, stop_at_eos=False).tokens


def test_a_schedule_still_cuts_fast_chains(tiny):
    """The engine with a threshold schedule drafts fewer than γ tokens in some rounds on the fast path."""
    engine = SpeculativeEngine(
        tiny, _drafter(tiny, True), gamma=GAMMA, schedule=parse_schedule({"name": "threshold", "threshold": 0.3})
    )
    ids = tiny.tokenizer("Schedules read confidences")["input_ids"]
    result = engine.generate(ids, 30, stop_at_eos=False)
    assert min(result.rounds.drafted) < GAMMA

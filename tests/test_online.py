"""Online adaptation (specbench.engine.strategies.online_drafting, specbench.training.online_learning): lossless with a drafter that changes
mid-run, its traces line up with the target's computation, it learns, and a re-timed unit replays.

The sampling test follows tests/test_engine_sampling.py: thousands of generations on the 8-token random
model compared with the exactly enumerated target distribution by chi-square, and the same test rejects
a broken acceptance rule. Its drafter changes between and within generations: its weights are swapped
every two verified tokens (the engine's own swap and cache rebuild), from a stand-in learner that
perturbs them (a real training step per generation would make the test minutes long; the real learner's
updates are exercised by the greedy tests below).
"""

from __future__ import annotations

import math

import pytest
import torch

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine, Verifier
from specbench.engine.sampling import SamplingParams
from specbench.engine.strategies.online_drafting import OnlineDriver, OnlinePlan
from specbench.errors import SpecbenchError
from specbench.training.online_learning import OnlineLearner
from tests.test_engine_sampling import PROMPT, broken_sampling_rows, sampled_pvalues

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TRAINED = ["eagle", "eagle3", "eagle3.1", "medusa", "mtp", "semi-ar", "parallel-tree"]


def online_engine(
    target, kind: str = "eagle3", plan: OnlinePlan = OnlinePlan(every_prompts=1, steps=2), gamma=2, **options
) -> SpeculativeEngine:
    """An armed engine with online rounds (its driver: ``engine.driver``) and a random-weight drafter of ``kind``."""
    engine = SpeculativeEngine(
        target, make_drafter(kind, target, {"checkpoint": "random"}), gamma=gamma, driver=OnlineDriver(plan), **options
    )
    engine.driver.arm()
    return engine


@pytest.mark.parametrize("kind", TRAINED)
@pytest.mark.parametrize(
    "plan",
    [
        OnlinePlan(every_prompts=1, steps=2),
        OnlinePlan(every_prompts=None, every_tokens=3, steps=1, start="scratch", loss="accepted"),
    ],
    ids=["every prompt", "every 3 tokens, scratch"],
)
def test_greedy_identical_to_target_only_for_every_trained_kind(tiny_v8, kind, plan):
    target, _ = tiny_v8
    engine = online_engine(target, kind, plan)
    base = SpeculativeEngine(target, None, gamma=0)
    for seed in range(3):
        result = engine.generate(PROMPT, 12, seed=seed, stop_at_eos=False)
        assert result.tokens == base.generate(PROMPT, 12, seed=seed, stop_at_eos=False).tokens
        assert result.online["version"] == engine.driver.version - len(result.online["updates"])
    assert engine.driver.version >= 3
    if plan.every_tokens:  # some swaps landed between two rounds of a generation
        assert any(u["at_round"] < len(result.rounds) for u in result.online["updates"])


def test_greedy_identical_on_smollm2_with_the_shipped_eagle3_changing_mid_generation(smollm2, smollm2_prompt_ids):
    base = SpeculativeEngine(smollm2, None, gamma=0)
    plan = OnlinePlan(every_prompts=None, every_tokens=8, steps=1, batch_tokens=256)
    engine = SpeculativeEngine(smollm2, make_drafter("eagle3", smollm2), gamma=3, driver=OnlineDriver(plan))
    engine.driver.arm()
    for ids in smollm2_prompt_ids[:2]:
        result = engine.generate(ids, 24, seed=0, stop_at_eos=False)
        assert result.tokens == base.generate(ids, 24, seed=0, stop_at_eos=False).tokens
        assert any(u["at_round"] < len(result.rounds) for u in result.online["updates"])
        assert all(u["tokens"] > 0 and u["seconds"] > 0 and math.isfinite(u["loss"]) for u in result.online["updates"])
    assert engine.driver.version >= 4


class PerturbingLearner:
    """A stand-in learner: every update returns the starting weights plus fresh seeded noise (half of each
    tensor's spread), so the drafter differs from one swap to the next."""

    def __init__(self, net):
        self.base = {k: v.detach().clone() for k, v in net.state_dict().items()}
        self.calls = 0
        self.generator = torch.Generator().manual_seed(0)

    def remember(self, traffic):
        pass

    def update(self, current):
        self.calls += 1
        state = {
            k: v + 0.5 * (v.std() if v.numel() > 1 else 1.0) * torch.randn(v.shape, generator=self.generator)
            if v.is_floating_point()
            else v
            for k, v in self.base.items()
        }
        return state, {"tokens": 0, "loss": 0.0, "reject_loss": float("nan"), "rejections": 0}


# The sample of the two tests below, larger than the suite's 1000 (tests/test_engine_sampling.py): at γ = 1 the
# broken rule moves the (t2, t3) joint less (w² ≈ 0.082, 63 df, from p = 1.9e-8 at n = 1000), so n = 1000 would reach
# p < 1e-6 with power 0.74 only; n = 1500 reaches it with power 0.992, and at α = 0.001 the correct-rule test would
# reject this broken rule with power 0.99994.
CHANGING_SAMPLES = 1500


def _changing_engine(tiny_v8, verifier=None) -> SpeculativeEngine:
    target, _ = tiny_v8
    plan = OnlinePlan(every_prompts=None, every_tokens=2)
    engine = online_engine(target, "eagle", plan, gamma=1, sampling=SamplingParams(temperature=1.0), verifier=verifier)
    engine.driver.learner = PerturbingLearner(engine.driver.net)
    return engine


def test_sampling_matches_the_target_distribution_with_a_drafter_that_changes_mid_run(tiny_v8):
    """Power: n = CHANGING_SAMPLES = 1500 rejects the broken rule with a changing drafter at p < 1e-6 with power
    0.992 (the next test, at the same n); the correct rule passes at α = 0.001."""
    engine = _changing_engine(tiny_v8)
    p23, p4, alpha = sampled_pvalues(engine, tiny_v8[0].model, CHANGING_SAMPLES)
    assert 0.05 < alpha < 0.95
    assert engine.driver.learner.calls > 1000, "the drafter must change within the run"
    assert p23 > 1e-3 and p4 > 1e-3


def test_the_sampling_test_rejects_a_broken_rule_with_a_changing_drafter(tiny_v8):
    """At the n of the test above (1500): the broken rule's power to reach p < 1e-6 is 0.992."""
    engine = _changing_engine(tiny_v8, Verifier(sampling_rows=broken_sampling_rows))
    p23, p4, _ = sampled_pvalues(engine, tiny_v8[0].model, CHANGING_SAMPLES)
    assert min(p23, p4) < 1e-6


def test_trace_lines_up_with_the_targets_own_forward(tiny_v8):
    """Each position's recorded features are the target's at that position, and every refused draft differs
    from the token the target put there (greedy)."""
    target, _ = tiny_v8
    engine = online_engine(target, "eagle3", OnlinePlan(every_prompts=5))
    seen = []
    engine.driver.learner.remember = seen.append
    engine.generate(PROMPT, 16, seed=0, stop_at_eos=False)
    traffic = seen[0]
    engine.decoder.reset(1, traffic.ids.numel() + 2)
    with torch.inference_mode():
        out = engine.decoder.forward(traffic.ids[None], logits="none", hidden_layers=engine.feature_layers)
    assert traffic.features["final"].shape[0] == traffic.ids.numel()
    # the same values up to summation order (the rounds' forwards vs one forward over the whole sequence): the
    # random model's activations reach ~100, so the error is measured against each tensor's scale
    for key, expected in [("final", out.hidden[0])] + [(k, out.layer_hidden[k][0]) for k in engine.feature_layers]:
        error = (traffic.features[key] - expected).abs().max() / expected.abs().max()
        assert error < 1e-5, (key, float(error))
    assert traffic.rejected
    ids = traffic.ids.tolist()
    for row, depth, token in traffic.rejected:
        if row + depth + 1 < len(ids):
            assert ids[row + depth + 1] != token


def test_the_learner_raises_acceptance_on_repeated_traffic(tiny_v8):
    """From scratch, a few updates on the same prompt raise α: the updates teach the drafter."""
    target, _ = tiny_v8
    engine = online_engine(target, "eagle", OnlinePlan(start="scratch", every_prompts=1, steps=8, lr=3e-3), gamma=3)
    # a new seed each time: the same (prompt, seed) twice in a row is a re-timed attempt, replayed without training
    alphas = [engine.generate(PROMPT, 24, seed=i, stop_at_eos=False).alpha for i in range(6)]
    assert alphas[-1] > alphas[0] + 0.2, alphas


def test_a_retimed_attempt_replays_the_versions_without_training(tiny_v8):
    target, _ = tiny_v8
    engine = online_engine(target, "eagle3", OnlinePlan(every_prompts=None, every_tokens=3, steps=1))
    engine.generate(PROMPT, 10, seed=1, stop_at_eos=False)
    first = engine.generate(PROMPT[:-3], 12, seed=2, stop_at_eos=False)
    version, calls = engine.driver.version, []
    update = engine.driver.learner.update
    engine.driver.learner.update = lambda current: calls.append(1) or update(current)
    again = engine.generate(PROMPT[:-3], 12, seed=2, stop_at_eos=False)
    assert not calls, "a re-timed attempt trains nothing"
    assert list(again.rounds.accepted) == list(first.rounds.accepted)
    assert again.online == first.online and engine.driver.version == version
    nxt = engine.generate(PROMPT[:-5], 12, seed=3, stop_at_eos=False)
    assert nxt.online["version"] == version


def test_the_rejected_term_is_minus_log_one_minus_q():
    logits = [torch.log(torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]]))]  # one step, rows t = 0, 1
    learner = OnlineLearner.__new__(OnlineLearner)
    learner.position = torch.tensor([0, -1, 1, 2])  # target ids 0, 2, 3 are the draft vocabulary; id 1 is not
    loss, count = learner.rejected_loss(logits, [[(0, 1, 0), (1, 1, 2), (1, 2, 0), (0, 1, 1)]])
    assert count == 2  # depth 2 is not unrolled, id 1 is outside the draft vocabulary
    assert loss.item() == pytest.approx((-math.log(0.5) - math.log(0.2)) / 2, rel=1e-5)


def test_online_refuses_a_drafter_that_is_not_trained(tiny_v8):
    target, draft = tiny_v8
    drafter = make_drafter("draft-model", target, {"model": "tiny-random-v8-draft"})
    with pytest.raises(SpecbenchError, match="not a trained drafter"):
        SpeculativeEngine(target, drafter, gamma=2, driver=OnlineDriver())

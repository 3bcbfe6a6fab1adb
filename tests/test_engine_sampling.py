"""Sampling losslessness: speculative sampling draws from exactly the target's distribution.

On a random 8-token model the exact distribution of the first generated tokens is computed
by enumerating every continuation; thousands of speculative generations are compared with it
by chi-square tests. The same tests run against a deliberately broken acceptance rule (on a
rejection it samples from p instead of the residual max(p − q, 0)) and must reject it, which
shows they have the power to catch a real bug.

On the CPU the engine verifies a chain with the target's LM head row by row, only for the rows
whose acceptance is decided (`verify_sampling_rows`): the tests count the head's calls to show
that this path is the one measured, and break it too.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy import stats

from specbench.engine.drafters import make_drafter
from specbench.engine.loop import SpeculativeEngine, Verifier
from specbench.engine.sampling import SamplingParams
from specbench.engine.verify import SampledRows, Verdict, draw_exponential_race, verify_chain_rows, verify_sampling

VOCAB = 8
# ten arbitrary ids followed by the model's own greedy continuation, so that prompt lookup
# (n-gram) finds matches the target often agrees with
PROMPT = [3, 1, 4, 1, 5, 2, 6, 5, 3, 5, 0, 3, 6, 5, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1]
# The sample size, the smallest that keeps the tests' power (measured with these seeds, range(n)): the weakest broken
# rule here, the draft model at T = 1, moves the (t2, t3) joint by an effect w² = Σ (p' − p)² / p = 0.149 (63 df), so
# at n = 1000 its chi-square is non-central with λ = 149 and exceeds the p < 1e-6 bound with probability 0.9996 (the
# companion test measures p = 6e-20; n = 750 would give power 0.97, n = 500 0.60). At α = 0.001 a correct rule fails
# one p-value in a thousand by chance; the fixed seeds make every run the same.
SAMPLES = 1000
NEW = 4  # t1 from the prefill, then one round of γ = 2 drafts: t2, t3 (drafts/corrections), t4 (bonus/correction)


def broken_sampling(draft_tokens, draft_probs, target_probs, uniform, exponential):
    """The classic bug: after a rejection, draw from p instead of norm(max(p − q, 0))."""
    right = verify_sampling(draft_tokens, draft_probs, target_probs, uniform, exponential)
    rows = torch.arange(draft_tokens.shape[0])
    return Verdict(right.accepted, draw_exponential_race(target_probs[rows, right.accepted], exponential))


class BrokenRows(SampledRows):
    """The same bug in the row-by-row rule: after a rejection, draw from p."""

    def recovered(self, i, p):
        return p


def broken_sampling_rows(draft_tokens, draft_probs, target_row, uniform, exponential):
    return verify_chain_rows(draft_tokens, target_row, BrokenRows(draft_tokens, draft_probs, uniform, exponential))


def reference_warp(logits: torch.Tensor, temperature: float, top_k: int) -> torch.Tensor:
    """Written independently of specbench.engine.sampling: softmax(logits / T) over the top k."""
    scaled = logits.double() / temperature
    if top_k:
        cut = scaled.sort(-1, descending=True).values[..., top_k - 1 : top_k]
        scaled = torch.where(scaled >= cut, scaled, torch.full_like(scaled, -torch.inf))
    return scaled.softmax(-1)


def exact_distributions(model, temperature: float, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """P(t2, t3) [V, V] and P(t4) [V] under target-only sampling, by enumerating t1..t3."""
    seqs = torch.tensor([PROMPT + list(t) for t in itertools.product(range(VOCAB), repeat=3)])  # [V^3, P+3]
    with torch.inference_mode():
        logits = model(seqs).logits  # [V^3, P+3, V]
    n = len(PROMPT)
    probs = reference_warp(logits[:, n - 1 : n + 3], temperature, top_k)  # p(t1|x), p(t2|x,t1), p(t3|..), p(t4|..)
    t = seqs[:, n : n + 3]  # [V^3, 3]
    p1 = probs[:, 0].gather(1, t[:, :1]).squeeze(1)
    p2 = probs[:, 1].gather(1, t[:, 1:2]).squeeze(1)
    p3 = probs[:, 2].gather(1, t[:, 2:3]).squeeze(1)
    path = p1 * p2 * p3  # P(t1, t2, t3) for every triple
    joint23 = np.zeros((VOCAB, VOCAB))
    np.add.at(joint23, (t[:, 1].numpy(), t[:, 2].numpy()), path.numpy())
    marginal4 = (path[:, None] * probs[:, 3]).sum(0).numpy()
    return joint23, marginal4


def chi_square_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Goodness of fit; cells with expected count < 5 are pooled into one."""
    counts, expected = counts.ravel(), probs.ravel() * counts.sum()
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue)


def count_head_calls(engine: SpeculativeEngine) -> list[int]:
    """Count the engine's row-by-row LM head calls (one list entry per call)."""
    calls: list[int] = []
    head = engine.decoder.head

    def counted(hidden):
        calls.append(hidden.shape[1])
        return head(hidden)

    engine.decoder.head = counted
    return calls


def sample_counts(
    engine: SpeculativeEngine, samples: int = SAMPLES, lazy: bool | None = None
) -> tuple[np.ndarray, np.ndarray, float]:
    """Counts of (t2, t3) and t4 over ``samples`` generations, and the observed α. ``lazy`` True: check
    that every round computed exactly accepted + 1 rows of the LM head, one at a time (the row-by-row
    rule ran); False: that the head never ran alone (the batched rule ran); None: no check."""
    joint23, marginal4 = np.zeros((VOCAB, VOCAB)), np.zeros(VOCAB)
    drafted = accepted = 0
    calls = count_head_calls(engine)
    for seed in range(samples):
        before = len(calls)
        result = engine.generate(PROMPT, NEW, seed=seed, stop_at_eos=False)
        if lazy is not None:
            expected = result.accepted + len(result.rounds) if lazy else 0
            assert len(calls) - before == expected, "the expected chain rule must run"
        t = result.tokens
        joint23[t[1], t[2]] += 1
        marginal4[t[3]] += 1
        drafted, accepted = drafted + result.drafted, accepted + result.accepted
    assert set(calls) <= {1}
    return joint23, marginal4, accepted / drafted if drafted else float("nan")


def sampled_pvalues(
    engine: SpeculativeEngine,
    model,
    samples: int = SAMPLES,
    temperature: float = 1.0,
    top_k: int = 0,
    lazy: bool | None = None,
) -> tuple[float, float, float]:
    """Chi-square p-values of ``samples`` generations through ``engine`` against the exact target
    distribution of ``model``: (joint of tokens 2-3, marginal of token 4, observed α); ``lazy``: see
    `sample_counts`."""
    joint23, marginal4 = exact_distributions(model, temperature, top_k)
    counts23, counts4, alpha = sample_counts(engine, samples, lazy)
    return chi_square_pvalue(counts23, joint23), chi_square_pvalue(counts4, marginal4), alpha


CASES = {
    "draft-model T=1": ("draft-model", SamplingParams(temperature=1.0)),
    "draft-model T=0.7 top-k 5": ("draft-model", SamplingParams(temperature=0.7, top_k=5)),
    "ngram T=1": ("ngram", SamplingParams(temperature=1.0)),
}


def _engine(tiny_v8, drafter_name, sampling, verifier=None):
    target, _ = tiny_v8
    params = {"model": "tiny-random-v8-draft"} if drafter_name == "draft-model" else {"n_min": 1, "n_max": 2}
    drafter = make_drafter(drafter_name, target, params)
    return SpeculativeEngine(target, drafter, gamma=2, sampling=sampling, verifier=verifier)


@pytest.mark.parametrize("case", list(CASES))
def test_speculative_sampling_matches_target_distribution(tiny_v8, case):
    """Power: n = SAMPLES = 1000 rejects the broken rule of the same drafter with p < 1e-6 (power 0.9996 for the
    draft model at T = 1, the weakest effect; its companion below measures p = 6e-20, the n-gram's p = 1e-40);
    the correct rule passes at α = 0.001."""
    drafter_name, sampling = CASES[case]
    p23, p4, alpha = sampled_pvalues(
        _engine(tiny_v8, drafter_name, sampling),
        tiny_v8[0].model,
        temperature=sampling.temperature,
        top_k=sampling.top_k,
        lazy=True,
    )
    assert 0.05 < alpha < 0.95, "drafts must be both accepted and rejected for the test to mean anything"
    assert p23 > 1e-3
    assert p4 > 1e-3


@pytest.mark.parametrize("case", ["draft-model T=1", "ngram T=1"])
def test_broken_acceptance_rule_is_detected(tiny_v8, case):
    """The broken row-by-row rule (the engine's path on the CPU) is caught: at n = 1000 the draft model's joint
    (t2, t3) gives p = 6e-20 and the n-gram's p = 1e-40, both far below 1e-6 (power 0.9996 and ≈ 1)."""
    drafter_name, sampling = CASES[case]
    engine = _engine(tiny_v8, drafter_name, sampling, verifier=Verifier(sampling_rows=broken_sampling_rows))
    p23, p4, _ = sampled_pvalues(engine, tiny_v8[0].model, SAMPLES, sampling.temperature, sampling.top_k, lazy=True)
    assert min(p23, p4) < 1e-6


def test_broken_batched_rule_is_detected(tiny_v8):
    """A swapped batched rule takes the batched path (all rows at once: no head calls) and is caught: at n = 1000
    the joint (t2, t3) gives p = 1e-40 (effect w² = 0.23, power ≈ 1 at p < 1e-6)."""
    drafter_name, sampling = CASES["ngram T=1"]
    engine = _engine(tiny_v8, drafter_name, sampling, verifier=Verifier(sampling=broken_sampling))
    p23, p4, _ = sampled_pvalues(engine, tiny_v8[0].model, SAMPLES, lazy=False)
    assert min(p23, p4) < 1e-6


def test_target_only_sampling_matches_exact_distribution(tiny_v8):
    """The reference itself: γ = 0 sampling through the engine against the enumeration, at the n (1000) whose power
    the broken rules above show; it passes at α = 0.001."""
    sampling = SamplingParams(temperature=1.0)
    p23, p4, _ = sampled_pvalues(
        SpeculativeEngine(tiny_v8[0], None, gamma=0, sampling=sampling), tiny_v8[0].model, SAMPLES
    )
    assert p23 > 1e-3
    assert p4 > 1e-3


# ---------------------------------------------------------------------------------------- rule level


def _chain_samples(verifier, draft_is_one_hot: bool, rows: int = 200_000, k: int = 3, seed: int = 0):
    """Many independent rounds of one fixed (p, q) problem, vectorised over the batch."""
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(k + 1, VOCAB, generator=g).pow(3)
    p = (p / p.sum(-1, keepdim=True)).expand(rows, k + 1, VOCAB)
    q = torch.rand(k, VOCAB, generator=g).pow(3)
    q = (q / q.sum(-1, keepdim=True)).expand(rows, k, VOCAB)
    if draft_is_one_hot:
        drafts = q[0].argmax(-1).expand(rows, k)  # a fixed proposal, as prompt lookup makes
        probs = None
    else:
        drafts = torch.multinomial(q.reshape(-1, VOCAB), 1, generator=g).reshape(rows, k)
        probs = q
    verdict = verifier(
        drafts, probs, p, torch.rand(rows, k, generator=g), torch.empty(rows, VOCAB).exponential_(generator=g)
    )
    first = torch.where(verdict.accepted > 0, drafts[:, 0], verdict.next_token)
    second = torch.where(verdict.accepted > 1, drafts[:, 1], verdict.next_token)
    emitted_two = verdict.accepted >= 1
    return p[0].double().numpy(), first.numpy(), second[emitted_two].numpy()


@pytest.mark.parametrize("one_hot", [False, True])
def test_verify_rule_emits_target_marginals(one_hot):
    p, first, second = _chain_samples(verify_sampling, one_hot)
    assert chi_square_pvalue(np.bincount(first, minlength=VOCAB), p[0]) > 1e-3
    assert chi_square_pvalue(np.bincount(second, minlength=VOCAB), p[1]) > 1e-3


@pytest.mark.parametrize("one_hot", [False, True])
def test_verify_rule_test_has_power(one_hot):
    p, first, _ = _chain_samples(broken_sampling, one_hot)
    assert chi_square_pvalue(np.bincount(first, minlength=VOCAB), p[0]) < 1e-6

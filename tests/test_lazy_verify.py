"""Chain verification with the target's rows on demand (`verify_chain_rows`): the same verdict as the
batched rules from the same random numbers, and no row of the LM head after the first rejection.

Rule level only (random tensors, no model): the engine-level check that the lazy path is the one
used and keeps the target distribution is in tests/test_engine_sampling.py.
"""

from __future__ import annotations

import pytest
import torch

from specbench.engine.verify import verify_greedy, verify_greedy_rows, verify_sampling, verify_sampling_rows

VOCAB = 12
K = 4


def _problem(seed: int, one_hot: bool, k: int = K):
    """A random chain problem whose drafts are often, but not always, accepted."""
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(1, k + 1, VOCAB, generator=g).pow(4)
    p = p / p.sum(-1, keepdim=True)  # [1, K+1, V]
    q = 0.5 * p[:, :k] + 0.5 * torch.rand(1, k, VOCAB, generator=g).pow(4)
    q = q / q.sum(-1, keepdim=True)  # [1, K, V], close to p so that drafts get accepted
    if one_hot:  # prompt-lookup style: a fixed proposal, often the target's likeliest token
        drafts = torch.where(
            torch.rand(1, k, generator=g) < 0.7, p[:, :k].argmax(-1), torch.randint(VOCAB, (1, k), generator=g)
        )
        probs = None
    else:
        drafts = torch.multinomial(q[0], 1, generator=g).reshape(1, k)
        probs = q
    uniform = torch.rand(1, k, generator=g)
    exponential = torch.empty(1, VOCAB).exponential_(generator=g)
    return drafts, probs, p, uniform, exponential


def _rows(table: torch.Tensor, asked: list[int]):
    """target_row over a precomputed [1, K+1, V] table, recording the rows asked for."""

    def row(i: int) -> torch.Tensor:
        asked.append(i)
        return table[0, i]

    return row


@pytest.mark.parametrize("one_hot", [False, True])
def test_sampled_rows_verdict_equals_verify_sampling(one_hot):
    """Identical (accepted, token) for 400 random problems, and exactly accepted + 1 rows asked for
    (rows 0..m when the first rejection is at m; all K + 1 when every draft is kept)."""
    outcomes = set()
    for seed in range(400):
        drafts, probs, p, uniform, exponential = _problem(seed, one_hot)
        asked: list[int] = []
        lazy = verify_sampling_rows(drafts, probs, _rows(p, asked), uniform, exponential)
        full = verify_sampling(drafts, probs, p, uniform, exponential)
        assert torch.equal(lazy.accepted, full.accepted), seed
        assert torch.equal(lazy.next_token, full.next_token), seed
        assert asked == list(range(int(full.accepted[0]) + 1)), seed
        outcomes.add(int(full.accepted[0]))
    assert outcomes == set(range(K + 1)), "every rejection position (and all kept) must be exercised"


def test_sampled_rows_with_nothing_drafted_draw_from_the_first_row():
    drafts, _, p, uniform, exponential = _problem(0, False, k=0)
    asked: list[int] = []
    lazy = verify_sampling_rows(drafts, None, _rows(p, asked), uniform, exponential)
    full = verify_sampling(drafts, None, p, uniform, exponential)
    assert asked == [0] and int(lazy.accepted[0]) == 0 and torch.equal(lazy.next_token, full.next_token)


def test_sampled_rows_draw_from_p_where_the_residual_is_empty():
    """p_0 == q_0 and a draft x with p_0(x) = q_0(x) = 0: x is rejected (0 < 0 fails) and the residual
    max(p − q, 0) is empty; both rules then draw from p_0 — many draws, each the batched rule's."""
    for seed in range(50):
        drafts, _, p, uniform, exponential = _problem(seed, False)
        x = int(drafts[0, 0])
        p[0, 0, x] = 0.0
        p[0, 0] /= p[0, 0].sum()
        q = p[:, :K].clone()
        asked: list[int] = []
        lazy = verify_sampling_rows(drafts, q, _rows(p, asked), uniform, exponential)
        full = verify_sampling(drafts, q, p, uniform, exponential)
        assert int(full.accepted[0]) == 0 and asked == [0]
        assert torch.equal(lazy.next_token, full.next_token) and int(lazy.next_token[0]) != x


def test_greedy_rows_still_equal_verify_greedy():
    """The greedy rule through the shared row loop (tests/test_bf16.py checks the rows asked for)."""
    g = torch.Generator().manual_seed(5)
    for _ in range(100):
        logits = torch.randn(1, K + 1, VOCAB, generator=g)
        drafts = torch.where(
            torch.rand(1, K, generator=g) < 0.8, logits[:, :K].argmax(-1), torch.randint(VOCAB, (1, K), generator=g)
        )
        asked: list[int] = []
        lazy, full = verify_greedy_rows(drafts, _rows(logits, asked)), verify_greedy(drafts, logits)
        assert torch.equal(lazy.accepted, full.accepted) and torch.equal(lazy.next_token, full.next_token)
        assert asked == list(range(int(full.accepted[0]) + 1))

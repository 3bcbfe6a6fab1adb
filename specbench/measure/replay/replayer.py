"""Offline replay: the speculative run of every γ, derived from one target trajectory.

A live sweep runs the whole generation once per γ. Most of that work is shared: every round of
a chain draft is decided by the target's tokens and by what the drafter would propose at the
round's start, and both are functions of the trajectory alone. Replay computes them once.

Notation. A generation emits tokens y_0..y_{N−1} (y_0 from the prefill); a round *starts at
t* when t tokens have been emitted (1 ≤ t ≤ N − 1). It asks the drafter for
γ_req(t) = min(γ, max_new − t − 1) tokens — exactly the live loop's cap — and the drafter
offers γ(t) = min(γ_req(t), available(t)) of them (the round's own γ; an n-gram match may be
shorter). Draft i of
the round predicts position t + i.

Coins. For each start t and draft i let a(t, i) = P(draft i accepted | drafts < i accepted,
trajectory). Then P(J ≥ j | t) = Π_{i<j} a(t, i) and the round emits e = min(J + 1, N − t)
tokens (cut at the stop token exactly as the live loop cuts), so the next round starts at
t + e. `round_law` turns a(t, i) into P_t(J = j) for every γ at once and `walk_rounds` follows
the rounds. What a(t, i) is:

* Greedy (temperature 0): a(t, i) = 1{d_i(t) = y_{t+i}} ∈ {0, 1}, with d_i(t) the drafter's
  greedy token. A draft model teacher-forced along the trajectory predicts, at position s,
  g_s = argmax q(· | prompt, y_<s); while every earlier draft matched, the live drafter's
  context *is* y_<s, so d_i(t) = g_{t+i} and a(t, i) = 1{g_{t+i} = y_{t+i}} — one forward over
  the whole trajectory serves every t and γ. Prompt lookup is re-run on prompt + y_<t
  (its proposal depends on the round start). The walk is then one deterministic path: the
  live rounds, accepted lengths and τ, exactly.
* Sampling (temperature > 0): with p_s, q_s the target's and drafter's warped distributions at
  position s along a trajectory y sampled from the target, a(t, i) = w_{t+i} with

      w_s = min(1, q_s(y_s) / p_s(y_s)).

  Claim: drawing y from the target and then accepting draft positions by independent coins
  w_s gives (emitted tokens, rounds, accepted counts) exactly the law of live speculative
  sampling. Proof per round: live, accepting x_t..x_{t+j−1} and then rejecting and emitting
  x_{t+j} has probability Π_{i<j} min(p, q)(x_{t+i}) · max(p − q, 0)(x_{t+j}) (drafts kept
  with probability min(1, p/q), the recovered token drawn from the normalised residual); in
  replay it is Π_{i<j} p(x_{t+i}) w_{t+i} · p(x_{t+j}) (1 − w_{t+j}), the same product since
  p · min(1, q/p) = min(p, q) and p · (1 − min(1, q/p)) = max(p − q, 0); accepting all γ(t) and
  drawing the bonus has Π min(p, q) · p on both sides. Rounds factorise, and the drafter's
  q at position s is conditioned on y_<s in both. For a model-free drafter q is one-hot on its
  proposal d, so w = 1{y_s = d}: the replayed rounds are a realised sample of the live law. A
  model drafter gives fractional coins; E[w_s | y_<s] = Σ_x min(p_s(x), q_s(x)) is the
  per-position expected acceptance, kept as a diagnostic (`ChainTrace.expected`). Chaining
  those expectations along the trajectory instead would condition later positions on
  target-sampled rather than accepted tokens, which is biased (badly so for prompt lookup).

Expectations. With fractional coins the walk is a distribution over round starts:
π(1) = 1 and π(t + e_t(j)) += π(t) P_t(J = j). Expected rounds, accepted and drafted tokens,
the accepted-length histogram and per-position counts are sums over t weighted by π (for a
deterministic walk, the realised values). Their covariance given the trajectory comes from a
backward recursion on first and second moments (`walk_rounds`); the variation from one
trajectory to another is estimated by batch means over position blocks
(`specbench.measure.replay.units` combines both into intervals).

Trees. A static tree round accepts as deep as the sequence of ranks of the target's tokens
among the drafter's candidates stays inside the tree's path set; `ChainTrace.ranks` records
the greedy rank of every trajectory token for a model drafter, and `walk_rounds` only needs
P_t(J = j) and the tokens drafted per start — see docs/replay.md for what remains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specbench.catalogue import drafters as catalogue
from specbench.engine.decoder import make_decoder
from specbench.engine.drafters.ngram import find_continuation
from specbench.engine.loop import SpeculativeEngine
from specbench.engine.sampling import probabilities
from specbench.errors import SpecbenchError
from specbench.models.memory import array_bytes, require

if TYPE_CHECKING:  # torch is imported where tensors are handled, not at module import
    import torch

CHUNK = 256  # positions per teacher-forced forward (bounds the [chunk, vocab] logits)


# ----------------------------------------------------------------------------- trajectory


@dataclass(frozen=True)
class Trajectory:
    """A target-only generation, plus (when it stopped at a stop token) what the target would
    have produced after it: live rounds may accept drafts past the stop token, which count as
    accepted although they are never emitted."""

    prompt: tuple[int, ...]
    tokens: tuple[int, ...]  # y_0..y_{M−1}; the first n_stop were emitted
    n_stop: int  # N: tokens the generation emitted
    max_new_tokens: int

    @property
    def starts(self) -> int:
        """Rounds can start at t = 1..N−1."""
        return max(self.n_stop - 1, 0)


def extension_length(n_stop: int, max_new_tokens: int, max_gamma: int) -> int:
    """Tokens past the stop that a round of γ ≤ ``max_gamma`` can test.

    Drafts of a round at t ≤ N − 1 sit at positions ≤ min(N − 2 + max_gamma, max_new − 2).
    """
    return max(0, min(max_gamma - 1, max_new_tokens - 1 - n_stop))


def make_trajectory(
    target,
    prompt: list[int],
    output: list[int],
    *,
    stop_reason: str,
    max_new_tokens: int,
    max_gamma: int,
    sampling,
    seed: int,
    decoder=None,
) -> Trajectory:
    """The replay trajectory of one baseline generation (``output`` is its token list).

    After a stop at a stop token the target's own continuation (greedy, or sampled with
    ``seed``) is appended for `extension_length` tokens, generated target-only past the stop.
    """
    tokens = list(output)
    extra = extension_length(len(tokens), max_new_tokens, max_gamma) if stop_reason == "eos" else 0
    if extra:
        engine = SpeculativeEngine(target, None, gamma=0, sampling=sampling, decoder=decoder)
        tokens += engine.generate(list(prompt) + tokens, extra, seed=seed, stop_at_eos=False).tokens
    return Trajectory(tuple(prompt), tuple(tokens), len(output), max_new_tokens)


# ----------------------------------------------------------------------------- traces


@dataclass
class ChainTrace:
    """What one drafter would do at every round start of one trajectory (chain drafts).

    accept [S, D]: a(t, i) for t = s + 1 (module docstring), D the deepest γ replayed;
    available [S]: drafts the drafter can offer at t (a model drafter: D);
    model_steps: drafter forwards per round = drafts requested (model) or 0 (model-free);
    exact: every coin is 0 or 1 — the walk is one deterministic path;
    expected [S]: Σ_x min(p_t, q_t)(x), the expected acceptance of a first draft at t
        (sampling with a model drafter; None otherwise);
    ranks [M]: greedy rank of y_s among the drafter's candidates at s (model drafters, greedy;
        −1 at s = 0), what static trees need.
    """

    drafter: str
    accept: np.ndarray
    available: np.ndarray
    model_steps: bool
    exact: bool
    expected: np.ndarray | None = None
    ranks: np.ndarray | None = None


def _positional(values: np.ndarray, starts: int, max_gamma: int) -> np.ndarray:
    """[S, D] matrix m[s, i] = values[s + 1 + i] (0 past the end) for per-position coins."""
    padded = np.zeros(starts + max_gamma + 1)
    usable = min(len(values), len(padded))
    padded[:usable] = values[:usable]
    return np.lib.stride_tricks.sliding_window_view(padded[1:], max_gamma)[:starts].copy()


def on_target_vocab(logits: torch.Tensor, vocab: int) -> torch.Tensor:
    """Drafter logits [..., V_d] on the target's ids [..., V_t]: cut, or padded with −inf."""
    import torch

    extra = vocab - logits.shape[-1]
    if extra < 0:
        return logits[..., :vocab]
    if extra > 0:
        return torch.nn.functional.pad(logits, (0, extra), value=float("-inf"))
    return logits


def prediction_chunks(decoder, prompt: tuple[int, ...], tokens: tuple[int, ...], chunk: int = CHUNK):
    """Teacher forcing: yields (s0, logits [C, V]) where row r predicts tokens[s0 + r], s0 ≥ 1.

    One causal forward over prompt + tokens[:-1] in chunks (the prompt and y_0 first, their
    last position predicting y_1), so each row sees exactly y_<s — the context a live drafter
    or verifier has at position s when every earlier token was accepted.
    """
    import torch

    m = len(tokens)
    if m < 2:
        return
    device = decoder.device
    ids = torch.tensor([list(prompt) + list(tokens[:-1])], dtype=torch.long, device=device)  # [1, P + M − 1]
    start = len(prompt) + 1
    decoder.reset(1, ids.shape[1] + 1)
    yield 1, decoder.forward(ids[:, :start], logits="last").logits[0]  # [1, V]: predicts y_1
    for s in range(start, ids.shape[1], chunk):
        yield s - len(prompt) + 1, decoder.forward(ids[:, s : s + chunk], logits="all").logits[0]  # [C, V]


def greedy_ranks(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Rank of tokens[r] in logits [C, V] row r (0 = the argmax; ties broken by lower id, as argmax)."""
    import torch

    own = logits.gather(-1, tokens[:, None])  # [C, 1]
    ids = torch.arange(logits.shape[-1], device=logits.device)[None, :]
    return (logits > own).sum(-1) + ((logits == own) & (ids < tokens[:, None])).sum(-1)


def acceptance_coins(p: torch.Tensor, q: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row r: w = min(1, q(y) / p(y)) at y = tokens[r] and the expected acceptance Σ min(p, q).

    p, q [C, V] warped distributions; tokens [C]. A trajectory token with p(y) = 0 (possible only
    through rounding at a top-k/top-p edge) gets w = 1{q(y) > 0}.
    """
    import torch

    p_y = p.gather(-1, tokens[:, None]).squeeze(-1)
    q_y = q.gather(-1, tokens[:, None]).squeeze(-1)
    w = torch.where(p_y > 0, (q_y / p_y.clamp_min(1e-30)).clamp(max=1.0), (q_y > 0).float())
    return w, torch.minimum(p, q).sum(-1)


class Replayer:
    """Builds chain traces for one target model (teacher-forced forwards, prompt lookup)."""

    def __init__(self, target, *, decoder=None, chunk: int = CHUNK):
        self.target = target
        self.decoder = decoder or make_decoder(target.model)
        self.chunk = chunk
        self._draft_decoders: dict[int, object] = {}

    def trajectory(
        self, prompt, output, *, stop_reason: str, max_new_tokens: int, max_gamma: int, sampling, seed: int
    ) -> Trajectory:
        return make_trajectory(
            self.target,
            prompt,
            output,
            stop_reason=stop_reason,
            max_new_tokens=max_new_tokens,
            max_gamma=max_gamma,
            sampling=sampling,
            seed=seed,
            decoder=self.decoder,
        )

    def trace(self, drafter, trajectory: Trajectory, max_gamma: int, sampling, kind: str | None = None) -> ChainTrace:
        """The drafter's chain trace along ``trajectory`` for every γ up to ``max_gamma``, by the replay
        method the catalogue entry of its ``kind`` (default: the drafter's name) names: prompt lookup
        re-run, or one teacher-forced drafter forward."""
        name = kind if kind else getattr(drafter, "name", type(drafter).__name__)
        method = catalogue.get(name).replay if name in catalogue.DRAFTERS else None
        if method == "prompt-lookup":
            return self._prompt_lookup(drafter, trajectory, max_gamma, name)
        if method == "teacher-forced":
            return self._teacher_forced_trace(drafter, trajectory, max_gamma, sampling, name)
        raise SpecbenchError(
            f"replay does not support drafter '{name}' yet (replayable: {', '.join(catalogue.replayable())})"
        )

    # ------------------------------------------------------------------ prompt lookup
    def _prompt_lookup(self, drafter, trajectory: Trajectory, max_gamma: int, kind: str) -> ChainTrace:
        """Prompt lookup re-run on prompt + y_<t for every start t; coins 1{d_i(t) = y_{t+i}}.

        At temperature > 0 this is the coupling's w for a one-hot q (module docstring), so the
        same trace serves greedy and sampling.
        """
        import torch

        n_starts = trajectory.starts
        tokens = np.asarray(trajectory.tokens, dtype=np.int64)
        sequence = torch.tensor(list(trajectory.prompt) + list(trajectory.tokens), dtype=torch.long)
        accept = np.zeros((n_starts, max_gamma))
        available = np.zeros(n_starts, dtype=np.int64)
        for s in range(n_starts):
            t = s + 1
            proposal = find_continuation(
                sequence[: len(trajectory.prompt) + t], drafter.n_min, drafter.n_max, max_gamma
            ).numpy()
            truth = tokens[t : t + len(proposal)]
            available[s] = len(proposal)
            accept[s, : len(truth)] = proposal[: len(truth)] == truth
        return ChainTrace(kind, accept, available, model_steps=False, exact=True)

    # ------------------------------------------------------------------ draft model
    def _draft_decoder(self, drafter):
        model = drafter.decoder.model
        if id(model) not in self._draft_decoders:
            self._draft_decoders[id(model)] = make_decoder(model)
        return self._draft_decoders[id(model)]

    def _teacher_forced_trace(self, drafter, trajectory: Trajectory, max_gamma: int, sampling, kind: str) -> ChainTrace:
        """One teacher-forced drafter forward (and, when sampling, one of the target) along y."""
        import torch

        with torch.inference_mode():
            coins, expected, ranks = self._teacher_forced(drafter, trajectory, sampling)
        n_starts = trajectory.starts
        accept = _positional(coins, n_starts, max_gamma)
        exact = bool(np.isin(accept, (0.0, 1.0)).all())
        return ChainTrace(
            kind,
            accept,
            np.full(n_starts, max_gamma, dtype=np.int64),
            model_steps=True,
            exact=exact,
            expected=None if expected is None else expected[1 : n_starts + 1],
            ranks=ranks,
        )

    def _teacher_forced(self, drafter, trajectory: Trajectory, sampling):
        """Per position s of y: coin w_s (greedy: 1{rank 0}), expected acceptance (sampling), rank (greedy)."""
        import torch

        m = len(trajectory.tokens)
        vocab = int(drafter.target_vocab)
        coins = np.zeros(m)
        expected: np.ndarray | None = None  # sampling only
        ranks: np.ndarray | None = None  # greedy only
        y = torch.tensor(trajectory.tokens, dtype=torch.long, device=self.decoder.device)
        draft_chunks = prediction_chunks(self._draft_decoder(drafter), trajectory.prompt, trajectory.tokens, self.chunk)
        if sampling.greedy:
            ranks = np.full(m, -1, dtype=np.int64)
            for s0, q_logits in draft_chunks:
                q_logits = on_target_vocab(q_logits.float(), vocab)
                rank = greedy_ranks(q_logits, y[s0 : s0 + q_logits.shape[0]].to(q_logits.device)).cpu().numpy()
                ranks[s0 : s0 + len(rank)] = rank
                coins[s0 : s0 + len(rank)] = rank == 0
        else:
            expected = np.zeros(m)
            target_chunks = prediction_chunks(self.decoder, trajectory.prompt, trajectory.tokens, self.chunk)
            for (s0, q_logits), (_, p_logits) in zip(draft_chunks, target_chunks):
                p = probabilities(p_logits, sampling)  # [C, V]
                q = probabilities(on_target_vocab(q_logits.float(), vocab), sampling).to(p.device)
                w, beta = acceptance_coins(p, q, y[s0 : s0 + p.shape[0]])
                coins[s0 : s0 + p.shape[0]] = w.cpu().numpy()
                expected[s0 : s0 + p.shape[0]] = beta.cpu().numpy()
        return coins, expected, ranks


# ----------------------------------------------------------------------------- the walk


@dataclass
class RoundLaw:
    """Per γ and round start: what is asked, drafted, and the law of the accepted length.

    gammas [G]; requested, drafted [G, S]; probs [G, S, D+1] = P_t(J = j);
    survival [S, D+1] = P(J ≥ j) before the γ cap; emit [S, D+1] = min(j + 1, N − t).
    """

    gammas: np.ndarray
    requested: np.ndarray
    drafted: np.ndarray
    probs: np.ndarray
    survival: np.ndarray
    emit: np.ndarray
    n_stop: int
    model_steps: bool
    exact: bool


def round_law(trace: ChainTrace, gammas, n_stop: int, max_new_tokens: int) -> RoundLaw:
    """P_t(J = j) for every γ: P(J ≥ j) = Π_{i<j} a(t, i), truncated at γ(t) drafts.

    J = j < γ(t) with probability P(J ≥ j) − P(J ≥ j + 1), J = γ(t) with probability P(J ≥ γ(t)).
    """
    gammas = np.asarray(sorted(int(g) for g in gammas), dtype=np.int64)
    max_gamma = int(gammas.max())
    if trace.accept.shape[1] < max_gamma:
        raise ValueError(f"trace holds γ up to {trace.accept.shape[1]}, asked γ up to {max_gamma}")
    n_starts = max(n_stop - 1, 0)
    require(  # probs and its two temporaries [G, S, D+1], float64: the replay's largest arrays
        {"round law": 3 * array_bytes((len(gammas), n_starts, max_gamma + 1))},
        f"replaying {len(gammas)} γ up to {max_gamma} over {n_starts} round starts",
    )
    t = np.arange(1, n_starts + 1)
    cap = max_new_tokens - t - 1  # the live loop: never draft past the length limit
    requested = np.minimum(gammas[:, None], cap[None, :])  # [G, S]
    drafted = np.minimum(requested, trace.available[None, :n_starts])
    survival = np.concatenate(
        [np.ones((n_starts, 1)), np.cumprod(trace.accept[:n_starts, :max_gamma], axis=1), np.zeros((n_starts, 1))],
        axis=1,
    )  # [S, D+2]
    j = np.arange(max_gamma + 1)[None, None, :]
    gamma_t = drafted[:, :, None]  # γ(t), the round's own γ
    probs = np.where(
        j < gamma_t, survival[None, :, :-1] - survival[None, :, 1:], np.where(j == gamma_t, survival[None, :, :-1], 0.0)
    )  # [G, S, D+1]
    emit = np.minimum(j[0] + 1, (n_stop - t)[:, None])  # [S, D+1]
    return RoundLaw(gammas, requested, drafted, probs, survival[:, :-1], emit, n_stop, trace.model_steps, trace.exact)


@dataclass
class RealisedPath:
    """One realised path of rounds (the live rounds when the walk is deterministic): per round, the γ asked, the
    tokens drafted, accepted and emitted, and the drafter forwards."""

    requested: list[int]
    drafted: list[int]
    accepted: list[int]
    emitted: list[int]
    draft_steps: list[int]


@dataclass
class GammaReplay:
    """Everything replay knows about one γ on one trajectory.

    tokens: decode tokens (N − 1); mean = E[(rounds, accepted, drafted)]; coin_cov = their
    covariance given the trajectory; block_ss, block_dof, block_size: batch-means statistics of
    the per-position expected (rounds, accepted, drafted) — Σ_k (B_k − B̄)(B_k − B̄)ᵀ over
    ``block_dof + 1`` blocks of ``block_size`` positions; hist [γ+1], attempts, accepts [γ]:
    expected accepted-length histogram and per-position counts; rounds: a realised path
    (deterministic walk: the live one; otherwise one draw of the coins).
    """

    gamma: int
    tokens: int
    mean: np.ndarray
    coin_cov: np.ndarray
    block_ss: np.ndarray
    block_dof: int
    block_size: int
    hist: np.ndarray
    attempts: np.ndarray
    accepts: np.ndarray
    rounds: RealisedPath
    exact: bool

    @property
    def tau(self) -> float:
        """Expected-rounds τ of this trajectory, E-based: tokens ÷ E[rounds]."""
        return self.tokens / self.mean[0] if self.mean[0] > 0 else float("nan")


def block_size(positions: int, gamma: int) -> int:
    """Batch-means block: ≥ 2(γ + 1) positions (a few rounds) and ≥ √positions."""
    return max(2 * (gamma + 1), int(np.ceil(np.sqrt(max(positions, 1)))))


def _batch_means(contrib: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """contrib [S, 3] → (Σ_k (B_k − B̄)(B_k − B̄)ᵀ, blocks − 1) over the complete blocks."""
    blocks = contrib.shape[0] // size
    if blocks < 2:
        return np.zeros((3, 3)), 0
    sums = contrib[: blocks * size].reshape(blocks, size, 3).sum(1)
    centred = sums - sums.mean(0)
    return centred.T @ centred, blocks - 1


def walk_rounds(law: RoundLaw, rng: np.random.Generator | None = None) -> list[GammaReplay]:
    """Walk the rounds of every γ of ``law``: expectations, moments and a realised path.

    Forward: π(1) = 1, π(t + e_t(j)) += π(t) P_t(J = j); expectations weight each start by π.
    Backward, for the per-round vector f = (1, j, γ(t)): with F(t) = Σ f over the rounds from t,
    m₁(t) = Σ_j P_t(j) (f_j + m₁(t')), m₂(t) = Σ_j P_t(j) (f_j f_jᵀ + f_j m₁(t')ᵀ + m₁(t') f_jᵀ + m₂(t'))
    with t' = t + e_t(j), m(N) = 0; Cov[F(1)] = m₂(1) − m₁(1) m₁(1)ᵀ (zero for a deterministic walk).
    A realised path follows the one possible j (deterministic) or draws j ~ P_t (``rng``).
    """
    g_count, n_starts, width = law.probs.shape
    n_stop = law.n_stop
    reach = np.zeros((g_count, n_stop + 1))
    if n_starts:
        reach[:, 1] = 1.0
    for s in range(n_starts):
        t = s + 1
        # numpy 2.4's stub types ufunc.at's indices as integer arrays only; numpy takes a tuple with slices
        np.add.at(reach, (slice(None), t + law.emit[s]), reach[:, t, None] * law.probs[:, s])  # type: ignore[arg-type]
    pi = reach[:, 1:n_stop]  # [G, S]
    j = np.arange(width)
    mean_j = (law.probs * j).sum(-1)  # [G, S]
    per_round = np.stack([np.ones_like(mean_j), mean_j, law.drafted.astype(float)], axis=-1)  # [G, S, 3]
    contrib = pi[..., None] * per_round  # expected (rounds, accepted, drafted) starting at each t

    f = np.stack(
        np.broadcast_arrays(np.ones((g_count, n_starts, width)), j * 1.0, law.drafted[..., None] * 1.0), axis=-1
    )  # [G, S, J, 3]
    m1 = np.zeros((g_count, n_stop + 1, 3))
    m2 = np.zeros((g_count, n_stop + 1, 3, 3))
    for s in reversed(range(n_starts)):
        t, nxt = s + 1, s + 1 + law.emit[s]
        p, a, b1, b2 = law.probs[:, s], f[:, s], m1[:, nxt], m2[:, nxt]  # [G,J], [G,J,3], [G,J,3], [G,J,3,3]
        m1[:, t] = np.einsum("gj,gjc->gc", p, a + b1)
        outer = (
            np.einsum("gjc,gjd->gjcd", a, a)
            + np.einsum("gjc,gjd->gjcd", a, b1)
            + np.einsum("gjc,gjd->gjcd", b1, a)
            + b2
        )
        m2[:, t] = np.einsum("gj,gjcd->gcd", p, outer)

    out = []
    for g, gamma in enumerate(law.gammas):
        gamma = int(gamma)
        mask = np.arange(gamma)[None, :] < law.drafted[g][:, None]  # [S, γ]
        size = block_size(n_starts, gamma)
        ss, dof = _batch_means(contrib[g], size)
        first = m1[g, 1] if n_starts else np.zeros(3)
        cov = (m2[g, 1] - np.outer(first, first)) if n_starts else np.zeros((3, 3))
        out.append(
            GammaReplay(
                gamma=gamma,
                tokens=max(n_stop - 1, 0),
                mean=contrib[g].sum(0),
                coin_cov=0.5 * (cov + cov.T),
                block_ss=ss,
                block_dof=dof,
                block_size=size,
                hist=(pi[g][:, None] * law.probs[g]).sum(0)[: gamma + 1],
                attempts=(pi[g][:, None] * law.survival[:, :gamma] * mask).sum(0),
                accepts=(pi[g][:, None] * law.survival[:, 1 : gamma + 1] * mask).sum(0),
                rounds=_realise(law, g, rng),
                exact=law.exact,
            )
        )
    return out


def _realise(law: RoundLaw, g: int, rng: np.random.Generator | None) -> RealisedPath:
    rounds = RealisedPath([], [], [], [], [])
    t = 1
    while t < law.n_stop:
        s = t - 1
        probs = law.probs[g, s]
        if law.exact:
            j = int(np.argmax(probs))
        else:
            if rng is None:
                raise ValueError("a walk with fractional coins needs an rng to realise a path")
            j = int(rng.choice(len(probs), p=probs / probs.sum()))
        gamma_req, gamma_t = int(law.requested[g, s]), int(law.drafted[g, s])
        rounds.requested.append(gamma_req)
        rounds.drafted.append(gamma_t)
        rounds.accepted.append(j)
        rounds.emitted.append(int(law.emit[s, j]))
        rounds.draft_steps.append(gamma_req if law.model_steps else 0)
        t += int(law.emit[s, j])
    return rounds


def replay_chain(trace: ChainTrace, trajectory: Trajectory, gammas, *, seed: int = 0) -> list[GammaReplay]:
    """Every γ of ``gammas`` on one trajectory with one drafter's trace."""
    law = round_law(trace, gammas, trajectory.n_stop, trajectory.max_new_tokens)
    return walk_rounds(law, None if law.exact else np.random.default_rng(seed))

"""The acceptance model and its statistics, independent of any results folder (`specbench.analysis.fit` fits it).

* **Plain formulas** — E[tokens per round] = (1 − α^(γ+1)) ÷ (1 − α) (Leviathan et al.), the improvement factor,
  and tokens per round from per-position rates: E = Σ_{j=0}^{γ} Π_{i<j} α_i.
* **Sufficient statistics** — per prompt and draft position, attempts and accepts (`PositionCounts`), the MLE of a
  constant α and the Bernoulli log-likelihood of given rates.
* **The decaying model** α_i = α · d^i, fitted by Newton steps on the log-likelihood (batched over bootstrap
  replicates), and the likelihood-ratio tests between the constant, decaying and free per-position models
  (`position_test`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from specbench.records.rounds import Rounds

SIGNIFICANCE = 0.01  # level of the constant-α tests


# ----------------------------------------------------------------------------- plain formulas


def expected_tokens(alpha, gamma):
    """E[tokens per target forward] = (1 − α^(γ+1)) / (1 − α), γ + 1 at α = 1 (bonus included)."""
    a = np.asarray(alpha, dtype=float)
    g = np.asarray(gamma, dtype=float)
    near_one = np.abs(1.0 - a) < 1e-12
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(near_one, g + 1.0, (1.0 - a ** (g + 1.0)) / np.where(near_one, 1.0, 1.0 - a))
    return float(value) if value.ndim == 0 else value


def improvement_factor(alpha, gamma, c):
    """Leviathan et al. (arXiv 2211.17192, Thm 3.8): (1 − α^(γ+1)) / ((1 − α)(γc + 1))."""
    return expected_tokens(alpha, gamma) / (np.asarray(gamma, dtype=float) * np.asarray(c, dtype=float) + 1.0)


def tokens_from_rates(rates: np.ndarray) -> np.ndarray:
    """E[tokens] for per-position rates [..., γ]: 1 + Σ_{j=1..γ} Π_{i<j} α_i."""
    rates = np.asarray(rates, dtype=float)
    return 1.0 + np.cumprod(rates, axis=-1).sum(axis=-1)


def tokens_variance_from_rates(rates: np.ndarray) -> np.ndarray:
    """Var[tokens] for per-position rates [..., γ]: with c_j = P(J ≥ j), E J = Σ c_j, E J² = Σ (2j−1) c_j."""
    reach = np.cumprod(np.asarray(rates, dtype=float), axis=-1)
    j = np.arange(1, reach.shape[-1] + 1)
    mean = reach.sum(axis=-1)
    return np.maximum((reach * (2 * j - 1)).sum(axis=-1) - mean**2, 0.0)


@dataclass(frozen=True)
class AcceptanceModel:
    """Per-position acceptance α_i = alpha · decay^i (capped at 1); decay = 1 is the geometric model."""

    alpha: float
    decay: float = 1.0

    @property
    def name(self) -> str:
        return "constant" if self.decay == 1.0 else "decaying"

    def rates(self, gamma: int) -> np.ndarray:
        """[γ] acceptance probability α_i = min(α · d^i, 1) of draft positions i = 0..γ−1."""
        return np.minimum(self.alpha * self.decay ** np.arange(gamma), 1.0)

    def expected_tokens(self, gamma: int) -> float:
        return float(tokens_from_rates(self.rates(int(gamma))))


# ----------------------------------------------------------------------------- sufficient statistics


@dataclass
class PositionCounts:
    """Per prompt and draft position i: rounds that attempted i and rounds that accepted it."""

    attempts: np.ndarray  # [P, m]: rounds with γ_r > i whose positions < i were all accepted
    accepts: np.ndarray  # [P, m]: rounds that accepted position i

    def total(self, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """([m], [m]) summed over prompts, prompt p counted weights[p] times."""
        if weights is None:
            return self.attempts.sum(0), self.accepts.sum(0)
        w = np.asarray(weights, dtype=float)
        return w @ self.attempts, w @ self.accepts

    @property
    def successes(self) -> np.ndarray:  # [P] S_p: accepted draft tokens
        return self.accepts.sum(1)

    @property
    def failures(self) -> np.ndarray:  # [P] F_p: rounds ending in a rejection
        return (self.attempts - self.accepts).sum(1)


def position_counts(rounds: Rounds, n_clusters: int) -> PositionCounts:
    """Per-prompt position counts. A round with its own γ_r ≥ 1 that accepted j attempts
    positions 0..min(j, γ_r − 1) and accepts positions 0..j−1."""
    r = rounds.select(rounds.round_gamma > 0)
    m = int(r.round_gamma.max()) if len(r) else 0
    if m == 0:
        return PositionCounts(np.zeros((n_clusters, 0)), np.zeros((n_clusters, 0)))
    last = np.minimum(r.accepted, r.round_gamma - 1)
    reached = np.bincount(r.cluster * m + last, minlength=n_clusters * m).reshape(n_clusters, m)
    attempts = np.cumsum(reached[:, ::-1], axis=1)[:, ::-1]  # rounds whose last attempted position ≥ i
    ended = np.bincount(r.cluster * (m + 1) + r.accepted, minlength=n_clusters * (m + 1)).reshape(n_clusters, m + 1)
    accepts = np.cumsum(ended[:, ::-1], axis=1)[:, ::-1][:, 1:]  # rounds that accepted ≥ i + 1 tokens
    return PositionCounts(attempts.astype(float), accepts.astype(float))


def alpha_mle(successes, failures):
    """α̂ = S / (S + F) (see the module docstring); 0 when nothing was attempted."""
    s = np.asarray(successes, dtype=float)
    n = s + np.asarray(failures, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(n > 0, s / np.where(n > 0, n, 1.0), 0.0)
    return float(value) if value.ndim == 0 else value


def bernoulli_loglik(accepts: np.ndarray, attempts: np.ndarray, rates: np.ndarray) -> float:
    """Σ_i [s_i log α_i + (n_i − s_i) log(1 − α_i)] (0 · log 0 = 0)."""
    return float(np.sum(special.xlogy(accepts, rates) + special.xlogy(attempts - accepts, 1.0 - rates)))


# ----------------------------------------------------------------------------- the decaying model


def _decay_loglik(theta: np.ndarray, attempts: np.ndarray, accepts: np.ndarray) -> np.ndarray:
    """log L of α_i = exp(θ₀ + θ₁·i) for θ [..., 2] against counts [..., m]; −inf where some
    attempted position would have α_i ≥ 1."""
    eta = theta[..., :1] + theta[..., 1:] * np.arange(attempts.shape[-1])
    log1m = np.log(-np.expm1(np.minimum(eta, -1e-300)))
    value = (accepts * eta + (attempts - accepts) * log1m).sum(-1)
    return np.where(((eta >= 0) & (attempts > 0)).any(-1), -np.inf, value)


def fit_decay_batch(attempts: np.ndarray, accepts: np.ndarray, iterations: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """MLE of α_i = α·d^i for a batch of count vectors [B, m]: returns (θ [B, 2], log L [B]) with
    θ = (log α, log d).

    With η_i = θ₀ + θ₁·i, log L = Σ_i s_i η_i + f_i log(1 − e^{η_i}) is concave in θ (log(1 − e^η)
    is concave), so damped Newton from the constant fit (θ = (log α̂, 0)) reaches the maximum:
    gradient Σ_i (s_i − f_i p_i/(1−p_i)) x_i, negated Hessian Σ_i f_i p_i/(1−p_i)² x_i x_iᵀ with
    x_i = (1, i); each step is halved until it stays feasible (all attempted α_i < 1) and does not
    lower log L. Vectorised over the batch (bootstrap replicates).
    """
    n, s = np.atleast_2d(np.asarray(attempts, dtype=float)), np.atleast_2d(np.asarray(accepts, dtype=float))
    f = n - s
    x = np.stack([np.ones(n.shape[1]), np.arange(n.shape[1], dtype=float)], axis=-1)  # [m, 2]
    start = np.clip(s.sum(1) / np.maximum(n.sum(1), 1), 1e-9, 1 - 1e-9)
    theta = np.stack([np.log(start), np.zeros(len(start))], axis=-1)
    loglik = _decay_loglik(theta, n, s)
    halvings = 0.5 ** np.arange(40)
    for _ in range(iterations):
        p = np.exp(theta[:, :1] + theta[:, 1:] * x[:, 1])  # [B, m]
        odds = p / (1 - p)
        grad = (s - f * odds) @ x  # [B, 2]
        info = np.einsum("bm,mi,mj->bij", f * odds / (1 - p), x, x) + 1e-12 * np.eye(2)
        step = np.linalg.solve(info, grad[..., None])[..., 0]
        candidates = theta[:, None, :] + halvings[None, :, None] * step[:, None, :]  # [B, T, 2]
        values = _decay_loglik(candidates, n[:, None, :], s[:, None, :])
        ok = np.asarray(values >= loglik[:, None] - 1e-12)  # [B, T]
        first = np.argmax(ok, axis=1)
        moved = np.asarray(ok.any(axis=1))  # [B]
        theta = np.where(moved[:, None], candidates[np.arange(len(theta)), first], theta)
        loglik = np.where(moved, values[np.arange(len(theta)), first], loglik)
        if np.all(np.einsum("bi,bi->b", grad, step) < 1e-10):
            break
    return theta, loglik


def replicate_models(point: AcceptanceModel, counts: PositionCounts, weights: np.ndarray) -> list[AcceptanceModel]:
    """The point model's form refitted on every bootstrap replicate (prompt weights [B, P]):
    α̂_b = S_b / (S_b + F_b) for the constant model, the decaying model's (α, d) otherwise."""
    if point.decay == 1.0:
        return [
            AcceptanceModel(float(a))
            for a in np.atleast_1d(alpha_mle(weights @ counts.successes, weights @ counts.failures))
        ]
    theta, _ = fit_decay_batch(weights @ counts.attempts, weights @ counts.accepts)
    return [AcceptanceModel(float(np.exp(a)), float(np.exp(b))) for a, b in theta]


def fit_decay(attempts: np.ndarray, accepts: np.ndarray) -> tuple[AcceptanceModel, float] | None:
    """MLE of α_i = α·d^i over the attempted positions: (model, log L), or None below two positions.

    Every draft token accepted (no failure): the supremum is α = 1, d = 1 with log L = 0.
    """
    attempts, accepts = np.asarray(attempts, dtype=float), np.asarray(accepts, dtype=float)
    m = int((attempts > 0).sum())
    if m < 2:
        return None
    attempts, accepts = attempts[:m], accepts[:m]
    if (attempts == accepts).all():
        return AcceptanceModel(1.0, 1.0), 0.0
    theta, loglik = fit_decay_batch(attempts, accepts)
    return AcceptanceModel(alpha=float(np.exp(theta[0, 0])), decay=float(np.exp(theta[0, 1]))), float(loglik[0])


@dataclass
class PositionTest:
    """Constant α against per-position rates, and the decaying model, by LRT and AIC."""

    positions: int  # draft positions with at least one attempt
    loglik_constant: float
    loglik_decay: float | None
    loglik_free: float
    lr_constant_vs_free: float  # G statistic, χ² with positions − 1 df
    p_constant_vs_free: float
    p_constant_vs_decay: float | None  # χ², 1 df
    p_decay_vs_free: float | None  # χ², positions − 2 df
    aic_constant: float
    aic_decay: float | None
    aic_free: float
    preferred: str  # 'constant' or 'decaying'
    flag: str  # '' when constant α is not rejected


def _chi2_p(lr: float, df: int) -> float:
    return float(stats.chi2.sf(max(lr, 0.0), df)) if df > 0 else 1.0


def position_test(
    attempts: np.ndarray, accepts: np.ndarray, constant: AcceptanceModel, decay: tuple[AcceptanceModel, float] | None
) -> PositionTest:
    m = int((attempts > 0).sum())
    attempts, accepts = attempts[:m], accepts[:m]
    ll_const = bernoulli_loglik(accepts, attempts, constant.rates(m))
    ll_free = bernoulli_loglik(accepts, attempts, accepts / np.maximum(attempts, 1))
    lr_free = 2 * (ll_free - ll_const)
    p_free = _chi2_p(lr_free, m - 1)
    ll_decay = p_cd = p_df = aic_decay = None
    preferred = "constant"
    if decay is not None:
        ll_decay = max(decay[1], ll_const)  # the constant model is nested: never below it
        p_cd = _chi2_p(2 * (ll_decay - ll_const), 1)
        p_df = _chi2_p(2 * (ll_free - ll_decay), m - 2)
        aic_decay = 4 - 2 * ll_decay
        if p_cd < SIGNIFICANCE and aic_decay < 2 - 2 * ll_const:
            preferred = "decaying"
    flag = ""
    if p_free < SIGNIFICANCE:
        flag = f"constant α rejected (LRT vs per-position rates, p={p_free:.2g})"
        if decay is not None and decay[0].decay >= 1:
            flag += "; acceptance rises along the draft (often prompts of unequal difficulty)"
        elif decay is not None:
            flag += f"; acceptance decays along the draft (d={decay[0].decay:.3f})"
        if p_df is not None and p_df < SIGNIFICANCE:
            flag += f"; α·d^i does not explain the rates either (p={p_df:.2g})"
    return PositionTest(
        positions=m,
        loglik_constant=ll_const,
        loglik_decay=ll_decay,
        loglik_free=ll_free,
        lr_constant_vs_free=lr_free,
        p_constant_vs_free=p_free,
        p_constant_vs_decay=p_cd,
        p_decay_vs_free=p_df,
        aic_constant=2 - 2 * ll_const,
        aic_decay=aic_decay,
        aic_free=2 * m - 2 * ll_free,
        preferred=preferred,
        flag=flag,
    )

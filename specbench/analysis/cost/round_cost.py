"""The cost model: what a round costs, fitted from recorded timings, and tokens/s for any γ.

A speculative round spends

* ``draft_s(γ)``: the proposal — drafter forwards for model drafters (fitted per round as
  fixed + step · forwards on rounds that drafted; ``step`` is the draft step time), the whole
  lookup for model-free drafters (the mean proposal time per round);
* ``verify_s(n)``: one target forward verifying n tokens per sequence plus the acceptance test,
  where n (``verify_tokens`` in code) is the draft tokens offered + 1: γ + 1 for a chain,
  tree_nodes + 1 for a tree, 1 for a target-only step. Fitted on every round (the
  configuration's and the target-only baseline's) as t(n) = a + b·n by least squares, or as a
  hinge t(n) = a + b·n + b₂·max(0, n − n₀) when the data show a knee: n₀ is searched over the
  measured sizes (≥ 2 sizes on each side) and the hinge
  is kept when it lowers BIC = N log(RSS/N) + p log N (p = 2 linear, 4 hinge);
* ``overhead_s``: the rest of the round, (decode_s − Σ draft_s − Σ verify_s) ÷ rounds, one mean
  for the configuration's rounds and one for the baseline's.

The target-only step time is the baseline rounds' mean verify_s (one-token forward);
c = draft step ÷ target step (model-free drafters: proposal time per round ÷ target step).

Prediction, for every γ up to a maximum (measured or not), with ρ the share of rounds that
drafted at all (an n-gram drafter without a match verifies only its one token):

    tokens(γ)   = ρ · E_model[tokens](γ) + (1 − ρ)
    round_s(γ)  = draft_s(γ) + ρ · verify_s(γ + 1) + (1 − ρ) · verify_s(1) + overhead_s(γ)
    tokens/s(γ) = tokens(γ) ÷ round_s(γ),      speedup = tokens/s(γ) ÷ measured baseline tokens/s

(for a tree, verify_s takes tree_nodes + 1). Next to it, Leviathan et al.'s improvement
factor (1 − α^{γ+1}) / ((1 − α)(γc + 1)) (arXiv 2211.17192, Thm 3.8) with γc = draft_s(γ) ÷ t(1):
it assumes verifying γ + 1 tokens costs one target step and rounds have no overhead.

Everything that predicts goes through `CostModel` — the interface a hardware profile (costs per
batch size and context length) implements too; `MeasuredCost` is the implementation fitted here,
valid at batch 1 and the sweep's own contexts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from specbench.analysis.acceptance_model import AcceptanceModel, improvement_factor
from specbench.analysis.cost import coverage
from specbench.analysis.fit import ACCEPT_KEYS
from specbench.errors import SpecbenchError
from specbench.records.rounds import (
    Binned,
    Rounds,
    binned,
    cluster_codes,
    cluster_sums,
    flatten_rounds,
    prompt_clusters,
)
from specbench.records.summary import BASELINE_KEYS, is_baseline, with_config_defaults
from specbench.records.timing import has_round_timings

if TYPE_CHECKING:  # moe_cost builds on this module
    from specbench.analysis.cost.moe import ExpertAwareCost

# ----------------------------------------------------------------------------- the interface


@runtime_checkable
class CostModel(Protocol):
    """Seconds spent by one round's parts; arrays broadcast. ``batch`` sequences decode together;
    ``context`` is the tokens already in the KV cache (None: the measured workload's own)."""

    def verify_s(self, verify_tokens, batch: int = 1, context: int | None = None):
        """One target forward verifying ``verify_tokens`` tokens per sequence (draft tokens + 1) and the
        acceptance test."""

    def draft_s(self, gamma, batch: int = 1, context: int | None = None):
        """The drafter's proposal of γ tokens (0 at γ = 0)."""

    def overhead_s(self, gamma, batch: int = 1, context: int | None = None):
        """Everything else in a round of draft length γ (γ = 0: a target-only step)."""


def round_s(
    cost: CostModel, gamma, *, tree_nodes=None, propose_rate: float = 1.0, batch: int = 1, context: int | None = None
):
    """Expected seconds of one round: draft + verify (ρ full, 1 − ρ a single token) + overhead,

        round_s(γ) = draft_s(γ) + ρ · verify_s(tree_nodes + 1) + (1 − ρ) · verify_s(1) + overhead_s(γ).

    ``tree_nodes``: draft tokens verified when a proposal is made (default γ, a chain's).
    At γ = 0 this is a target-only step, verify_s(1) + overhead_s(0).
    """
    gamma = np.asarray(gamma)
    tree_nodes = gamma if tree_nodes is None else np.asarray(tree_nodes)
    rho = np.where(gamma > 0, propose_rate, 0.0)
    verify = rho * cost.verify_s(tree_nodes + 1, batch, context) + (1 - rho) * cost.verify_s(
        np.ones_like(tree_nodes), batch, context
    )
    return cost.draft_s(gamma, batch, context) + verify + cost.overhead_s(gamma, batch, context)


# ----------------------------------------------------------------------------- fitted parts


@dataclass(frozen=True)
class VerifyFit:
    """t(n) = a + b·n + b2·max(0, n − knee), n the tokens verified per sequence; kind 'linear'
    (b2 = 0), 'knee' or 'flat'."""

    a: float
    b: float
    kind: str = "linear"
    knee: float = 0.0
    b2: float = 0.0
    sizes: tuple[int, ...] = ()  # the verify_tokens values the fit saw

    def __call__(self, verify_tokens):
        n = np.asarray(verify_tokens, dtype=float)
        return self.a + self.b * n + self.b2 * np.maximum(n - self.knee, 0.0)


def _basis(x: np.ndarray, knee: float | None) -> np.ndarray:
    columns = [np.ones_like(x), x] + ([np.maximum(x - knee, 0.0)] if knee is not None else [])
    return np.stack(columns, axis=-1)


def _least_squares(x: np.ndarray, totals: np.ndarray, knee: float | None) -> tuple[np.ndarray, float]:
    """Least squares from per-x (n, Σy, Σy²): coefficients and residual sum of squares."""
    n, sy, syy = totals[:, 0], totals[:, 1], totals[:, 2]
    design = _basis(x, knee)
    gram = design.T @ (n[:, None] * design)
    moment = design.T @ sy
    coef = np.linalg.lstsq(gram, moment, rcond=None)[0]
    rss = float(syy.sum() - 2 * coef @ moment + coef @ gram @ coef)
    return coef, max(rss, 0.0)


def _monotone(coef: np.ndarray) -> tuple[float, float]:
    """(b, b2) clipped so that t(n) never falls with n: b ≥ 0 and b + b2 ≥ 0."""
    b = max(float(coef[1]), 0.0)
    b2 = max(float(coef[2]), -b) if len(coef) > 2 else 0.0
    return b, b2


def fit_verify(x: np.ndarray, totals: np.ndarray, *, like: VerifyFit | None = None) -> tuple[VerifyFit, list[str]]:
    """Fit t(n) from per-size totals [len(x), 3] at x = verify_tokens; ``like`` fixes the model form
    (bootstrap replicates).

    A target forward never gets cheaper with more tokens, so fits are kept non-decreasing: a
    falling line becomes flat, a hinge whose slope would turn negative is not a candidate, and a
    bootstrap replicate's slopes are clipped at zero.
    """
    keep = totals[:, 0] > 0
    x, totals = np.asarray(x, dtype=float)[keep], totals[keep]
    sizes = tuple(int(v) for v in x)
    notes: list[str] = []
    mean = float(totals[:, 1].sum() / max(totals[:, 0].sum(), 1))
    if like is not None:  # a bootstrap replicate: same form, new coefficients
        if like.kind == "flat" or len(x) < (3 if like.kind == "knee" else 2):
            return VerifyFit(mean, 0.0, "flat", sizes=sizes), notes
        coef, _ = _least_squares(x, totals, like.knee if like.kind == "knee" else None)
        b, b2 = _monotone(coef)
        return VerifyFit(float(coef[0]), b, like.kind, like.knee, b2, sizes), notes
    if len(x) < 2:
        notes.append("verify time measured at one size only: treated as constant in the tokens verified")
        return VerifyFit(mean, 0.0, "flat", sizes=sizes), notes
    coef, rss = _least_squares(x, totals, None)
    if coef[1] < 0:
        notes.append("verify time did not grow with the tokens verified: treated as constant")
        return VerifyFit(mean, 0.0, "flat", sizes=sizes), notes
    best = VerifyFit(float(coef[0]), float(coef[1]), "linear", sizes=sizes)
    if len(x) >= 4:
        n_obs = float(totals[:, 0].sum())
        tiny = 1e-300
        best_bic = n_obs * np.log(max(rss, tiny) / n_obs) + 2 * np.log(n_obs)
        for knee in x[1:-1]:
            kcoef, krss = _least_squares(x, totals, knee)
            if kcoef[1] < 0 or kcoef[1] + kcoef[2] < 0:
                continue
            bic = n_obs * np.log(max(krss, tiny) / n_obs) + 4 * np.log(n_obs)
            if bic < best_bic:
                best_bic = bic
                best = VerifyFit(float(kcoef[0]), float(kcoef[1]), "knee", float(knee), float(kcoef[2]), sizes)
    return best, notes


@dataclass(frozen=True)
class DraftFit:
    """draft_s(γ) = fixed_s + step_s·γ for γ ≥ 1, 0 at γ = 0 (model-free: step_s = 0)."""

    fixed_s: float
    step_s: float
    model_free: bool

    def __call__(self, gamma):
        g = np.asarray(gamma, dtype=float)
        return np.where(g > 0, self.fixed_s + self.step_s * g, 0.0)


def fit_draft(x: np.ndarray, totals: np.ndarray, *, like: DraftFit | None = None) -> DraftFit:
    """From per-(drafter forwards) totals of proposal time over rounds that drafted.

    Model-free (no drafter forwards): fixed = mean proposal time. Model drafters: least squares of
    draft_s on forwards when ≥ 2 distinct forward counts give a non-negative intercept and a
    positive slope; otherwise the average time per forward, Σ draft_s ÷ Σ forwards, through 0.
    """
    keep = totals[:, 0] > 0
    x, totals = np.asarray(x, dtype=float)[keep], totals[keep]
    n, sy = totals[:, 0], totals[:, 1]
    if len(x) == 0:
        return DraftFit(0.0, 0.0, model_free=True if like is None else like.model_free)
    if (x == 0).all():
        return DraftFit(float(sy.sum() / n.sum()), 0.0, model_free=True)
    model = x > 0
    x, totals, n, sy = x[model], totals[model], n[model], sy[model]
    through_zero = DraftFit(0.0, float(sy.sum() / (n * x).sum()), model_free=False)
    if like is not None and like.fixed_s == 0.0:
        return through_zero
    if len(x) >= 2:
        coef, _ = _least_squares(x, totals, None)
        if coef[0] >= 0 and coef[1] > 0:
            return DraftFit(float(coef[0]), float(coef[1]), model_free=False)
    return through_zero


@dataclass(frozen=True)
class MeasuredCost:
    """`CostModel` fitted from one configuration group's rounds (batch 1, the sweep's contexts)."""

    verify: VerifyFit
    draft: DraftFit
    round_overhead_s: float  # per speculative round
    baseline_overhead_s: float  # per target-only step
    contexts: tuple[float, ...] = ()  # the shortest and longest context its rounds ran at (tokens; () unknown)

    def extrapolation(self, batch: int = 1, context: int | None = None) -> str | None:
        """Where a prediction at ``context`` leaves the contexts the sweep timed, in words (None: inside them,
        or the sweep's own context); a batch above 1 is refused, never extrapolated."""
        self._check(batch, context)
        return None if context is None else coverage.describe({"context": context}, {"context": self.contexts})

    @staticmethod
    def _check(batch: int, context: int | None) -> None:
        if batch != 1:
            raise SpecbenchError(
                f"costs measured by a sweep hold for batch 1 only (asked batch {batch}); "
                "use a cost profile for other batch sizes"
            )

    def verify_s(self, verify_tokens, batch: int = 1, context: int | None = None):
        self._check(batch, context)
        return self.verify(verify_tokens)

    def draft_s(self, gamma, batch: int = 1, context: int | None = None):
        self._check(batch, context)
        return self.draft(gamma)

    def overhead_s(self, gamma, batch: int = 1, context: int | None = None):
        self._check(batch, context)
        return np.where(np.asarray(gamma) > 0, self.round_overhead_s, self.baseline_overhead_s)


# ----------------------------------------------------------------------------- per-prompt statistics

SUMS = (
    "spec_overhead_s",
    "spec_rounds",
    "spec_drafting_rounds",
    "spec_prefill_s",
    "spec_units",
    "base_overhead_s",
    "base_rounds",
    "base_verify_s",
    "base_tokens",
    "base_decode_s",
    "base_prefill_s",
    "base_units",
)


@dataclass
class CostStats:
    """Per-prompt sufficient statistics of one configuration group and its baseline."""

    verify: Binned  # x = verify_tokens (drafted + 1), y = verify_s (group and baseline rounds)
    draft: Binned  # x = drafter forwards, y = draft_s (group rounds that drafted)
    sums: np.ndarray  # [P, len(SUMS)]
    tree_nodes: dict[int, int]  # γ → tree nodes per full round (chain: γ)
    contexts: tuple[float, ...] = ()  # shortest prompt, longest prompt + output: the contexts its rounds ran at

    def total(self, weights: np.ndarray | None = None) -> dict[str, float]:
        values = self.sums.sum(0) if weights is None else np.asarray(weights, dtype=float) @ self.sums
        return dict(zip(SUMS, (float(v) for v in values)))


def cost_stats(group: pd.DataFrame, baseline: pd.DataFrame, clusters: pd.Index) -> CostStats:
    """Statistics of a group's live records and the matching baseline records (same clusters)."""
    n = len(clusters)
    spec_rounds: Rounds = flatten_rounds(group, clusters)
    base_rounds: Rounds = flatten_rounds(baseline, clusters)
    verify = binned(
        np.concatenate([spec_rounds.cluster, base_rounds.cluster]),
        np.concatenate([spec_rounds.drafted, base_rounds.drafted]) + 1,
        np.concatenate([spec_rounds.verify_s, base_rounds.verify_s]),
        n,
    )
    drafting = spec_rounds.select(spec_rounds.round_gamma > 0)
    draft = binned(drafting.cluster, drafting.steps, drafting.draft_s, n)
    g, b = cluster_codes(group, clusters), cluster_codes(baseline, clusters)
    columns = {
        "spec_overhead_s": cluster_sums(g, n, group["overhead_s"]),
        "spec_rounds": cluster_sums(g, n, group["rounds"]),
        "spec_drafting_rounds": cluster_sums(drafting.cluster, n, np.ones(len(drafting))),
        "spec_prefill_s": cluster_sums(g, n, group["prefill_s"]),
        "spec_units": cluster_sums(g, n, np.ones(len(group))),
        "base_overhead_s": cluster_sums(b, n, baseline["overhead_s"]),
        "base_rounds": cluster_sums(b, n, baseline["rounds"]),
        "base_verify_s": cluster_sums(b, n, baseline["verify_s"]),
        "base_tokens": cluster_sums(b, n, baseline["decode_tokens"]),
        "base_decode_s": cluster_sums(b, n, baseline["decode_s"]),
        "base_prefill_s": cluster_sums(b, n, baseline["prefill_s"]),
        "base_units": cluster_sums(b, n, np.ones(len(baseline))),
    }
    tree_nodes = {int(g): int(t) for g, t in group.groupby("gamma")["tree_nodes"].max().items()}
    return CostStats(
        verify=verify,
        draft=draft,
        sums=np.concatenate([columns[k] for k in SUMS], axis=1),
        tree_nodes=tree_nodes,
        contexts=timed_contexts(pd.concat([group, baseline])),
    )


def timed_contexts(records: pd.DataFrame) -> tuple[float, ...]:
    """(shortest prompt, longest prompt + generated tokens) of records: the contexts their rounds ran at."""
    if records.empty or not {"prompt_tokens", "new_tokens"} <= set(records.columns):
        return ()
    prompt = pd.to_numeric(records["prompt_tokens"], errors="coerce")
    end = prompt + pd.to_numeric(records["new_tokens"], errors="coerce")
    if prompt.isna().all() or end.isna().all():
        return ()
    return float(prompt.min()), float(end.max())


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


@dataclass(frozen=True)
class CostFit:
    """A group's fitted `MeasuredCost` and the measured scalars predictions compare with."""

    cost: MeasuredCost | ExpertAwareCost  # an MoE target's: the measured cost plus expert streaming
    target_step_s: float  # mean target-only forward (baseline rounds' verify_s)
    draft_step_s: float  # per drafter forward; model-free: per proposal
    c: float  # draft_step_s ÷ target_step_s
    propose_rate: float  # ρ: share of speculative rounds that drafted ≥ 1 token
    baseline_tokens_per_s: float  # measured target-only decode throughput
    prefill_s: float  # mean prefill per request of the group's configurations
    baseline_prefill_s: float
    tree_nodes: dict[int, int] = field(default_factory=dict)  # γ → tree nodes per full round (chain: γ)
    notes: tuple[str, ...] = ()

    def summary(self) -> dict:
        v, d = self.cost.verify, self.cost.draft
        knee = v.kind == "knee"
        return dict(
            verify_model=v.kind,
            verify_a_s=v.a,
            verify_b_s=v.b,
            verify_knee=v.knee if knee else None,
            verify_b2_s=v.b2 if knee else None,
            verify_sizes=",".join(map(str, v.sizes)),
            target_step_s=self.target_step_s,
            draft_fixed_s=d.fixed_s,
            draft_step_s=self.draft_step_s,
            model_free=d.model_free,
            c=self.c,
            overhead_s=self.cost.round_overhead_s,
            baseline_overhead_s=self.cost.baseline_overhead_s,
            propose_rate=self.propose_rate,
            baseline_tokens_per_s=self.baseline_tokens_per_s,
            prefill_s=self.prefill_s,
            baseline_prefill_s=self.baseline_prefill_s,
            cost_notes="; ".join(self.notes),
        )


def fit_costs(stats: CostStats, weights: np.ndarray | None = None, *, like: CostFit | None = None) -> CostFit:
    """Fit a group's costs; ``weights`` re-weights prompts (bootstrap), ``like`` fixes model forms."""
    s = stats.total(weights)
    verify, notes = fit_verify(
        stats.verify.x, stats.verify.total(weights), like=None if like is None else like.cost.verify
    )
    draft = fit_draft(stats.draft.x, stats.draft.total(weights), like=None if like is None else like.cost.draft)
    cost = MeasuredCost(
        verify=verify,
        draft=draft,
        round_overhead_s=_ratio(s["spec_overhead_s"], s["spec_rounds"]),
        baseline_overhead_s=_ratio(s["base_overhead_s"], s["base_rounds"]),
        contexts=stats.contexts,
    )
    target_step = _ratio(s["base_verify_s"], s["base_rounds"])
    if target_step <= 0:
        target_step = float(verify(1))
        notes.append("no baseline rounds: target step taken from the verify fit at 1 token")
    draft_step = draft.fixed_s if draft.model_free else draft.step_s
    return CostFit(
        cost=cost,
        target_step_s=target_step,
        draft_step_s=draft_step,
        c=_ratio(draft_step, target_step),
        propose_rate=_ratio(s["spec_drafting_rounds"], s["spec_rounds"]),
        baseline_tokens_per_s=_ratio(s["base_tokens"], s["base_decode_s"]),
        prefill_s=_ratio(s["spec_prefill_s"], s["spec_units"]),
        baseline_prefill_s=_ratio(s["base_prefill_s"], s["base_units"]),
        tree_nodes=dict(stats.tree_nodes),
        notes=tuple(notes),
    )


NO_BASELINE = "no target-only baseline for this workload and sampling: costs not fitted"
NOT_TIMED = (
    "no per-round draft and verify times in these records (a serving engine does not report them): "
    "costs not fitted, never invented"
)


def _cost_groups(records: pd.DataFrame):
    """(keys, the group's live records, its baseline's, why no fit or None) per (target, drafter, tree, workload,
    sampling) with live records."""
    live = with_config_defaults(records[records["mode"] == "live"])
    base_all = live[is_baseline(live)]
    spec = live[~is_baseline(live) & (live["gamma"] > 0)]
    for values, group in spec.groupby(ACCEPT_KEYS, dropna=False, sort=True):
        keys = dict(zip(ACCEPT_KEYS, values))
        base = base_all
        for k in BASELINE_KEYS:
            base = base[base[k] == keys[k]]
        reason = NO_BASELINE if base.empty else NOT_TIMED if not has_round_timings(group) else None
        yield keys, group, base, reason


def group_cost_fits(records: pd.DataFrame) -> list[tuple[dict, CostFit | None]]:
    """(keys, `CostFit`) per (target, drafter, tree, workload, sampling) with live timings; the fit
    is None where the workload and sampling have no target-only baseline, or the records carry no
    per-round timings (a serving backend's)."""
    out: list[tuple[dict, CostFit | None]] = []
    for keys, group, base, reason in _cost_groups(records):
        if reason is not None:
            out.append((keys, None))
            continue
        clusters = prompt_clusters(pd.concat([group[["prompt_id"]], base[["prompt_id"]]]))
        out.append((keys, fit_costs(cost_stats(group, base, clusters))))
    return out


def fit_group_costs(records: pd.DataFrame) -> pd.DataFrame:
    """One row of cost coefficients per (target, drafter, tree, workload, sampling) with live records (a note
    instead of coefficients where none can be fitted)."""
    fits = dict((tuple(k.values()), fit) for k, fit in group_cost_fits(records))
    rows = []
    for keys, _, _, reason in _cost_groups(records):
        fit = fits.get(tuple(keys.values()))
        rows.append({**keys, **({"cost_notes": reason} if fit is None else fit.summary())})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- prediction


def predict_arrays(
    model: AcceptanceModel,
    cost: CostModel,
    gammas,
    *,
    propose_rate: float = 1.0,
    tree_nodes: dict[int, int] | None = None,
) -> dict[str, np.ndarray]:
    """The prediction's columns as arrays over ``gammas`` (see the module docstring)."""
    gammas = np.asarray(gammas, dtype=int)
    node_counts = np.array([(tree_nodes or {}).get(int(g), int(g)) for g in gammas], dtype=int)
    rates = model.rates(int(gammas.max()) if len(gammas) else 0)
    expected = 1.0 + np.concatenate([[0.0], np.cumsum(np.cumprod(rates))])[gammas]
    tokens = propose_rate * expected + (1 - propose_rate)
    seconds = np.asarray(round_s(cost, gammas, tree_nodes=node_counts, propose_rate=propose_rate), dtype=float)
    return {
        "gamma": gammas,
        "tree_nodes": node_counts,
        "expected_tokens": expected,
        "tokens_per_round": tokens,
        "round_s": seconds,
        "tokens_per_s": tokens / seconds,
    }


def predict_curve(
    model: AcceptanceModel,
    cost: CostModel,
    gammas,
    *,
    alpha: float | None = None,
    propose_rate: float = 1.0,
    tree_nodes: dict[int, int] | None = None,
    baseline_tokens_per_s: float | None = None,
    measured: set[int] | None = None,
) -> pd.DataFrame:
    """Predicted tokens/s and speedup for each γ, with the paper's improvement factor beside it.

    ``model`` gives E[tokens]; ``alpha`` (default model.alpha) the constant α of the paper
    column; ``tree_nodes`` maps γ to verified draft tokens (trees; default γ); ``baseline_tokens_per_s``
    defaults to the cost model's own target-only step; ``measured`` marks γ values the sweep ran.
    """
    gammas = np.asarray(sorted(int(g) for g in gammas), dtype=int)
    columns = predict_arrays(model, cost, gammas, propose_rate=propose_rate, tree_nodes=tree_nodes)
    step = float(round_s(cost, 0))
    base = baseline_tokens_per_s if baseline_tokens_per_s else (1.0 / step if step > 0 else math.nan)
    draft = np.asarray(cost.draft_s(gammas), dtype=float)
    c_eff = draft / (np.maximum(gammas, 1) * float(cost.verify_s(1)))
    frame = pd.DataFrame(columns)
    frame.insert(4, "draft_s", draft)
    frame.insert(5, "verify_s", np.asarray(cost.verify_s(columns["tree_nodes"] + 1), dtype=float))
    frame.insert(6, "overhead_s", np.asarray(cost.overhead_s(gammas), dtype=float))
    frame["speedup"] = frame["tokens_per_s"] / base
    frame["paper_factor"] = improvement_factor(model.alpha if alpha is None else alpha, gammas, c_eff)
    frame["measured"] = [int(g) in (measured or set()) for g in gammas]
    return frame

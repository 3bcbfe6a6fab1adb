"""The acceptance model: α by maximum likelihood, per-position rates, and a decaying alternative.

Model (Leviathan, Kalman & Matias 2023, arXiv 2211.17192, §3.1). Every draft token is accepted
with probability α given that all draft tokens before it were. A round that drafts γ_r tokens
(its own γ: γ_r = ``round_drafted`` for a chain, ``round_depth`` for a tree, where α becomes the
per-depth acceptance of the best path; γ_r ≤ the configuration's γ) accepts

    j < γ_r tokens with probability α^j (1 − α),      all γ_r tokens with probability α^γ_r,

the geometric distribution truncated at γ_r. Rounds that draft nothing (γ_r = 0: an n-gram drafter
without a match, the last token of a generation) have likelihood 1 and carry no information.

Maximum likelihood, closed form. Over rounds r with γ_r ≥ 1 and accepted j_r,

    log L(α) = Σ_r [ j_r log α + 1{j_r < γ_r} log(1 − α) ] = S log α + F log(1 − α),

with S = Σ_r j_r (accepted draft tokens) and F = #{r : j_r < γ_r} (rounds that end in a
rejection). Setting d log L / dα = S/α − F/(1 − α) = 0 gives

    α̂ = S / (S + F),

the boundary α̂ = 1 when F = 0 and α̂ = 0 when S = 0 (log L is monotone there). Read position by
position, a round is a run of Bernoulli trials (positions 0..min(j, γ_r − 1) are attempted, the first
j succeed), so S + F is the number of attempted draft positions and α̂ the pooled per-position
acceptance rate; the observed information is (S + F) / (α(1 − α)). Mixed γ pool naturally: each
round enters with its own γ_r. α̂ is not the observed rate Σ accepted / Σ drafted (the design's
"α observed", also reported): drafted tokens after the first rejection are never tested.

Per-position acceptance α_i = P(position i accepted | positions < i accepted) has the same
Bernoulli form per position: α̂_i = accepts_i / attempts_i, with exact (Clopper–Pearson)
intervals. Three nested models of the α_i are compared by likelihood-ratio tests (Wilks: 2 Δlog L
~ χ² with df = difference in free parameters) and AIC:

* constant: α_i = α (1 parameter);
* decaying: α_i = α · d^i (2 parameters, fitted numerically; d < 1 decays, d > 1 rises);
* free: one α_i per observed position (m parameters; the saturated model).

The test of constant α against the per-position rates is the LRT constant-vs-free (a G-test of
homogeneity of the m binomial rates, df = m − 1). A group is flagged when it rejects at level
`SIGNIFICANCE`; the decaying model is preferred when it beats the constant one by its LRT (df 1)
and by AIC. Caveat: pooling prompts whose α differ makes pooled α_i *rise* with i (rounds that
reach late positions come from easy prompts) even when each prompt is constant; the flag then
says "rises" rather than "decays".

Expected tokens per round (target forward), bonus token included:

    E[tokens] = Σ_{j=0}^{γ} P(J ≥ j) = Σ_{j=0}^{γ} α^j = (1 − α^{γ+1}) / (1 − α)   (γ + 1 at α = 1),

and for per-position rates 1 + Σ_{j=1}^{γ} Π_{i<j} α_i. Leviathan et al.'s walltime improvement
factor, with c = draft step time ÷ target step time and verification costing one target step:
(1 − α^{γ+1}) / ((1 − α)(γc + 1)).

Confidence intervals for α resample prompts (`specbench.analysis.statistics.intervals`). Goodness of fit compares, per
γ, the observed τ (decode tokens ÷ rounds) with the model's mean E[tokens | γ_r] over the same
rounds, with a z-score from the model's variance (rounds treated as independent).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.analysis.acceptance_model import (
    AcceptanceModel,
    PositionCounts,
    PositionTest,
    alpha_mle,
    fit_decay,
    position_counts,
    position_test,
    tokens_from_rates,
    tokens_variance_from_rates,
)
from specbench.analysis.statistics.intervals import (
    LEVEL,
    N_BOOT,
    bootstrap_interval,
    bootstrap_weights,
    clopper_pearson,
    few_prompts_note,
    replicate_shortfall,
)
from specbench.errors import SpecbenchError, note
from specbench.records.rounds import Rounds, cluster_codes, cluster_sums, flatten_rounds, prompt_clusters
from specbench.records.store import load_records, load_run_info
from specbench.records.summary import CONFIG_KEYS, is_baseline, prefer_live, with_config_defaults

ACCEPT_KEYS = ["target", "drafter", "drafter_label", "tree", "workload", "temperature", "top_p", "top_k", "schedule"]


# ----------------------------------------------------------------------------- one group


@dataclass
class AcceptanceEstimate:
    """α̂ with its interval, from position counts (the part recommend re-uses per replicate)."""

    alpha: float
    lo: float
    hi: float
    ci_method: str
    model: AcceptanceModel  # the model predictions use: the decaying one when it wins with d < 1
    constant: AcceptanceModel
    decay: AcceptanceModel | None
    test: PositionTest | None
    notes: list[str] = field(default_factory=list)


def estimate_acceptance(
    counts: PositionCounts, *, n_boot: int = N_BOOT, level: float = LEVEL, rng: np.random.Generator | None = None
) -> AcceptanceEstimate:
    """α̂, its interval (prompt bootstrap; exact binomial where the bootstrap cannot work; none
    when ``n_boot`` is 0), the position test and the model predictions use."""
    rng = rng if rng is not None else np.random.default_rng(0)
    s_p, f_p = counts.successes, counts.failures
    s, f = float(s_p.sum()), float(f_p.sum())
    n_prompts = int(((s_p + f_p) > 0).sum())
    alpha = alpha_mle(s, f)
    notes: list[str] = []
    if s + f == 0:
        notes.append("no round drafted anything: α is not identifiable; reported as 0 (nothing accepted)")
        constant = AcceptanceModel(0.0)
        return AcceptanceEstimate(0.0, 0.0, 1.0, "none (no draft tokens)", constant, constant, None, None, notes)
    if n_prompts < 2 or f == 0 or s == 0:
        lo, hi = clopper_pearson(s, s + f, level)
        if n_prompts < 2:
            why = "one prompt: no prompt bootstrap"
        else:
            why = "every draft token accepted" if f == 0 else "no draft token accepted"
        method = f"exact binomial over draft positions ({why}; rounds treated as independent)"
        notes.append(f"α interval: {method}")
    elif n_boot < 1:
        lo = hi = alpha
        method = "not computed"
    else:
        w = bootstrap_weights(len(s_p), n_boot, rng)
        reps = alpha_mle(w @ s_p, w @ f_p)
        lo, hi = np.clip(bootstrap_interval(alpha, reps, len(s_p), level), 0.0, 1.0)
        method = f"prompt bootstrap, {len(s_p)} prompts (B={n_boot}, small-sample corrected)"
        short = replicate_shortfall(n_boot, level)
        if short:
            method = f"none: {short}"
            notes.append(f"α interval: {method}")
        few = few_prompts_note(n_prompts)
        if few:
            notes.append(few)
    attempts, accepts = counts.total()
    constant = AcceptanceModel(alpha)
    decay_fit = fit_decay(attempts, accepts)
    test = position_test(attempts, accepts, constant, decay_fit)
    if decay_fit is None:
        notes.append("one draft position observed: the decaying model is not identifiable")
    model = constant
    if test.preferred == "decaying" and decay_fit is not None:
        if decay_fit[0].decay < 1:
            model = decay_fit[0]
        else:
            notes.append(
                "α·d^i with d > 1 fits better (rates rise along the draft), but rising rates extrapolate "
                "badly: predictions use constant α"
            )
    return AcceptanceEstimate(
        alpha, float(lo), float(hi), method, model, constant, None if decay_fit is None else decay_fit[0], test, notes
    )


@dataclass
class AcceptanceFit:
    """Everything `specbench fit` reports about one group's acceptance."""

    keys: dict
    n_prompts: int
    n_units: int
    n_rounds: int  # rounds that drafted at least one token
    gammas: list[int]
    accepted: int  # S
    trials: int  # S + F: attempted draft positions
    alpha_observed: float  # Σ accepted / Σ drafted (0 when nothing was drafted)
    estimate: AcceptanceEstimate
    positions: pd.DataFrame  # i, attempts, accepts, alpha_i, lo, hi, predicted
    goodness: pd.DataFrame  # gamma, rounds, tau_observed, tau_predicted, residual, z, tau_nominal

    @property
    def model(self) -> AcceptanceModel:
        return self.estimate.model

    def summary(self) -> dict:
        e, t = self.estimate, self.estimate.test
        row = dict(self.keys)
        row.update(
            n_prompts=self.n_prompts,
            n_units=self.n_units,
            n_rounds=self.n_rounds,
            gammas=",".join(map(str, self.gammas)),
            accepted=self.accepted,
            trials=self.trials,
            alpha=e.alpha,
            alpha_lo=e.lo,
            alpha_hi=e.hi,
            ci_method=e.ci_method,
            alpha_observed=self.alpha_observed,
            model=e.model.name,
            model_alpha=e.model.alpha,
            decay=None if e.decay is None else e.decay.decay,
            decay_alpha=None if e.decay is None else e.decay.alpha,
            n_positions=None if t is None else t.positions,
            p_constant_vs_free=None if t is None else t.p_constant_vs_free,
            p_constant_vs_decay=None if t is None else t.p_constant_vs_decay,
            p_decay_vs_free=None if t is None else t.p_decay_vs_free,
            aic_constant=None if t is None else t.aic_constant,
            aic_decay=None if t is None else t.aic_decay,
            aic_free=None if t is None else t.aic_free,
            flag="" if t is None else t.flag,
            notes="; ".join(e.notes),
        )
        return row


def _positions_frame(counts: PositionCounts, model: AcceptanceModel, level: float) -> pd.DataFrame:
    attempts, accepts = counts.total()
    m = int((attempts > 0).sum())
    attempts, accepts = attempts[:m], accepts[:m]
    lo, hi = clopper_pearson(accepts, attempts, level)
    return pd.DataFrame(
        {
            "position": np.arange(m),
            "attempts": attempts.astype(int),
            "accepts": accepts.astype(int),
            "alpha_i": accepts / np.maximum(attempts, 1),
            "lo": lo,
            "hi": hi,
            "predicted": model.rates(m),
        }
    )


def goodness_of_fit(group: pd.DataFrame, rounds: Rounds, model: AcceptanceModel) -> pd.DataFrame:
    """Per nominal γ: observed τ vs the model's mean E[tokens | γ_r] over the same rounds.

    The prediction uses each round's own γ_r (0 → 1 token), so rounds cut short by the end of a
    generation or a missing n-gram match are predicted as what they were. z = residual ÷ the model's
    standard error; where the model has no variance (α̂ = 1 or 0) z is undefined (NaN), and the residual
    alone says how far apart they are (a serving engine's last round drafts γ and is then cut at the
    length limit, which α̂ = 1 cannot predict).
    """
    top = int(rounds.round_gamma.max()) if len(rounds) else 0
    rates = model.rates(top)
    mean_by_gamma = np.array([tokens_from_rates(rates[:g]) for g in range(top + 1)])
    var_by_gamma = np.array([tokens_variance_from_rates(rates[:g]) for g in range(top + 1)])
    rows = []
    for config_gamma, part in group.groupby("gamma"):
        mask = rounds.config_gamma == config_gamma
        n = int(mask.sum())
        if n == 0:
            continue
        counted = pd.to_numeric(part["rounds"], errors="coerce")
        seen = counted.notna() & (counted > 0)  # records whose rounds were observed
        observed = (
            float(part.loc[seen, "decode_tokens"].sum() / counted[seen].sum()) if seen.any() else float("nan")
        )  # unknown stays unknown, never a division by an empty sum
        predicted = float(mean_by_gamma[rounds.round_gamma[mask]].mean())
        se = float(np.sqrt(var_by_gamma[rounds.round_gamma[mask]].sum()) / n)
        residual = observed - predicted
        # a model without variance (α̂ = 1 or 0: every round's tokens are fixed) has no z: NaN, shown as '-'
        z = residual / se if se > 0 else (0.0 if abs(residual) < 1e-9 else float("nan"))
        rows.append(
            dict(
                gamma=int(config_gamma),
                rounds=n,
                tau_observed=observed,
                tau_predicted=predicted,
                residual=residual,
                z=z,
                tau_nominal=model.expected_tokens(int(config_gamma)),
            )
        )
    return pd.DataFrame(
        rows, columns=["gamma", "rounds", "tau_observed", "tau_predicted", "residual", "z", "tau_nominal"]
    )


def fit_group(
    group: pd.DataFrame, keys: dict, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0
) -> AcceptanceFit:
    """Fit one group's records (speculative records only, any number of γ)."""
    clusters = prompt_clusters(group)
    rounds = flatten_rounds(group, clusters)
    counts = position_counts(rounds, len(clusters))
    estimate = estimate_acceptance(counts, n_boot=n_boot, level=level, rng=np.random.default_rng(seed))
    replayed = int((group["mode"] == "replay").sum()) if "mode" in group else 0
    if replayed:
        estimate.notes.append(f"{replayed} of {len(group)} units replayed from target trajectories (docs/replay.md)")
    drafted = int(group["drafted"].sum())
    return AcceptanceFit(
        keys=keys,
        n_prompts=len(clusters),
        n_units=len(group),
        n_rounds=int((rounds.round_gamma > 0).sum()),
        gammas=sorted(int(g) for g in group["gamma"].unique()),
        accepted=int(counts.successes.sum()),
        trials=int(counts.successes.sum() + counts.failures.sum()),
        alpha_observed=float(group["accepted"].sum() / drafted) if drafted else 0.0,
        estimate=estimate,
        positions=_positions_frame(counts, estimate.model, level),
        goodness=goodness_of_fit(group, rounds, estimate.model),
    )


def load_results(folder) -> pd.DataFrame:
    """The records of a results folder, refusing what is not one: a missing folder, no run.json,
    no records (each a one-line SpecbenchError)."""

    folder = Path(folder)
    if not folder.is_dir():
        raise SpecbenchError(f"results folder not found: {folder}")
    load_run_info(folder)
    records = load_records(folder)
    if records.empty:
        raise SpecbenchError(f"{folder} holds no records yet (has its sweep run?)")
    return measured_records(records, folder)


def measured_records(records: pd.DataFrame, folder) -> pd.DataFrame:
    """The records that generated at least one decode token; the others (a server that streamed
    nothing, an answer that was only its first token) measured no round, no time per token and no
    acceptance, so fits and recommendations leave them out — said once on stderr — and a folder of
    nothing else is one error line."""
    empty = ~(pd.to_numeric(records["decode_tokens"], errors="coerce").fillna(0) > 0)
    if empty.all():
        raise SpecbenchError(
            f"{folder}: none of its {len(records)} records generated a decode token "
            "(0 tokens after the first): there is nothing to fit or plot"
        )
    if empty.any():
        note(
            f"{int(empty.sum())} record(s) of {folder} generated no decode token and are left out of fits, "
            "recommendations and figures"
        )
    return records[~empty].reset_index(drop=True)


def speculative_records(records: pd.DataFrame) -> pd.DataFrame:
    """The records of speculative configurations (γ ≥ 1), or a SpecbenchError saying there are none.

    A unit both measured and replayed counts once, by its live record (`specbench.records.summary.prefer_live`).
    """
    if records.empty:
        raise SpecbenchError("the results folder holds no records")
    spec = prefer_live(records[~is_baseline(records) & (records["gamma"] > 0)])
    if spec.empty:
        raise SpecbenchError("no speculative records (γ ≥ 1) to fit: the folder holds only the target-only baseline")
    return spec


def fit_acceptance(
    records: pd.DataFrame, by: list[str] | None = None, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0
) -> list[AcceptanceFit]:
    """One `AcceptanceFit` per (target, drafter, tree, workload, sampling) [× ``by`` keys], pooled over γ."""
    keys = ACCEPT_KEYS + list(by or [])
    records = with_config_defaults(records)  # frames made before schedules existed: every round drafted γ
    missing = [k for k in keys if k not in records.columns]
    if missing:
        raise SpecbenchError(f"records lack column(s) {', '.join(missing)}")
    spec = speculative_records(records)
    fits = []
    for i, (values, group) in enumerate(spec.groupby(keys, dropna=False, sort=True)):
        fits.append(fit_group(group, dict(zip(keys, values)), n_boot=n_boot, level=level, seed=seed + i))
    return fits


def fits_frame(fits: list[AcceptanceFit]) -> pd.DataFrame:
    return pd.DataFrame([f.summary() for f in fits])


def _keyed(fits: list[AcceptanceFit], attribute: str) -> pd.DataFrame:
    frames = [getattr(f, attribute).assign(**f.keys) for f in fits if len(getattr(f, attribute))]
    if not frames:
        return pd.DataFrame()
    frame = pd.concat(frames, ignore_index=True)
    keys = list(fits[0].keys)
    return frame[keys + [c for c in frame.columns if c not in keys]]


def positions_frame(fits: list[AcceptanceFit]) -> pd.DataFrame:
    return _keyed(fits, "positions")


def goodness_frame(fits: list[AcceptanceFit]) -> pd.DataFrame:
    return _keyed(fits, "goodness")


def tau_intervals(
    records: pd.DataFrame, *, by: list[str] | None = None, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0
) -> pd.DataFrame:
    """Measured τ per configuration × workload (or × the ``by`` columns) with a prompt-bootstrap interval.

    τ = Σ decode tokens ÷ Σ rounds over the configuration's records (bonus token included, as in
    `specbench.records.summary.configuration_table`); a replicate re-weights prompts (`specbench.analysis.statistics.intervals`).
    Below two prompts, or with ``n_boot`` 0, the interval collapses to the point. Columns: the
    configuration keys, workload (or the ``by`` keys), n_prompts, tau, tau_lo, tau_hi.
    """

    keys = CONFIG_KEYS + (by or ["workload"])
    records = with_config_defaults(records)
    rng = np.random.default_rng(seed)
    rows = []
    for values, group in records.groupby(keys, dropna=False, sort=True):
        clusters = prompt_clusters(group)
        sums = cluster_sums(cluster_codes(group, clusters), len(clusters), group["decode_tokens"], group["rounds"])
        tokens, rounds = sums.sum(0)
        tau = tokens / rounds if rounds > 0 else float("nan")
        lo = hi = tau
        if len(clusters) >= 2 and n_boot > 0 and rounds > 0:
            w = bootstrap_weights(len(clusters), n_boot, rng)
            with np.errstate(divide="ignore", invalid="ignore"):
                reps = (w @ sums[:, 0]) / (w @ sums[:, 1])
            lo, hi = (float(v) for v in bootstrap_interval(tau, reps, len(clusters), level, positive=True))
        rows.append({**dict(zip(keys, values)), "n_prompts": len(clusters), "tau": tau, "tau_lo": lo, "tau_hi": hi})
    return pd.DataFrame(rows, columns=keys + ["n_prompts", "tau", "tau_lo", "tau_hi"])

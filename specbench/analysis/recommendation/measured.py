"""Recommend with the sweep's own costs (`MeasuredCosts`): the best configuration per workload — measured
and predicted — or "no speculation".

A *scenario* is one (target, workload, sampling); its speedups are against that scenario's
target-only baseline (γ = 0, drafter 'none'). Two answers are given per scenario:

* measured: every configuration the sweep ran, its speedup paired with the baseline on the same
  (prompt, turn, repeat) units exactly as `specbench.records.summary.configuration_table` computes it;
* model: every (drafter, tree) group's acceptance fit (`specbench.analysis.fit`) and cost fit
  (`specbench.analysis.cost.round_cost`, used only through the `CostModel` interface) predict the speedup for
  γ = 1..max_gamma, measured or not (trees: their measured depths only — the node count of an
  unmeasured depth depends on the tree's shape). Replayed records (docs/replay.md) feed the
  acceptance fit (a unit also measured live counts once, by its live record) but never a
  measured speedup or the cost fit, and a γ that was only replayed counts as not measured.

Objectives. *throughput*: decode tokens/s ÷ the baseline's (the design's speedup). *latency*: the
mean time of one request of the scenario's length N (its largest ``new_tokens``, i.e. the
workload's max_new_tokens): L = mean prefill + (N − 1) ÷ decode tokens/s, speedup = L_baseline ÷
L. Prefill counts here (a draft model's own prefill included), so a drafter can win throughput
and lose latency on short outputs.

Uncertainty. One set of prompt-bootstrap weights (`specbench.analysis.statistics.intervals`) is drawn per scenario
and shared by every configuration, the baseline and the model refits, so comparisons stay
paired. Each option gets a bootstrap interval of its speedup (percentile, small-sample
corrected: `specbench.analysis.statistics.intervals.bootstrap_interval`). The recommendation is the option
with the highest point speedup among those whose interval lies above 1; when none does the answer
is "no speculation". The chosen γ's interval is the spread, over replicates, of the argmax γ
within the chosen (drafter, tree); ``win_share`` is the share of replicates in which that
(drafter, tree) has the best option overall. Model replicates refit α (and the decay when the
decaying model was preferred) and the cost coefficients, keeping the verify model's form (linear
or knee location) chosen on the full data.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from specbench.analysis.acceptance_model import position_counts, replicate_models
from specbench.analysis.context_bins import context_keys
from specbench.analysis.cost.round_cost import CostFit, predict_arrays, predict_curve
from specbench.analysis.cost.source import MeasuredCosts
from specbench.analysis.fit import estimate_acceptance
from specbench.analysis.load.table import CLOSED_LOOP, scenario_keys
from specbench.analysis.options import GROUP_KEYS, SCENARIO_KEYS, Option
from specbench.analysis.recommendation.result import Pick, Recommendation
from specbench.analysis.recommendation.schedule_comparison import compare_schedules
from specbench.analysis.settings.engine_settings import engine_settings, target_only_settings
from specbench.analysis.statistics.intervals import LEVEL, bootstrap_interval, bootstrap_weights, few_prompts_note
from specbench.analysis.statistics.sequential import FIXED, LookPlan
from specbench.analysis.statistics.speedup_interval import speedup_interval, speedup_words, t_quantile
from specbench.analysis.stream_adaptation import has_online, online_verdict, per_prompt
from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.analysis.verdicts.decision import Decision, decide_scenario
from specbench.errors import SpecbenchError
from specbench.records.rounds import cluster_codes, cluster_sums, flatten_rounds, prompt_clusters
from specbench.records.summary import CONFIG_KEYS, fixed_schedule, is_baseline, prefer_live
from specbench.records.timing import has_round_timings, paired_timing, timing_usable

# ----------------------------------------------------------------------------- objective


def _objective(
    objective: str, tokens, seconds, prefill, units, base_tokens, base_seconds, base_prefill, base_units, n_tokens: int
):
    """Speedup for the objective from (possibly bootstrap-weighted) sums; arrays broadcast."""
    with np.errstate(divide="ignore", invalid="ignore"):
        tps, base_tps = tokens / seconds, base_tokens / base_seconds
        if objective == "throughput":
            return tps / base_tps
        latency = prefill / units + (n_tokens - 1) / tps
        base_latency = base_prefill / base_units + (n_tokens - 1) / base_tps
        return base_latency / latency


def _objective_of_sums(objective: str, sums: np.ndarray, n_tokens: int):
    """`_objective` of an array whose last axis holds its eight sums in order: tokens, seconds, prefill, units,
    then the baseline's four."""
    tokens, seconds, prefill, units, base_tokens, base_seconds, base_prefill, base_units = np.moveaxis(sums, -1, 0)
    return _objective(
        objective, tokens, seconds, prefill, units, base_tokens, base_seconds, base_prefill, base_units, n_tokens
    )


# ----------------------------------------------------------------------------- measured path

PAIRED = ("decode_tokens", "decode_s", "prefill_s")


def _measured_options(
    spec: pd.DataFrame,
    base: pd.DataFrame,
    clusters: pd.Index,
    weights: np.ndarray,
    objective: str,
    n_tokens: int,
    level: float,
) -> tuple[list[Option], np.ndarray]:
    """Measured options and their replicate speedups [B, options]."""
    options, sums = [], []
    for key, group in spec.groupby(CONFIG_KEYS, dropna=False, sort=True):
        row = dict(zip(CONFIG_KEYS, key))
        pairs = paired_timing(group, base)  # the one rule every panel reads a comparison by (records.timing)
        if not pairs.pairs:
            continue
        paired = pd.concat([pairs.config, pairs.base[list(PAIRED)].add_suffix("_base")], axis=1)
        codes = cluster_codes(paired, clusters)
        ones = np.ones(len(paired))
        sums.append(
            cluster_sums(
                codes,
                len(clusters),
                paired["decode_tokens"],
                paired["decode_s"],
                paired["prefill_s"],
                ones,
                paired["decode_tokens_base"],
                paired["decode_s_base"],
                paired["prefill_s_base"],
                ones,
            )
        )
        schedule = row["schedule"] if isinstance(row["schedule"], str) else "fixed"
        options.append(
            Option(
                row["drafter"],
                row["drafter_label"],
                str(group["drafter_params"].iloc[0]),
                row["tree"],
                int(row["gamma"]),
                0.0,
                0.0,
                0.0,
                0.0,
                measured=True,
                schedule=schedule,
                timing_disturbed=pairs.disturbed,
            )
        )
    if not options:
        return [], np.zeros((len(weights), 0))
    stacked = np.stack(sums)  # [C, P, 8]
    point = _objective_of_sums(objective, stacked.sum(1), n_tokens)
    reps = _objective_of_sums(objective, np.einsum("bp,cpk->bck", weights, stacked), n_tokens)
    if objective == "throughput":  # small-P t-interval on per-prompt log ratios (speedup_interval)
        intervals = [
            speedup_interval(s[:, 0], s[:, 1], s[:, 4], s[:, 5], level=level)
            for s in (stacked[i][stacked[i][:, 7] > 0] for i in range(len(stacked)))
        ]
        lo, hi = np.array([iv.lo for iv in intervals]), np.array([iv.hi for iv in intervals])
        log_se, dof = np.array([iv.log_se for iv in intervals]), np.array([iv.dof for iv in intervals])
    else:
        lo, hi = (
            bootstrap_interval(point, reps, len(clusters), level, positive=True) if len(weights) else (point, point)
        )
        # the bootstrap interval read as a t-interval on the log scale (for the verdict's adjusted ends)
        dof = np.full(len(options), max(len(clusters) - 1, 0), dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_se = (np.log(hi) - np.log(lo)) / (2 * np.array([t_quantile(d, level) for d in dof]))
    totals = stacked.sum(1)
    for i, option in enumerate(options):
        option.speedup, option.lo, option.hi = float(point[i]), float(lo[i]), float(hi[i])
        option.log_se, option.dof = float(log_se[i]), float(dof[i])
        option.tokens_per_s = float(totals[i, 0] / totals[i, 1]) if totals[i, 1] > 0 else 0.0
    return options, reps


# ----------------------------------------------------------------------------- model path


def _objective_of(fit: CostFit, tokens_per_s: np.ndarray, objective: str, n_tokens: int) -> np.ndarray:
    return np.asarray(
        _objective(
            objective,
            tokens_per_s,
            1.0,
            fit.prefill_s,
            1.0,
            fit.baseline_tokens_per_s,
            1.0,
            fit.baseline_prefill_s,
            1.0,
            n_tokens,
        ),
        dtype=float,
    )


def _timed_base(base: pd.DataFrame, live: pd.DataFrame) -> pd.DataFrame:
    """Undisturbed baseline records of the prompts the group was timed on (all, where none is left)."""
    timed = timing_usable(base)[0]
    same = timed[timed["prompt_id"].isin(set(live["prompt_id"]))]
    return same if not same.empty else timed


def _model_options(
    spec: pd.DataFrame,
    base: pd.DataFrame,
    clusters: pd.Index,
    weights: np.ndarray,
    source: MeasuredCosts,
    objective: str,
    n_tokens: int,
    max_gamma: int,
    level: float,
    notes: list[str],
) -> tuple[list[Option], np.ndarray, pd.DataFrame, pd.DataFrame]:
    """Every (drafter, tree) group's predicted options: acceptance fit × the group's fitted costs, γ =
    1..max_gamma for chains (a tree's measured γ only), with bootstrap replicates [B, options]."""
    options, reps, curves, costs = [], [], [], []
    if not spec.empty and not has_round_timings(spec):  # a serving backend's records: measured options only
        spec = spec.iloc[:0]
    for key, group in spec.groupby(GROUP_KEYS, dropna=False, sort=True):
        row = dict(zip(GROUP_KEYS, key))
        live = group[group["mode"] == "live"]
        if live.empty:
            notes.append(f"{row['drafter_label']}: no live timings (replay records): no cost model")
            continue
        counts = position_counts(flatten_rounds(group, clusters), len(clusters))
        acceptance = estimate_acceptance(counts, n_boot=0, level=level)  # point fit; replicates below
        live = timing_usable(live)[0]  # timing protocol rule 6; costs from prompts timed with the baseline
        stats, fit = source.fit(live, _timed_base(base, live), clusters)
        measured = {int(g) for g in live["gamma"].unique()}  # replayed γ are predictions, not measurements
        gammas = list(range(1, max_gamma + 1)) if row["tree"] == "chain" else sorted(measured)
        curve = predict_curve(
            acceptance.model,
            fit.cost,
            gammas,
            alpha=acceptance.alpha,
            propose_rate=fit.propose_rate,
            tree_nodes=fit.tree_nodes,
            baseline_tokens_per_s=fit.baseline_tokens_per_s,
            measured=measured,
        )
        point = _objective_of(fit, curve["tokens_per_s"].to_numpy(), objective, n_tokens)
        group_reps = np.empty((len(weights), len(gammas)))
        for b, (w, model_b) in enumerate(zip(weights, replicate_models(acceptance.model, counts, weights))):
            fit_b = source.refit(stats, w, like=fit)
            with np.errstate(divide="ignore", invalid="ignore"):  # a replicate may draw no timed prompt: NaN
                tps = predict_arrays(
                    model_b, fit_b.cost, gammas, propose_rate=fit_b.propose_rate, tree_nodes=fit_b.tree_nodes
                )["tokens_per_s"]
            group_reps[b] = _objective_of(fit_b, tps, objective, n_tokens)
        lo, hi = (
            bootstrap_interval(point, group_reps, len(clusters), level, positive=True)
            if len(weights)
            else (point, point)
        )
        params = str(group["drafter_params"].iloc[0])
        for i, g in enumerate(gammas):
            options.append(
                Option(
                    row["drafter"],
                    row["drafter_label"],
                    params,
                    row["tree"],
                    int(g),
                    float(point[i]),
                    float(lo[i]),
                    float(hi[i]),
                    float(curve["tokens_per_s"].iloc[i]),
                    g in measured,
                )
            )
        reps.append(group_reps)
        curves.append(
            curve.assign(
                drafter=row["drafter"],
                drafter_label=row["drafter_label"],
                tree=row["tree"],
                objective_speedup=point,
                lo=lo,
                hi=hi,
                alpha=acceptance.alpha,
                acceptance_model=acceptance.model.name,
            )
        )
        costs.append({**row, **fit.summary(), "alpha": acceptance.alpha, "acceptance_model": acceptance.model.name})
        notes.extend(f"{row['drafter_label']}: {n}" for n in fit.notes + tuple(acceptance.notes))
    stacked = np.concatenate(reps, axis=1) if reps else np.zeros((len(weights), 0))
    front = ["drafter", "drafter_label", "tree", "gamma"]
    curve_frame = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=front)
    curve_frame = curve_frame[front + [c for c in curve_frame.columns if c not in front]]
    return options, stacked, curve_frame, pd.DataFrame(costs)


# ----------------------------------------------------------------------------- choosing


def _pick(
    source: str, options: list[Option], reps: np.ndarray, n_prompts: int, objective: str, level: float = LEVEL
) -> Pick:
    if not options:
        return Pick(source, None, None, reason="nothing to compare")
    known = [o for o in options if np.isfinite(o.speedup)]  # unknown stays unknown: never the "best" NaN
    if not known:
        return Pick(
            source,
            None,
            None,
            reason=f"no option's {objective} speedup is known (a quantity it needs was not measured)",
        )
    best = max(known, key=lambda o: o.speedup)
    above = [o for o in options if o.lo > 1.0] if n_prompts >= 2 else []
    choice = max(above, key=lambda o: o.speedup) if above else None
    ref = choice or best
    same = [i for i, o in enumerate(options) if o.group == ref.group]
    gamma_lo = gamma_hi = ref.gamma
    share = None
    if reps.shape[0] and n_prompts >= 2:
        finite = np.where(np.isfinite(reps), reps, -np.inf)
        gammas = np.array([options[i].gamma for i in same])
        chosen = gammas[np.argmax(finite[:, same], axis=1)]
        gamma_lo = int(np.percentile(chosen, 100 * (1 - level) / 2, method="lower"))
        gamma_hi = int(np.percentile(chosen, 100 * (1 + level) / 2, method="higher"))
        winners = np.argmax(finite, axis=1)
        share = float(np.mean([options[w].group == ref.group for w in winners]))
    if choice is not None:
        reason = (
            f"this path's best {objective} speedup {speedup_words(choice.speedup, choice.lo, choice.hi)} "
            f"(unadjusted; {len(above)} of its {len(options)} options lie above 1 before adjusting for the "
            "choice — the verdict's interval is the adjusted one)"
        )
    elif n_prompts < 2:
        reason = (
            f"intervals need ≥ 2 prompts (this scenario has {n_prompts}); best point estimate "
            f"{best.describe()} at {best.speedup:.2f}×"
        )
    else:
        reason = (
            f"no option's {objective} speedup interval lies above 1; best point estimate {best.describe()} "
            f"at {speedup_words(best.speedup, best.lo, best.hi)}"
        )
    return Pick(source, choice, best, gamma_lo, gamma_hi, share, reason)


def decision_verdict(decision: Decision, model: Pick) -> str:
    """The verdict line: what to deploy and how sure (`specbench.analysis.verdicts.decision`), plus the model's
    unmeasured γ when it beats the choice. A yes on disturbed timing is no verdict to deploy on."""
    option = decision.option
    if option is not None and not decision.confident:
        text = f"not decided (disturbed timing): {option.describe()} looked best — {decision.text}"
    else:
        text = (
            f"speculate: {option.describe()} — {decision.text}"
            if option is not None
            else f"no speculation — {decision.text}"
        )
    m = model.choice
    if m is not None and not m.measured and (option is None or m.speedup > option.hi):
        text += (
            f" (supporting detail, not a recommendation: the model predicts the unmeasured {m.describe()} at "
            f"{speedup_words(m.speedup, m.lo, m.hi)} — sweep that γ to check it)"
        )
    return text


OUTLIER_FACTOR = 5.0


def timing_outlier_notes(live: pd.DataFrame) -> list[str]:
    """Units whose decode seconds per token exceed `OUTLIER_FACTOR` × their configuration's median.

    Throughput is a ratio of sums, so one slow unit (a warm-up, a stalled machine) moves a whole
    configuration's tokens/s — and, for the baseline, every speedup. The notes say where.
    """
    notes = []
    for key, group in live.groupby(CONFIG_KEYS, dropna=False, sort=True):
        per_token = group["decode_s"] / group["decode_tokens"].clip(lower=1)
        median = float(per_token.median())
        slow = per_token > OUTLIER_FACTOR * median
        if median > 0 and slow.any():
            row = dict(zip(CONFIG_KEYS, key))
            name = "the baseline" if row["gamma"] == 0 else f"{row['drafter_label']} γ={row['gamma']}"
            share = float(group.loc[slow, "decode_s"].sum() / group["decode_s"].sum())
            notes.append(
                f"timing outliers in {name}: {int(slow.sum())} unit(s) above {OUTLIER_FACTOR:.0f}× the "
                f"median seconds per token hold {share:.0%} of its decode time (warm-up?); its measured "
                "tokens/s and the speedups built on it are affected"
            )
    return notes


def _options_frame(options: list[Option]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                k: getattr(o, k)
                for k in (
                    "drafter",
                    "drafter_label",
                    "tree",
                    "gamma",
                    "schedule",
                    "tokens_per_s",
                    "speedup",
                    "lo",
                    "hi",
                    "timing_disturbed",
                )
            }
            for o in options
        ]
    )


# ----------------------------------------------------------------------------- entry point


def recommend_measured(
    records: pd.DataFrame,
    costs: MeasuredCosts,
    *,
    objective: str,
    max_gamma: int,
    n_boot: int,
    level: float,
    seed: int,
    engines,
    hub_ids: Mapping[str, str] | None,
    plans: Mapping[str, LookPlan] | None = None,
    tolerance: float = TOLERANCE,
    by_context: bool = False,
) -> list[Recommendation]:
    """One `Recommendation` per (target, workload, sampling) scenario that has a baseline (and per
    backend / concurrency when the folder holds several; per context-length bin with ``by_context`` when the
    records span two or more bins); arguments checked by
    `specbench.analysis.recommendation.recommend.recommend`. ``hub_ids`` (model spec → Hugging Face id) names the
    models in the engine settings. ``plans`` (workload → `LookPlan`): the looks an adaptive sweep
    planned for each workload (`specbench.analysis.statistics.sequential`); a workload without one was a fixed grid.
    """
    baseline = is_baseline(records) & (records["mode"] == "live")
    if not baseline.any():
        raise SpecbenchError(
            "no target-only baseline records (γ = 0, drafter 'none', measured live): "
            "speedups need them — run the sweep with its baseline"
        )
    spec_mask = ~is_baseline(records) & (records["gamma"] > 0)
    if not spec_mask.any():
        raise SpecbenchError("no speculative records (γ ≥ 1): nothing to recommend")
    out, skipped = [], []
    scenario_by = scenario_keys(records)  # + backend / concurrency when a folder holds several
    if scenario_by != SCENARIO_KEYS:
        fill = {"concurrency": 1, "request_rate": CLOSED_LOOP, "backend": "own"}
        records = records.assign(**{k: records[k].fillna(fill[k]) for k in scenario_by[len(SCENARIO_KEYS) :]})
    if by_context:  # + the context-length bin (records of prompts without one: a scenario of their own)
        scenario_by = scenario_by + context_keys(records)
    for i, (key, scenario) in enumerate(records.groupby(scenario_by, dropna=False, sort=True)):
        keys = dict(zip(scenario_by, key))
        base = scenario[is_baseline(scenario) & (scenario["mode"] == "live")]
        spec = scenario[~is_baseline(scenario) & (scenario["gamma"] > 0)]
        if base.empty or spec.empty:
            what = "no live baseline" if base.empty else "no speculative records"
            skipped.append(f"skipped {keys['workload']} ({keys['target']}, T={keys['temperature']}): {what}")
            continue
        out.append(
            _recommend_scenario(
                keys,
                scenario,
                base,
                spec,
                costs,
                objective=objective,
                max_gamma=max_gamma,
                n_boot=n_boot,
                level=level,
                rng=np.random.default_rng(seed + i),
                engines=engines,
                hub_ids=hub_ids,
                plan=(plans or {}).get(str(keys["workload"]), FIXED),
                tolerance=tolerance,
            )
        )
    if not out:
        raise SpecbenchError("no workload has both baseline and speculative records for the same target and sampling")
    for rec in out:
        rec.notes.extend(skipped)
    return out


def _recommend_scenario(
    keys: dict,
    scenario: pd.DataFrame,
    base: pd.DataFrame,
    spec: pd.DataFrame,
    costs: MeasuredCosts,
    *,
    objective: str,
    max_gamma: int,
    n_boot: int,
    level: float,
    rng: np.random.Generator,
    engines,
    hub_ids: Mapping[str, str] | None,
    plan: LookPlan = FIXED,
    tolerance: float = TOLERANCE,
) -> Recommendation:
    clusters = prompt_clusters(scenario)
    n_prompts = len(clusters)
    weights = bootstrap_weights(n_prompts, n_boot if n_prompts >= 2 else 0, rng)
    n_tokens = int(scenario["new_tokens"].max())
    notes: list[str] = []
    if n_prompts < 2:
        notes.append("one prompt: no prompt bootstrap, intervals collapse to the point estimate")
    elif note := few_prompts_note(n_prompts):
        notes.append(note)
    live_spec = spec[spec["mode"] == "live"]
    notes.extend(timing_outlier_notes(pd.concat([base, live_spec])))
    timed_spec = timing_usable(live_spec)[0]
    measured_options, measured_reps = _measured_options(live_spec, base, clusters, weights, objective, n_tokens, level)
    # the acceptance and cost model describe rounds of a fixed γ: dynamic schedules are measured options only
    model_options, model_reps, curves, fitted = _model_options(
        prefer_live(spec[fixed_schedule(spec)]),
        base,
        clusters,
        weights,
        costs,
        objective,
        n_tokens,
        max_gamma,
        level,
        notes,
    )
    measured = _pick("measured", measured_options, measured_reps, n_prompts, objective, level)
    model = _pick("model", model_options, model_reps, n_prompts, objective, level)
    decision, predicted = decide_scenario(scenario, measured_options, n_prompts, level, notes, plan, tolerance)
    final = decision.option if decision.confident else None  # the settings say what the verdict says
    if decision.option is not None and final is None:
        notes.append("no engine settings: the yes rests on disturbed timing (rerun on a quieter machine)")
    schedules = compare_schedules(timed_spec, clusters, level)
    online = online_verdict(per_prompt(scenario), keys, level) if has_online(scenario) else None
    settings = {}
    if final is not None and final.schedule != "fixed":
        notes.append(
            f"the engine settings give γ = {final.gamma}; schedule {final.schedule} is specbench's own "
            "(serving engines draft a fixed γ, transformers also has its heuristic schedule)"
        )
    if final is not None:
        settings = engine_settings(
            final.drafter,
            final.drafter_params,
            final.tree,
            final.gamma,
            target=str(keys["target"]),
            engines=engines,
            hub_ids=hub_ids,
        )
        if " nested(P=" in str(final.drafter_label):  # docs/strategies.md
            notes.append(
                "the choice uses nested speculation, a round strategy of specbench's own engine; the serving-"
                "engine settings run the same drafter and γ sequentially"
            )
        if " online(" in str(final.drafter_label):  # docs/strategies.md, "Online adaptation"
            notes.append(
                "the choice uses online adaptation, a strategy of specbench's own engine (its drafter kept "
                "learning from the traffic); the serving-engine settings run the drafter's checkpoint as is"
            )
    elif decision.confident and decision.says_no:  # a no is as paste-ready as a yes: the target alone
        settings = target_only_settings(target=str(keys["target"]), engines=engines, hub_ids=hub_ids)
    base_tps = float(base["decode_tokens"].sum() / base["decode_s"].sum()) if base["decode_s"].sum() > 0 else 0.0
    return Recommendation(
        keys=keys,
        cost_source=costs.describe(),
        objective=objective,
        n_prompts=n_prompts,
        max_new_tokens=n_tokens,
        baseline_tokens_per_s=base_tps,
        measured=measured,
        model=model,
        options=_options_frame(measured_options),
        curves=curves,
        costs=fitted,
        verdict=decision_verdict(decision, model),
        settings=settings,
        notes=notes,
        predicted=predicted,
        decision=decision,
        schedules=schedules,
        online=online,
    )

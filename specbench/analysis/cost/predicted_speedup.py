"""Predicted speedup: acceptance from many prompts × cost per round from interleaved timings.

Two separate measurements, combined per configuration (drafter, tree, γ) of a scenario:

* **acceptance** — the rounds each prompt needs at this γ (how many tokens each round drafted
  and accepted), from every record of the configuration: replayed units (cheap, so many
  prompts) or live ones. Acceptance does not depend on time, so every prompt counts, also one
  whose timing was disturbed;
* **cost** — the cost model (`specbench.analysis.cost.round_cost`: t_verify(k), t_draft, overhead) fitted on
  the *calibration prompts*: those where the configuration group's live units and the baseline
  were timed together in one block (`specbench.measure.timing.timing_protocol`), undisturbed units only.

Every prompt's decode time is then modelled, for the configuration (Σ over its rounds of
draft + verify(drafted + 1) + overhead) and for the baseline (its rounds × (verify(1) +
baseline overhead)); the predicted speedup is the ratio of sums over prompts. It no longer
depends on when each baseline happened to be timed.

Interval (log scale, t with Welch–Satterthwaite degrees of freedom), carrying both parts:

* acceptance: the per-prompt t-interval of `specbench.analysis.statistics.speedup_interval` on the modelled
  per-prompt times (costs held at their fit): se_a with P − 1 df;
* cost: the cost model refitted on each calibration prompt alone gives one predicted speedup per
  prompt, S_q; se_c = sd(log S_q) ÷ √Q with Q − 1 df (one calibration prompt: not measured, a
  note says so).

The measured end-to-end speedup on the calibration prompts (live units, paired with the
baseline) is the check on the model: ``realized_over_predicted`` = measured ÷ predicted on
exactly those units, with its per-prompt t-interval (``realized_lo``, ``realized_hi``). Where the
model misprices a configuration confidently by more than the choice's tolerance (`model_misses`),
the verdict rests on the measured speedups instead (`specbench.analysis.verdicts.decision`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.analysis.cost.round_cost import CostFit, cost_stats, fit_costs
from specbench.analysis.statistics.intervals import LEVEL
from specbench.analysis.statistics.paired_ratio import PerPrompt
from specbench.analysis.statistics.speedup_interval import combined_interval, speedup_interval, t_quantile
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.records.rounds import cluster_codes, cluster_sums, prompt_clusters
from specbench.records.summary import BASELINE_KEYS, UNIT_KEYS, is_baseline, prefer_live, with_config_defaults
from specbench.records.timing import NO_ROUND_TIMINGS, has_round_timings, timing_usable

GROUP = ["drafter", "drafter_label", "tree", "schedule"]  # the cost model prices each round as drafted: any schedule


def modelled_decode_s(records: pd.DataFrame, fit: CostFit) -> np.ndarray:
    """Each record's decode seconds as the cost model prices its rounds."""
    cost = fit.cost
    out = np.zeros(len(records))
    for i, r in enumerate(records.itertuples()):
        drafted = np.asarray(r.round_drafted, dtype=float)
        if r.gamma == 0 or r.drafter == TARGET_ONLY:
            out[i] = r.rounds * (float(cost.verify(1)) + cost.baseline_overhead_s)
            continue
        if cost.draft.model_free:
            draft = np.full(len(drafted), cost.draft.fixed_s)
        else:
            steps = np.asarray(r.round_draft_steps, dtype=float)
            draft = np.where(steps > 0, cost.draft.fixed_s + cost.draft.step_s * steps, 0.0)
        out[i] = float(np.sum(draft + cost.verify(drafted + 1)) + len(drafted) * cost.round_overhead_s)
    return out


def _per_prompt(config: pd.DataFrame, base: pd.DataFrame, clusters: pd.Index, fit: CostFit):
    """Per-prompt (tokens, modelled s, base tokens, modelled base s) on the prompts both cover: [4, P]."""
    frame = _per_prompt_frame(config, base, clusters, fit)
    return None if frame is None else frame.to_numpy().T


def _per_prompt_frame(config: pd.DataFrame, base: pd.DataFrame, clusters: pd.Index, fit: CostFit):
    """`_per_prompt` as a frame indexed by prompt (columns tokens, seconds, base_tokens, base_seconds)."""
    paired = _paired_with_model(config, base, fit)
    if paired.empty:
        return None
    sums = cluster_sums(
        cluster_codes(paired, clusters),
        len(clusters),
        *(paired[c] for c in ("decode_tokens", "model_s", "decode_tokens_base", "model_s_base")),
    )
    present = sums[:, 0] > 0
    return pd.DataFrame(sums[present], index=clusters[present], columns=_SUM_COLUMNS)


def _paired_with_model(config: pd.DataFrame, base: pd.DataFrame, fit: CostFit) -> pd.DataFrame:
    """The configuration's units joined with the baseline's on the same units (columns of the baseline suffixed
    ``_base``), each side's decode seconds as the cost model prices them beside the timed ones: ``model_s``,
    ``model_s_base``."""
    return config.assign(model_s=modelled_decode_s(config, fit)).merge(
        base[UNIT_KEYS + ["decode_tokens", "decode_s"]].assign(model_s=modelled_decode_s(base, fit)),
        on=UNIT_KEYS,
        suffixes=("", "_base"),
    )


_SUM_COLUMNS = ["tokens", "seconds", "base_tokens", "base_seconds"]


def _calibration(group_live: pd.DataFrame, base: pd.DataFrame) -> list[str]:
    """Prompts where the group and the baseline have undisturbed live timings."""
    return sorted(set(group_live["prompt_id"].astype(str)) & set(base["prompt_id"].astype(str)))


def _fit(group_live: pd.DataFrame, base: pd.DataFrame, prompts: list[str]) -> CostFit | None:
    g = group_live[group_live["prompt_id"].astype(str).isin(prompts)]
    b = base[base["prompt_id"].astype(str).isin(prompts)]
    if g.empty or b.empty:
        return None
    clusters = prompt_clusters(pd.concat([g[["prompt_id"]], b[["prompt_id"]]]))
    return fit_costs(cost_stats(g, b, clusters))


def predicted_table(scenario: pd.DataFrame, level: float = LEVEL) -> tuple[pd.DataFrame, list[str]]:
    """One row per configuration of a scenario (one workload and sampling): predicted speedup with
    its interval, the measured speedup on the calibration prompts, and their ratio."""
    table, notes, _ = predicted_evidence(scenario, level)
    return table, notes


def predicted_evidence(
    scenario: pd.DataFrame, level: float = LEVEL
) -> tuple[pd.DataFrame, list[str], dict[tuple, PerPrompt]]:
    """`predicted_table` and, per configuration (keyed (drafter label, tree, γ, schedule)), its modelled
    per-prompt tokens and seconds with the per-calibration-prompt refits: the evidence the choice between
    configurations compares them on, paired (`specbench.analysis.verdicts.choice`)."""
    samples: dict[tuple, PerPrompt] = {}
    notes: list[str] = []
    live_base = scenario[is_baseline(scenario) & (scenario["mode"] == "live")]
    if live_base.empty:
        return pd.DataFrame(), notes, samples
    base_timed, note = timing_usable(live_base)
    spec = prefer_live(scenario[~is_baseline(scenario) & (scenario["gamma"] > 0)])
    spec = with_config_defaults(spec)
    if not spec.empty and not has_round_timings(spec):
        return pd.DataFrame(), [NO_ROUND_TIMINGS], samples
    live_spec, note2 = timing_usable(spec[spec["mode"] == "live"])
    notes.extend(n for n in dict.fromkeys([note, note2]) if n)
    clusters = prompt_clusters(scenario)
    rows = []
    for key, group in spec.groupby(GROUP, dropna=False, sort=True):
        keys = dict(zip(GROUP, key))
        group_live = live_spec
        for k, v in keys.items():
            group_live = group_live[group_live[k] == v]
        prompts = _calibration(group_live, base_timed)
        fit = _fit(group_live, base_timed, prompts)
        if fit is None:
            notes.append(
                f"{keys['drafter_label']}: no prompt with live timings of both it and the baseline: "
                "no predicted speedup"
            )
            continue
        fits_of_prompts = [_fit(group_live, base_timed, [p]) for p in prompts]
        per_prompt_fits = [f for f in fits_of_prompts if f is not None]
        if len(per_prompt_fits) < 2:
            notes.append(
                f"{keys['drafter_label']}: costs timed on one prompt: the predicted interval leaves the "
                "cost uncertainty out"
            )
        for gamma, config in group.groupby("gamma", sort=True):
            frame = _per_prompt_frame(config, live_base, clusters, fit)
            if frame is None:
                continue
            tokens, seconds, base_tokens, base_seconds = frame.to_numpy().T
            acceptance = speedup_interval(tokens, seconds, base_tokens, base_seconds, level=level)
            parts = [(acceptance.log_se, acceptance.dof)]
            cost_se, cost_dof = float("nan"), 0
            logs = []
            for f in per_prompt_fits:
                t, sec, bt, bs = _per_prompt(config, live_base, clusters, f).sum(axis=1)
                logs.append(np.log((t / sec) / (bt / bs)))
            if len(logs) >= 2:
                cost_se, cost_dof = float(np.std(logs, ddof=1) / np.sqrt(len(logs))), len(logs) - 1
                parts.append((cost_se, cost_dof))
            key = (keys["drafter_label"], keys["tree"], int(gamma), keys["schedule"])
            refits = pd.Series(logs, index=[p for p, f in zip(prompts, fits_of_prompts) if f is not None])
            samples[key] = PerPrompt(frame["tokens"], frame["seconds"], refits if len(logs) >= 2 else None)
            interval = combined_interval(
                acceptance.point,
                parts,
                acceptance.n_prompts,
                level,
                method="acceptance (per-prompt t) + cost (per-calibration-prompt refits)",
            )
            row = {
                **keys,
                "gamma": int(gamma),
                "n_prompts": acceptance.n_prompts,
                "n_calibration": len(prompts),
                "predicted": interval.point,
                "lo": interval.lo,
                "hi": interval.hi,
                "dof": interval.dof,
                "acceptance_log_se": acceptance.log_se,
                "cost_log_se": cost_se,
                "tau": float(config["decode_tokens"].sum() / max(config["rounds"].sum(), 1)),
            }
            row.update(_realized(config, group_live, base_timed, prompts, clusters, fit, level))
            rows.append(row)
    return pd.DataFrame(rows), notes, samples


def _realized(
    config: pd.DataFrame,
    group_live: pd.DataFrame,
    base: pd.DataFrame,
    prompts: list[str],
    clusters: pd.Index,
    fit: CostFit,
    level: float,
) -> dict:
    """Measured speedup on the calibration prompts, the prediction on the same units, and the model check: their
    ratio with its per-prompt t-interval (module docstring).

    With S the configuration's decode seconds and B the baseline's, timed (m) and priced by the cost fit (c),
    summed over the same paired units of each prompt p, the tokens cancel:

        realized ÷ predicted = (Σ_p S^c_p ÷ Σ_p S^m_p) ÷ (Σ_p B^c_p ÷ Σ_p B^m_p)

    which is `speedup_interval`'s ratio with S^c, S^m, B^c, B^m in the places of its four sums."""
    nan = float("nan")
    paired = _paired_with_model(group_live[(group_live["gamma"] == config["gamma"].iloc[0])], base, fit)
    if paired.empty:
        return {
            "measured": nan,
            "measured_lo": nan,
            "measured_hi": nan,
            "n_measured": 0,
            "predicted_same_prompts": nan,
            **dict.fromkeys(CHECK_COLUMNS, nan),
        }
    sums = cluster_sums(
        cluster_codes(paired, clusters),
        len(clusters),
        *(paired[c] for c in ("decode_tokens", "decode_s", "decode_tokens_base", "decode_s_base")),
        *(paired[c] for c in ("model_s", "model_s_base")),
    )
    tokens, seconds, base_tokens, base_seconds, model_s, base_model_s = sums[sums[:, 0] > 0].T
    measured = speedup_interval(tokens, seconds, base_tokens, base_seconds, level=level)
    check = speedup_interval(model_s, seconds, base_model_s, base_seconds, level=level)
    return {
        "measured": measured.point,
        "measured_lo": measured.lo,
        "measured_hi": measured.hi,
        "n_measured": measured.n_prompts,
        "predicted_same_prompts": float(measured.point / check.point),
        "realized_over_predicted": check.point,
        "realized_lo": check.lo,
        "realized_hi": check.hi,
        "check_log_se": check.log_se,
        "check_dof": check.dof,
    }


CHECK_COLUMNS = ("realized_over_predicted", "realized_lo", "realized_hi", "check_log_se", "check_dof")


def model_misses(predicted: pd.DataFrame, level: float, tolerance: float) -> pd.DataFrame:
    """The configurations the cost model misprices beyond the tolerance, confidently: those whose realized ÷
    predicted interval, at level 1 − (1 − level)/K for the K configurations checked (Bonferroni), lies wholly
    outside [1/(1 + ε), 1 + ε]. Where any does, the prediction is not the evidence to choose by: a mispricing
    larger than ε can reorder options that the choice calls equivalent within ε."""
    if predicted.empty or "check_log_se" not in predicted:
        return predicted.iloc[0:0]
    checked = predicted[np.isfinite(predicted["check_log_se"]) & (predicted["check_dof"] > 0)]
    if checked.empty:
        return checked
    simultaneous = 1 - (1 - level) / len(checked)
    half = np.array([t_quantile(d, simultaneous) for d in checked["check_dof"]]) * checked["check_log_se"]
    log_ratio = np.log(checked["realized_over_predicted"])
    bound = np.log1p(tolerance)
    return checked[(log_ratio - half > bound) | (log_ratio + half < -bound)]


def predicted_by_scenario(records: pd.DataFrame) -> pd.DataFrame:
    """`predicted_table` for every scenario (target, sampling, workload) of a folder, keys included.

    What `results show` prints for replayed rows: their speedup is acceptance × cost with the
    baseline *modelled* by the same cost fit, not the modelled speed over a baseline timed at
    other moments.
    """
    frames = []
    for key, scenario in records.groupby(BASELINE_KEYS, dropna=False, sort=True):
        table, _ = predicted_table(scenario)
        if not table.empty:
            frames.append(table.assign(**dict(zip(BASELINE_KEYS, key))))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

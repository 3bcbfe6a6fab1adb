"""Does a dynamic verify-length schedule beat the best fixed γ? One answer per scenario, measured.

Among the scenario's measured configurations, the *fixed* ones (schedule 'fixed': every round
drafts γ) and the *dynamic* ones (heuristic, threshold, dspark: γ is only the cap) are ranked by
decode tokens/s (Σ decode tokens ÷ Σ decode seconds over the prompts both were measured on). The
best of each family is compared head to head, paired by prompt:

    R = tokens/s(best dynamic) ÷ tokens/s(best fixed γ)

with the same small-sample interval as every measured speedup (`specbench.analysis.statistics.speedup_interval`:
a t-interval on the per-prompt log-ratio contributions, P − 1 df), the best fixed configuration
standing where the baseline usually stands. The answer is *yes* when the interval lies above 1, *no*
when it lies below, *cannot tell* otherwise (and below `MIN_PROMPTS` prompts). Both winners are
picked on the data the interval is computed from (each side's best is a little optimistic, and the
interval does not widen for that choice); the comparison is of the two families' best, as a user
would deploy them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.analysis.statistics.intervals import LEVEL
from specbench.analysis.statistics.speedup_interval import MIN_PROMPTS, speedup_interval
from specbench.analysis.verdicts.verdict import NO, YES, decide
from specbench.records.rounds import cluster_codes, cluster_sums
from specbench.records.summary import CONFIG_KEYS, fixed_schedule


def _describe(row: dict) -> str:
    tree = "" if row["tree"] == "chain" else f" tree {row['tree']}"
    schedule = "" if row["fixed"] else f" schedule {row['schedule']}"
    return f"{row['drafter_label']}{tree} γ={int(row['gamma'])}{schedule}"


def _per_prompt(spec: pd.DataFrame, clusters: pd.Index) -> list[tuple[dict, np.ndarray]]:
    """Each configuration's per-prompt (decode tokens, decode seconds) sums [P, 2]."""
    out = []
    for key, group in spec.groupby(CONFIG_KEYS, dropna=False, sort=True):
        row = {**dict(zip(CONFIG_KEYS, key)), "fixed": bool(fixed_schedule(group).all())}
        sums = cluster_sums(cluster_codes(group, clusters), len(clusters), group["decode_tokens"], group["decode_s"])
        out.append((row, sums))
    return out


def _best(configs: list[tuple[dict, np.ndarray]], common: np.ndarray) -> tuple[dict, np.ndarray]:
    def rate(sums: np.ndarray) -> float:
        seconds = sums[common, 1].sum()
        return sums[common, 0].sum() / seconds if seconds > 0 else -np.inf

    return max(configs, key=lambda c: rate(c[1]))


def compare_schedules(spec: pd.DataFrame, clusters: pd.Index, level: float = LEVEL) -> dict | None:
    """The scenario's best dynamic schedule vs its best fixed γ (measured, timed records of ``spec``);
    None when the scenario lacks one of the two families."""
    if spec.empty:
        return None
    configs = _per_prompt(spec, clusters)
    fixed = [c for c in configs if c[0]["fixed"]]
    dynamic = [c for c in configs if not c[0]["fixed"]]
    if not fixed or not dynamic:
        return None
    measured = np.stack([sums[:, 1] > 0 for _, sums in configs])  # [C, P]
    common = np.asarray(measured.all(0))  # [P]: prompts every configuration was timed on
    best_fixed, best_dynamic = _best(fixed, common), _best(dynamic, common)
    (f_row, f_sums), (d_row, d_sums) = best_fixed, best_dynamic
    interval = speedup_interval(d_sums[common, 0], d_sums[common, 1], f_sums[common, 0], f_sums[common, 1], level=level)
    answer, _ = decide(interval)
    if not interval.has_interval:
        why = f"too few prompts to tell (P = {interval.n_prompts}; ≥ {MIN_PROMPTS} needed)"
    else:
        why = {YES: "its interval lies above 1", NO: "its interval lies below 1"}.get(answer, "its interval contains 1")
    verb = {YES: "beats", NO: "loses to"}.get(answer, "vs")
    word = answer.word
    ratio = interval.text() if interval.has_interval else f"{interval.point:.2f}×"
    text = (
        f"dynamic schedule {word}: best dynamic {_describe(d_row)} {verb} best fixed {_describe(f_row)}: "
        f"tokens/s ratio {ratio} — {why}"
    )
    return {
        "answer": word,
        "best_dynamic": _describe(d_row),
        "best_fixed": _describe(f_row),
        "dynamic_schedule": d_row["schedule"],
        "dynamic_gamma": int(d_row["gamma"]),
        "fixed_gamma": int(f_row["gamma"]),
        "ratio": interval.point,
        "lo": interval.lo,
        "hi": interval.hi,
        "n_prompts": interval.n_prompts,
        "level": level,
        "method": interval.method,
        "text": text,
    }


def answer_word(comparison: dict) -> str:
    """The comparison's answer (`compare_schedules`): yes, no or cannot tell."""
    return str(comparison["answer"])

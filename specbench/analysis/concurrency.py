"""Speculation against concurrency: the best γ per (workload, concurrency), measured.

A serving-engine sweep with ``concurrency: [1, 4, 16, ...]`` measures every configuration and its
target-only baseline with that many requests in flight. Here each (scenario, concurrency) gets
its measured speedup per configuration — decode tokens/s over the units the configuration and
the baseline share (same prompt, turn, repeat, concurrency) — the best γ with a speedup above
1 (or none), and the first concurrency where no configuration pays any more.

From that, per drafter, vLLM's ``num_speculative_tokens_per_batch_size``: ranges
``[first_batch, last_batch, K]`` over batch sizes. The K measured at concurrency c_i holds from
c_i up to the next measured level − 1; the ranges end with a K = 0 range from the first level
where the drafter stops paying. vLLM applies the last range's K to every larger batch: when the
last range is K = 0 that turns speculation off above it (what was measured); when it is K > 0,
every batch beyond the largest measured concurrency also drafts K — unmeasured, and said so.

Latency at each level (`latency_table`): time to first token and inter-token latency at p50 / p90 /
p99 over the requests of every configuration, the baseline included, at every concurrency
(`specbench.records.summary.latency_percentiles`: one record is one request; ITL is each
request's mean gap between tokens). Speculation can raise tokens/s and still lengthen TTFT.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from specbench.analysis.vllm_speculative import draft_model_spec, names_a_model, vllm_kinds
from specbench.analysis.vllm_speculative import speculative_config as vllm_speculative_config
from specbench.records.summary import BASELINE_KEYS, LATENCY_COLUMNS, UNIT_KEYS, is_baseline, latency_percentiles

LEVEL_KEYS = ["backend", "concurrency"]


def has_concurrency(records: pd.DataFrame) -> bool:
    """Whether the records hold more than one concurrency level (old records: null = 1)."""
    return "concurrency" in records and records["concurrency"].fillna(1).nunique() > 1


def scenario_keys(records: pd.DataFrame) -> list[str]:
    """The scenario keys of `specbench.analysis.recommend`, plus concurrency (and backend) when they vary."""
    keys = list(BASELINE_KEYS)
    if "backend" in records and records["backend"].fillna("own").nunique() > 1:
        keys.append("backend")
    if has_concurrency(records):
        keys.append("concurrency")
    return keys


def _normalised(records: pd.DataFrame) -> pd.DataFrame:
    frame = records[records["mode"] == "live"].copy()
    frame["backend"] = frame["backend"].fillna("own") if "backend" in frame else "own"
    frame["concurrency"] = frame["concurrency"].fillna(1).astype(int) if "concurrency" in frame else 1
    return frame


def speedups(records: pd.DataFrame) -> pd.DataFrame:
    """Measured speedup of every configuration at every concurrency, paired with its baseline.

    Columns: scenario keys, backend, concurrency, drafter, drafter_label, drafter_params, tree,
    gamma, alpha, tokens_per_s, baseline_tokens_per_s, speedup, units, and the configuration's
    `LATENCY_COLUMNS` over the same units.
    """
    frame = _normalised(records)
    keys = BASELINE_KEYS + LEVEL_KEYS
    base = frame[is_baseline(frame)][keys + UNIT_KEYS + ["decode_tokens", "decode_s"]]
    spec = frame[~is_baseline(frame) & (frame["gamma"] > 0)]
    paired = spec.merge(base, on=keys + UNIT_KEYS, suffixes=("", "_base"))
    rows = []
    config = ["drafter", "drafter_label", "drafter_params", "tree", "gamma"]
    for key, group in paired.groupby(keys + config, dropna=False, sort=True):
        row = dict(zip(keys + config, key))
        tps = group["decode_tokens"].sum() / group["decode_s"].sum()
        base_tps = group["decode_tokens_base"].sum() / group["decode_s_base"].sum()
        drafted = group["drafted"].sum()
        row.update(alpha=float(group["accepted"].sum() / drafted) if drafted else float("nan"),
                   tokens_per_s=float(tps), baseline_tokens_per_s=float(base_tps), speedup=float(tps / base_tps),
                   units=len(group), **latency_percentiles(group))
        rows.append(row)
    return pd.DataFrame(rows)


def latency_table(records: pd.DataFrame) -> pd.DataFrame:
    """TTFT and ITL percentiles of every configuration, the baseline included, per (scenario, backend,
    concurrency): columns scenario keys, backend, concurrency, drafter, drafter_label, tree, gamma,
    requests, `LATENCY_COLUMNS` (s). Empty when no live record has a TTFT or an ITL."""
    frame = _normalised(records)
    if frame.empty:
        return pd.DataFrame()
    keys = BASELINE_KEYS + LEVEL_KEYS + ["drafter", "drafter_label", "tree", "gamma"]
    rows = []
    for key, group in frame.groupby(keys, dropna=False, sort=True):
        rows.append({**dict(zip(keys, key)), "requests": len(group), **latency_percentiles(group)})
    table = pd.DataFrame(rows)
    if table[LATENCY_COLUMNS].isna().all().all():
        return pd.DataFrame()
    return table


def best_per_level(table: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """The best configuration per (scenario, backend, concurrency[, by]): highest speedup above 1,
    else none (gamma 0, speculation does not pay there)."""
    keys = BASELINE_KEYS + LEVEL_KEYS + list(by or [])
    rows = []
    for key, group in table.groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, key))
        top = group.sort_values("speedup", ascending=False).iloc[0]
        pays = bool(top["speedup"] > 1.0)
        row.update(best=top["drafter_label"] if pays else "no speculation", tree=top["tree"],
                   gamma=int(top["gamma"]) if pays else 0, speedup=float(top["speedup"]),
                   best_measured=f"{top['drafter_label']} γ={int(top['gamma'])}")
        rows.append(row)
    return pd.DataFrame(rows)


def stops_paying(best: pd.DataFrame) -> dict[tuple, int | None]:
    """Per (scenario, backend): the lowest concurrency from which no measured level pays, or None."""
    out = {}
    for key, group in best.groupby(BASELINE_KEYS + ["backend"], dropna=False, sort=True):
        levels = group.sort_values("concurrency")
        stop = None
        for row in levels.itertuples():
            if row.gamma == 0 and stop is None:
                stop = int(row.concurrency)
            elif row.gamma > 0:
                stop = None  # pays again at a higher level: not a stopping point
        out[key] = stop
    return out


def batch_size_ranges(levels: list[int], gammas: list[int]) -> list[list[int]]:
    """[[first_batch, last_batch, K], ...] (vLLM's K is γ): γ measured at level c_i holds for
    c_i .. c_{i+1} − 1; equal neighbours merge; the last range is [c_last, c_last, γ] (vLLM extends it
    to every larger batch)."""
    pairs = sorted(zip(levels, gammas))
    out: list[list[int]] = []
    for i, (level, gamma) in enumerate(pairs):
        last = pairs[i + 1][0] - 1 if i + 1 < len(pairs) else level
        if i == 0 and level > 1:
            level = 1  # batches below the smallest level measured: its K
        if out and out[-1][2] == gamma:
            out[-1][1] = last
        else:
            out.append([int(level), int(last), int(gamma)])
    return out


def batch_size_schedules(table: pd.DataFrame) -> list[dict]:
    """Per (scenario, backend, drafter, tree): the best γ of that drafter at each concurrency
    (0 where it loses) as vLLM ranges, with what the last range means."""
    out = []
    keys = BASELINE_KEYS + ["backend", "drafter", "drafter_label", "drafter_params", "tree"]
    for key, group in table[table["tree"] == "chain"].groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, key))
        levels, gammas = [], []
        for level, at in group.groupby("concurrency", sort=True):
            top = at.sort_values("speedup", ascending=False).iloc[0]
            levels.append(int(level))
            gammas.append(int(top["gamma"]) if top["speedup"] > 1.0 else 0)
        if len(levels) < 2:
            continue
        ranges = batch_size_ranges(levels, gammas)
        top_gamma = max(gammas)
        last = ranges[-1]
        if last[2] == 0:
            note = (f"speculation stops paying at concurrency {last[0]}: the closing K = 0 range turns it off there "
                    f"and, because vLLM applies the last range's K to every larger batch, at every batch above it")
        else:
            note = (f"speculation still pays at the largest concurrency measured ({levels[-1]}): vLLM applies the "
                    f"last range's K = {last[2]} to every larger batch too — unmeasured; sweep a higher concurrency "
                    f"to find where it stops")
        row.update(levels=levels, gammas=gammas, ranges=ranges, num_speculative_tokens=top_gamma, note=note)
        out.append(row)
    return out


def vllm_config_with_ranges(schedule: dict, base_config: dict | None) -> dict | None:
    """A vLLM speculative_config carrying the schedule (None when no level speculates)."""
    if schedule["num_speculative_tokens"] == 0 or not base_config:
        return None
    return {**base_config, "num_speculative_tokens": schedule["num_speculative_tokens"],
            "num_speculative_tokens_per_batch_size": schedule["ranges"]}


def schedule_base_config(schedule: dict) -> dict | None:
    """vLLM's speculative_config of the schedule's drafter at its largest K (`analysis.vllm_speculative`,
    the mapping the vLLM backends ran), models named as recorded; None when vLLM has no method for the
    drafter or the records name no model for a drafter that needs one."""
    params = json.loads(schedule.get("drafter_params") or "{}")
    drafter = schedule["drafter"]
    if drafter not in vllm_kinds() or (names_a_model(drafter) and draft_model_spec(drafter, params) is None):
        return None
    return vllm_speculative_config(drafter, params, max(int(schedule["num_speculative_tokens"]), 1))


def summary(records: pd.DataFrame) -> dict:
    """Everything `specbench recommend` prints about concurrency, as plain data."""
    table = speedups(records)
    latency = latency_table(records)
    latency_rows = latency.replace({np.nan: None}).to_dict("records") if not latency.empty else []
    if table.empty:
        return {"levels": [], "stops": [], "schedules": [], "latency": latency_rows}
    best = best_per_level(table)
    stops = [{**dict(zip(BASELINE_KEYS + ["backend"], k)), "stops_at": v} for k, v in stops_paying(best).items()]
    schedules = batch_size_schedules(table)
    for s in schedules:
        s["vllm_config"] = vllm_config_with_ranges(s, schedule_base_config(s))
    levels = best.replace({np.nan: None}).to_dict("records")
    return {"levels": levels, "stops": stops, "schedules": schedules, "latency": latency_rows}


def _same(a, b) -> bool:
    """Equal, with missing values (None, NaN) equal to each other."""
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
    return all(missing) or (not any(missing) and a == b)


def for_scenario(summary_data: dict, keys: dict) -> dict:
    """The part of `summary` that concerns one scenario (``keys``: a recommendation's scenario keys,
    e.g. target, temperature, workload): every row whose shared keys all match."""
    def matches(row: dict) -> bool:
        return all(_same(row[k], v) for k, v in keys.items() if k in row)

    return {part: [row for row in rows if matches(row)] for part, rows in summary_data.items()}

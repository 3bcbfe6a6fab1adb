"""The serving view: every figure of a (configuration, load) against the target-only run at the same load.

A *load* is how much traffic a serving engine carried while a unit ran: ``concurrency`` requests kept
in flight (closed loop), or a ``request_rate`` of arrivals per second (open loop, at most
``concurrency`` in flight). Speedups are always against the target-only baseline measured at the same
load, on the same prompts (paired by prompt, turn and repeat), by the same backend.

Per (scenario, backend, load, configuration) `serving_table` gives, with 95 % intervals:

* **per-request decode tokens/s** (what a user feels): Σ decode tokens ÷ Σ decode seconds of its
  requests; speedup and t-interval as everywhere (`specbench.analysis.statistics.speedup_interval`);
* **system output tokens/s** (what the operator pays for): Σ output tokens ÷ Σ wall time of the
  batches (a batch: one configuration, load and workload turn; its wall time runs from its first
  arrival to its last token — the records' ``batch_*`` columns). Its speedup is exact as a point
  estimate. Its interval: system tokens/s = c̄ · Σ tokens ÷ Σ latency, where c̄ = Σ latency ÷ Σ wall is
  the mean number of requests in flight (``in_flight``), so
  S_system = (c̄ ÷ c̄_base) · [Σ tokens ÷ Σ latency] ÷ [Σ tokens_base ÷ Σ latency_base]; the bracket
  is a paired ratio of sums over prompts and gets its t-interval, whose relative width the system
  speedup carries (c̄ held at its measured value: the spread of a batch's makespan from run to run
  is not observed by one batch);
* **TTFT, ITL and request latency** at p50 / p90 / p99 over requests
  (`specbench.records.summary.latency_percentiles`; request latency = arrival → last token), and for
  each the speedup baseline ÷ configuration (above 1: faster), with a paired prompt-bootstrap interval
  (`specbench.analysis.statistics.intervals.bootstrap_interval`, small-sample stretched; at a dozen prompts p99 is
  nearly the largest request, so its interval is wide).

Which units a row uses is rule 6 of the timing protocol for a paired comparison
(`specbench.records.timing.paired_timing`, the rule the verdicts use too): the (configuration,
baseline) pairs whose both units ran undisturbed at that load; where no pair did, every pair, and
``timing_disturbed`` says so. ``requests`` and ``prompts`` count the units used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.analysis.statistics.intervals import LEVEL, N_BOOT, bootstrap_interval, bootstrap_weights
from specbench.analysis.statistics.speedup_interval import speedup_interval
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.records.rounds import cluster_codes, prompt_clusters
from specbench.records.summary import BASELINE_KEYS, PERCENTILES, is_baseline
from specbench.records.timing import paired_timing

LOAD_KEYS = ["concurrency", "request_rate"]
CLOSED_LOOP = 0.0  # the request_rate of closed-loop records once normalised (null in the records)
LEVEL_KEYS = ["backend", *LOAD_KEYS]
CONFIG = ["drafter", "drafter_label", "drafter_params", "tree", "gamma"]
LATENCY_METRICS = {"ttft": "ttft_s", "itl": "itl_s", "latency": "latency_s"}  # name -> normalised column
AXES = {"concurrency": "requests in flight (concurrency)", "request_rate": "request rate (requests/s)"}


def normalised(records: pd.DataFrame) -> pd.DataFrame:
    """Live records with the load columns filled (backend 'own', concurrency 1, request_rate `CLOSED_LOOP`)
    and ``latency_s`` filled for records measured one request at a time (TTFT + decode time)."""
    frame = records[records["mode"] == "live"].copy()
    frame["backend"] = frame["backend"].fillna("own") if "backend" in frame else "own"
    frame["concurrency"] = frame["concurrency"].fillna(1).astype(int) if "concurrency" in frame else 1
    frame["request_rate"] = (
        frame["request_rate"].astype(float).fillna(CLOSED_LOOP) if "request_rate" in frame else CLOSED_LOOP
    )
    ttft = frame["ttft_s"] if "ttft_s" in frame else frame["prefill_s"]
    fallback = pd.to_numeric(ttft, errors="coerce") + pd.to_numeric(frame["decode_s"], errors="coerce")
    frame["latency_s"] = (
        pd.to_numeric(frame["latency_s"], errors="coerce").fillna(fallback) if "latency_s" in frame else fallback
    )
    for column in ("ttft_s", "itl_s", "batch_id", "batch_wall_s", "batch_output_tokens"):
        if column not in frame:
            frame[column] = np.nan
    return frame


def load_keys(records: pd.DataFrame) -> list[str]:
    """The load columns that tell the records' levels apart: request_rate when any unit has one,
    concurrency when it varies."""
    keys = []
    if "concurrency" in records and records["concurrency"].fillna(1).nunique() > 1:
        keys.append("concurrency")
    if "request_rate" in records and records["request_rate"].notna().any():
        keys.append("request_rate")
    return keys


def scenario_keys(records: pd.DataFrame) -> list[str]:
    """The recommender's scenario keys (`specbench.records.summary.BASELINE_KEYS`), plus the backend when it
    varies and the load keys that tell levels apart: one verdict per (workload, sampling, load)."""
    keys = list(BASELINE_KEYS)
    if "backend" in records and records["backend"].fillna("own").nunique() > 1:
        keys.append("backend")
    return keys + load_keys(records)


def has_load_axis(records: pd.DataFrame) -> bool:
    """Whether the records hold more than one load level."""
    if records.empty:
        return False
    frame = normalised(records)
    return len(frame[LOAD_KEYS].drop_duplicates()) > 1


def axis_of(frame: pd.DataFrame) -> str:
    """The load axis a (normalised) frame varies along: 'request_rate' when any unit has a rate, else
    'concurrency'."""
    return "request_rate" if "request_rate" in frame and (frame["request_rate"].fillna(0) > 0).any() else "concurrency"


def load_label(axis: str, value: float) -> str:
    """'4 in flight' or '2 req/s' (a closed-loop level on the rate axis: 'closed loop')."""
    if axis == "request_rate":
        return "closed loop" if value == CLOSED_LOOP else f"{value:g} req/s"
    return f"{int(value)} in flight"


# ----------------------------------------------------------------------------- percentiles with prompt weights


def weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs=PERCENTILES) -> np.ndarray:
    """[B, len(qs)] percentiles (numpy's linear rule) of ``values`` [n] repeated ``weights`` [B, n] times (a
    bootstrap replicate draws prompt k w_k times: its units count w_k times). NaN where a row weighs nothing."""
    order = np.argsort(values)
    v, w = values[order], np.asarray(weights, dtype=float)[:, order]
    cum = np.cumsum(w, axis=1)  # [B, n]
    total = cum[:, -1]
    out = np.full((w.shape[0], len(qs)), np.nan)
    for j, q in enumerate(qs):
        h = (total - 1) * q / 100.0  # position in the expanded sorted sample
        lo, hi = np.floor(h), np.ceil(h)
        idx_lo = np.minimum((cum <= lo[:, None]).sum(1), len(v) - 1)  # the element at expanded index lo
        idx_hi = np.minimum((cum <= hi[:, None]).sum(1), len(v) - 1)
        out[:, j] = np.where(total > 0, v[idx_lo] + (h - lo) * (v[idx_hi] - v[idx_lo]), np.nan)
    return out


def _percentile_speedups(
    paired: pd.DataFrame, weights: np.ndarray, codes: np.ndarray, level: float, n_clusters: int
) -> dict:
    """baseline ÷ configuration of each latency percentile, point and paired-bootstrap interval."""
    out = {}
    for name, column in LATENCY_METRICS.items():
        mine = pd.to_numeric(paired[column], errors="coerce").to_numpy(float)
        base = pd.to_numeric(paired[f"{column}_base"], errors="coerce").to_numpy(float)
        ok_mine, ok_base = np.isfinite(mine), np.isfinite(base)
        nan3 = np.full(len(PERCENTILES), np.nan)
        point_mine = np.percentile(mine[ok_mine], PERCENTILES) if ok_mine.any() else nan3
        point_base = np.percentile(base[ok_base], PERCENTILES) if ok_base.any() else nan3
        with np.errstate(divide="ignore", invalid="ignore"):
            point = point_base / point_mine
        lo = hi = nan3
        if len(weights) and ok_mine.any() and ok_base.any() and n_clusters >= 2:
            unit_w = weights[:, codes]  # [B, units]
            reps_mine = weighted_percentiles(mine[ok_mine], unit_w[:, ok_mine])
            reps_base = weighted_percentiles(base[ok_base], unit_w[:, ok_base])
            with np.errstate(divide="ignore", invalid="ignore"):
                lo, hi = bootstrap_interval(point, reps_base / reps_mine, n_clusters, level, positive=True)
        for i, p in enumerate(PERCENTILES):
            out[f"{name}_p{p}_speedup"] = float(point[i])
            out[f"{name}_p{p}_speedup_lo"] = float(lo[i])
            out[f"{name}_p{p}_speedup_hi"] = float(hi[i])
    return out


# ----------------------------------------------------------------------------- the table


def _percentiles(frame: pd.DataFrame, level: float, n_boot: int, rng: np.random.Generator) -> dict:
    """Each latency percentile over ``frame``'s requests (``{name}_p{p}_s``) with its prompt-bootstrap
    interval (``_lo_s``, ``_hi_s``; stretched for few prompts; none below two prompts)."""
    clusters = prompt_clusters(frame)
    codes = cluster_codes(frame, clusters)
    weights = bootstrap_weights(len(clusters), n_boot if len(clusters) >= 2 else 0, rng)
    out = {}
    for name, column in LATENCY_METRICS.items():
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
        ok = np.isfinite(values)
        points = np.percentile(values[ok], PERCENTILES) if ok.any() else np.full(len(PERCENTILES), np.nan)
        lo = hi = np.full(len(PERCENTILES), np.nan)
        if ok.any() and len(weights):
            reps = weighted_percentiles(values[ok], weights[:, codes[ok]])
            lo, hi = bootstrap_interval(points, reps, len(clusters), level, positive=True)
        for i, p in enumerate(PERCENTILES):
            out.update(
                {
                    f"{name}_p{p}_s": float(points[i]),
                    f"{name}_p{p}_lo_s": float(lo[i]),
                    f"{name}_p{p}_hi_s": float(hi[i]),
                }
            )
    return out


def system_rate(frame: pd.DataFrame) -> tuple[float, float]:
    """(system output tokens/s, mean requests in flight) over the distinct batches of ``frame``; NaN
    without batch columns (records measured one request at a time)."""
    batches = (
        frame.dropna(subset=["batch_id"])
        .groupby("batch_id")
        .agg(tokens=("batch_output_tokens", "first"), wall=("batch_wall_s", "first"))
    )
    wall = float(batches["wall"].sum()) if len(batches) else 0.0
    if not wall > 0:
        return float("nan"), float("nan")
    inside = frame[frame["batch_id"].isin(batches.index)]
    return float(batches["tokens"].sum()) / wall, float(inside["latency_s"].sum()) / wall


def _row(
    keys: dict, config: pd.DataFrame, base: pd.DataFrame, level: float, n_boot: int, rng: np.random.Generator
) -> dict:
    pairs = paired_timing(config, base)  # the one rule every panel reads a comparison by (records.timing)
    config = pairs.config
    tokens_per_s = (
        float(config["decode_tokens"].sum() / config["decode_s"].sum())
        if config["decode_s"].sum() > 0
        else float("nan")
    )
    system, in_flight = system_rate(config)
    row = {
        **keys,
        "requests": len(config),
        "prompts": int(config["prompt_id"].nunique()),
        "tokens_per_s": tokens_per_s,
        "system_tokens_per_s": system,
        "in_flight": in_flight,
        "timing_disturbed": pairs.disturbed,
        **_percentiles(config, level, n_boot, rng),
    }
    if keys["drafter"] == TARGET_ONLY:
        return row
    columns = list(dict.fromkeys(["decode_tokens", "decode_s", "new_tokens", *LATENCY_METRICS.values()]))
    paired = pd.concat([config, pairs.base[columns].add_suffix("_base")], axis=1)
    row["baseline_tokens_per_s"] = (
        float(paired["decode_tokens_base"].sum() / paired["decode_s_base"].sum())
        if len(paired) and paired["decode_s_base"].sum() > 0
        else float("nan")
    )
    base_system, base_in_flight = system_rate(pairs.base)
    row.update(baseline_system_tokens_per_s=base_system, baseline_in_flight=base_in_flight, paired=len(paired))
    if paired.empty:
        return row
    clusters = prompt_clusters(paired)
    codes = cluster_codes(paired, clusters)
    sums = np.zeros((len(clusters), 6))
    np.add.at(
        sums,
        codes,
        paired[
            ["decode_tokens", "decode_s", "decode_tokens_base", "decode_s_base", "new_tokens", "latency_s"]
        ].to_numpy(float),
    )
    base_lat = np.zeros(len(clusters))
    base_new = np.zeros(len(clusters))
    np.add.at(base_lat, codes, paired["latency_s_base"].to_numpy(float))
    np.add.at(base_new, codes, paired["new_tokens_base"].to_numpy(float))
    per_request = speedup_interval(sums[:, 0], sums[:, 1], sums[:, 2], sums[:, 3], level=level)
    row.update(speedup=per_request.point, speedup_lo=per_request.lo, speedup_hi=per_request.hi)
    by_latency = speedup_interval(sums[:, 4], sums[:, 5], base_new, base_lat, level=level)
    system_speedup = system / base_system if base_system > 0 else float("nan")
    scale = system_speedup / by_latency.point if by_latency.point > 0 else float("nan")
    row.update(
        system_speedup=system_speedup, system_speedup_lo=by_latency.lo * scale, system_speedup_hi=by_latency.hi * scale
    )
    weights = bootstrap_weights(len(clusters), n_boot if len(clusters) >= 2 else 0, rng)
    row.update(_percentile_speedups(paired, weights, codes, level, len(clusters)))
    return row


def serving_table(records: pd.DataFrame, *, level: float = LEVEL, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """One row per (scenario, backend, load, configuration), the baseline included (its speedups empty):
    see the module docstring for the columns. Empty without live records."""
    frame = normalised(records)
    if frame.empty:
        return pd.DataFrame()
    rows = []
    keys = BASELINE_KEYS + LEVEL_KEYS
    rng = np.random.default_rng(seed)
    for key, at_level in frame.groupby(keys, dropna=False, sort=True):
        base = at_level[is_baseline(at_level)]
        for config_key, config in at_level.groupby(CONFIG, dropna=False, sort=True):
            level_keys = {**dict(zip(keys, key)), **dict(zip(CONFIG, config_key))}
            if base.empty and level_keys["drafter"] != TARGET_ONLY:
                continue
            rows.append(_row(level_keys, config, base, level, n_boot, rng))
    return pd.DataFrame(rows)

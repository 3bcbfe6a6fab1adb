"""Aggregate records into one row per configuration, with speedups measured like for like.

A configuration is (target, drafter with its parameters, tree, γ, sampling) on a workload.
Its tokens/s is Σ decode tokens ÷ Σ decode time over its prompts; its speedup divides that by
the target-only baseline's tokens/s (γ = 0, same target, sampling and workload) computed over
exactly the same (prompt, turn, repeat) units, so both sides cover the same text.

Measured and replayed records (``mode`` 'live' / 'replay', docs/replay.md) of one
configuration are separate rows: a replayed row's tokens/s and speedup are the cost model's
predictions against the measured baseline, never measurements.

Latency percentiles (`latency_percentiles`): TTFT and inter-token latency at p50 / p90 / p99
over a configuration's requests, one record being one request (docs/results-schema.md,
"Derived numbers"). Replayed rows have none: their timings are modelled.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.catalogue.drafters import TARGET_ONLY
from specbench.records.timing import UNIT_KEYS, paired_timing  # noqa: F401  (UNIT_KEYS: read from here too)

CONFIG_KEYS = [
    "target",
    "drafter",
    "drafter_label",
    "tree",
    "tree_nodes",
    "gamma",
    "temperature",
    "top_p",
    "top_k",
    "mode",
    "schedule",
]
BASELINE_KEYS = ["target", "temperature", "top_p", "top_k", "workload"]
# configuration keys added after schema 1: a frame made before they existed (or by hand) lacks them
CONFIG_DEFAULTS = {"schedule": "fixed"}
PERCENTILES = (50, 90, 99)
LATENCIES = {"ttft": "ttft_s", "itl": "itl_s"}  # name in the derived columns -> record column
LATENCY_COLUMNS = [f"{name}_p{p}_s" for name in LATENCIES for p in PERCENTILES]


def is_baseline(frame: pd.DataFrame) -> pd.Series:
    return (frame["gamma"] == 0) & (frame["drafter"] == TARGET_ONLY)


def fixed_schedule(frame: pd.DataFrame) -> pd.Series:
    """Records whose every round drafted γ (schedule 'fixed'; null in records written before schedules)."""
    if "schedule" not in frame:
        return pd.Series(True, index=frame.index)
    return frame["schedule"].isna() | (frame["schedule"] == "fixed")


def prefer_live(records: pd.DataFrame) -> pd.DataFrame:
    """One record per configuration and unit: the live one where a unit was also replayed.

    Pooled statistics (acceptance fits) would otherwise count such a unit twice.
    """
    if records.empty or "mode" not in records or (records["mode"] == "live").all():
        return records
    keys = [k for k in CONFIG_KEYS if k != "mode"] + ["workload"] + UNIT_KEYS
    order = records.assign(_replay=(records["mode"] != "live")).sort_values("_replay", kind="stable")
    return order.drop_duplicates(keys, keep="first").drop(columns="_replay").sort_index()


def latency_percentiles(requests: pd.DataFrame) -> dict[str, float]:
    """``ttft_p50_s`` ... ``itl_p99_s``: percentiles of ``ttft_s`` and ``itl_s`` over ``requests``.

    One record is one request and counts once (every prompt, turn and repeat). ``itl_s`` is the
    request's own mean gap between tokens (decode time ÷ (new_tokens − 1)), so the ITL
    percentiles are over requests' mean ITL (what vLLM's benchmark calls TPOT), not over single
    token gaps, which the records do not keep. Null values (a request of one token has no ITL;
    records written before these columns) are left out; NaN where none is left. numpy's default
    (linear) interpolation.
    """
    out = {}
    for name, column in LATENCIES.items():
        if column in requests:
            values = pd.to_numeric(requests[column], errors="coerce").to_numpy(dtype=float)
            values = values[np.isfinite(values)]
        else:
            values = np.empty(0)
        points = np.percentile(values, PERCENTILES) if len(values) else [np.nan] * len(PERCENTILES)
        out.update({f"{name}_p{p}_s": float(v) for p, v in zip(PERCENTILES, points)})
    return out


def mean_acceptance_length(records: pd.DataFrame) -> float:
    """vLLM's "mean acceptance length": 1 + Σ accepted ÷ the rounds that carried a draft. specbench's τ divides
    the decode tokens by *every* target forward, the rounds without a draft (an n-gram miss) included, so the
    two differ whenever a round drafts nothing (docs/results-schema.md, "Two τ"). NaN without drafted rounds."""
    drafting = (
        sum(int(np.count_nonzero(np.asarray(r) > 0)) for r in records["round_drafted"])
        if "round_drafted" in records
        else 0
    )
    return 1.0 + float(records["accepted"].sum()) / drafting if drafting else float("nan")


def _ratio(num: float, den: float) -> float:
    return float(num) / float(den) if den else float("nan")


def with_config_defaults(records: pd.DataFrame) -> pd.DataFrame:
    """``records`` with every `CONFIG_DEFAULTS` key present and filled (a copy only when one was missing)."""
    filled = {
        k: (records[k].fillna(v) if k in records else v)
        for k, v in CONFIG_DEFAULTS.items()
        if k not in records or records[k].isna().any()
    }
    return records.assign(**filled) if filled else records


def configuration_table(records: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """One row per configuration × workload (× extra keys in ``by``, e.g. ['category']).

    Columns: the keys (``mode`` among them), n_prompts, alpha (Σ accepted / Σ drafted), tau (Σ tokens /
    Σ rounds), mean_acceptance_length (vLLM's: 1 + Σ accepted / drafted rounds), tokens_per_s, baseline_tokens_per_s, speedup, draft_share (draft time ÷ decode time),
    `LATENCY_COLUMNS` (TTFT and ITL percentiles over the row's requests; NaN for replayed rows). For
    replayed rows tokens_per_s and speedup come from modelled timings. The speedup reads the (configuration,
    baseline) pairs every comparison reads (`specbench.records.timing.paired_timing`: timed undisturbed on both
    sides, else all); the other columns describe every unit of the row.
    """
    if records.empty:
        return pd.DataFrame()
    records = with_config_defaults(records)
    keys = CONFIG_KEYS + ["workload"] + list(by or [])
    base = records[is_baseline(records)]
    rows = []
    for key, group in records.groupby(keys, dropna=False, sort=True):
        row = dict(zip(keys, key))
        decode_tokens, decode_s = group["decode_tokens"].sum(), group["decode_s"].sum()
        row.update(
            n_units=len(group),
            n_prompts=group["prompt_id"].nunique(),
            drafted=int(group["drafted"].sum()),
            accepted=int(group["accepted"].sum()),
            alpha=_ratio(group["accepted"].sum(), group["drafted"].sum()),
            tau=_ratio(decode_tokens, group["rounds"].sum()),
            mean_acceptance_length=mean_acceptance_length(group),
            tokens_per_s=_ratio(decode_tokens, decode_s),
            # NaN where a unit has no draft / verify time (a serving backend): never a share of 0
            draft_share=_ratio(group["draft_s"].sum(skipna=False), decode_s),
            verify_share=_ratio(group["verify_s"].sum(skipna=False), decode_s),
        )
        row.update(latency_percentiles(group) if row["mode"] == "live" else dict.fromkeys(LATENCY_COLUMNS, np.nan))
        match = base
        for k in BASELINE_KEYS + list(by or []):
            match = match[match[k] == row[k]]
        pairs = paired_timing(group, match)  # the pairs every comparison reads (rule 6 for a paired speedup)
        paired = pd.concat([pairs.config, pairs.base[["decode_tokens", "decode_s"]].add_suffix("_base")], axis=1)
        if len(paired):
            row["baseline_tokens_per_s"] = _ratio(paired["decode_tokens_base"].sum(), paired["decode_s_base"].sum())
            row["speedup"] = _ratio(
                _ratio(paired["decode_tokens"].sum(), paired["decode_s"].sum()), row["baseline_tokens_per_s"]
            )
            row["n_paired"] = len(paired)
        else:
            row["baseline_tokens_per_s"], row["speedup"], row["n_paired"] = np.nan, np.nan, 0
        rows.append(row)
    return pd.DataFrame(rows)


def lossless_check(records: pd.DataFrame) -> pd.DataFrame:
    """Per configuration × workload: fraction of greedy units whose output equals the baseline's.

    Greedy speculative decoding must reproduce target-only output token for token; sampled
    units are not comparable one by one and are left out, and so are replayed units (their
    output is the baseline's by construction) and units that generated nothing (two empty outputs
    are equal but show nothing about losslessness).
    """
    greedy = records[
        (records["temperature"] == 0)
        & (records["mode"] == "live")
        & (pd.to_numeric(records["new_tokens"], errors="coerce").fillna(0) > 0)
    ]
    base = greedy[is_baseline(greedy)][BASELINE_KEYS + UNIT_KEYS + ["output_sha1"]]
    paired = greedy[~is_baseline(greedy)].merge(base, on=BASELINE_KEYS + UNIT_KEYS, suffixes=("", "_base"))
    if paired.empty:
        return pd.DataFrame(columns=CONFIG_KEYS + ["workload", "identical"])
    paired["same"] = paired["output_sha1"] == paired["output_sha1_base"]
    return paired.groupby(CONFIG_KEYS + ["workload"], dropna=False)["same"].mean().rename("identical").reset_index()

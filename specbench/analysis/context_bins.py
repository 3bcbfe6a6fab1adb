"""Acceptance by context length: α̂ and τ per drafter configuration and context-length bin.

Records of long-context prompts carry their bin (``context_bin``: '1k', '2k', '4k', '7k') and
their encoded length (``prompt_tokens``). Per configuration (drafter, tree, γ, sampling) and bin:

* α̂ by maximum likelihood with its prompt-bootstrap interval, exactly as `specbench fit`
  computes it for a workload (`specbench.analysis.fit.fit_acceptance`, grouped by γ and bin);
* τ = Σ decode tokens ÷ Σ rounds with its interval (`specbench.analysis.fit.tau_intervals`);
* the mean prompt length in tokens, the x axis of the acceptance-vs-context figure.

A long-context workload named with a bin selection (``long-context:bin=4k``) is pooled with the
whole workload's records (``long-context``): the bin, not the name, says how long the context is.
The table exists only when the records span two or more bins.
"""

from __future__ import annotations

import pandas as pd

from specbench.analysis.fit import (
    ACCEPT_KEYS,
    fit_acceptance,
    fits_frame,
    tau_intervals,
)
from specbench.analysis.statistics.intervals import LEVEL, N_BOOT
from specbench.records.summary import is_baseline, prefer_live, with_config_defaults

BIN = "context_bin"
KEYS = ACCEPT_KEYS + ["gamma", BIN]
COLUMNS = KEYS + [
    "prompt_tokens",
    "n_prompts",
    "alpha",
    "alpha_lo",
    "alpha_hi",
    "ci_method",
    "alpha_observed",
    "tau",
    "tau_lo",
    "tau_hi",
]


def binned_records(records: pd.DataFrame) -> pd.DataFrame:
    """Records of long-context prompts (a bin set), their workload named without its ``:bin=…`` options."""
    if BIN not in records.columns:
        return records.iloc[0:0]
    binned = records[records[BIN].notna()]
    return binned.assign(workload=binned["workload"].astype(str).str.split(":").str[0])


def bin_order(records: pd.DataFrame) -> list[str]:
    """The bins of ``records``, shortest mean prompt first."""
    binned = binned_records(records)
    if binned.empty:
        return []
    return list(binned.groupby(BIN)["prompt_tokens"].mean().sort_values().index.astype(str))


def context_keys(records: pd.DataFrame) -> list[str]:
    """``[context_bin]`` when the records span two or more bins (the recommender then decides one scenario per
    (workload, sampling, bin): `specbench.analysis.context`), else none."""
    return [BIN] if len(bin_order(records)) >= 2 else []


def fit_by_context_bin(
    records: pd.DataFrame, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0
) -> pd.DataFrame:
    """One row per (configuration, bin) — columns `COLUMNS` — or an empty frame below two bins."""
    binned = with_config_defaults(binned_records(records))
    spec = prefer_live(binned[~is_baseline(binned) & (binned["gamma"] > 0)]) if len(binned) else binned
    order = bin_order(spec)
    if len(order) < 2:
        return pd.DataFrame(columns=COLUMNS)
    fits = fits_frame(fit_acceptance(spec, by=["gamma", BIN], n_boot=n_boot, level=level, seed=seed))
    taus = tau_intervals(spec, by=["workload", BIN], n_boot=n_boot, level=level, seed=seed)
    tokens = spec.groupby(KEYS, dropna=False)["prompt_tokens"].mean().rename("prompt_tokens").reset_index()
    table = fits.merge(taus[KEYS + ["tau", "tau_lo", "tau_hi"]].drop_duplicates(KEYS), on=KEYS, how="left").merge(
        tokens, on=KEYS, how="left"
    )
    table["_bin"] = table[BIN].astype(str).map({label: i for i, label in enumerate(order)})
    table = table.sort_values(["workload", "target", "drafter_label", "tree", "temperature", "gamma", "_bin"])
    return table[COLUMNS].reset_index(drop=True)

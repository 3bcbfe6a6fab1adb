"""Everything `specbench recommend` says about context length, per workload scenario, as plain data: the verdicts
per bin, the crossover length and the length-aware setting (`specbench.analysis.context.verdicts`,
`specbench.analysis.context.setting`)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from specbench.analysis.context.setting import length_setting
from specbench.analysis.context.verdicts import (
    as_plain,
    bin_verdicts,
    length_crossover,
    scenario_of,
    speedups,
)
from specbench.analysis.context_bins import BIN, bin_order, fit_by_context_bin
from specbench.analysis.statistics.intervals import N_BOOT
from specbench.records.summary import BASELINE_KEYS


def has_context_axis(records) -> bool:
    """Whether the records span two or more context-length bins."""
    return len(bin_order(records)) >= 2


def context_summary(
    records,
    by_bin: list,
    pooled: list,
    *,
    engines: Sequence[str] | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> list[dict]:
    """One entry per workload scenario whose records span two or more bins. ``by_bin``: the recommendations per
    (workload, sampling, bin) (``recommend(..., by_context=True)``); ``pooled``: the same over the bins pooled
    (the engines' nearest setting: the γ for the sweep's mix of lengths)."""
    verdicts = bin_verdicts(records, by_bin, fit_by_context_bin(records, n_boot=n_boot, seed=seed))
    mixes = {scenario_of(r.keys): r.decision for r in pooled if not isinstance(r.keys.get(BIN), str)}
    grouped: dict[tuple, list] = {}
    for v in verdicts:
        grouped.setdefault(v.scenario, []).append(v)
    out = []
    for scenario, rows in grouped.items():
        if len(rows) < 2:
            continue
        line = length_crossover(rows)
        out.append(
            {
                **dict(zip(BASELINE_KEYS, scenario)),
                "bins": [v.as_dict() for v in rows],
                "speedups": speedups(rows),
                "crossover": as_plain(line),
                "setting": length_setting(rows, mixes.get(scenario), engines),
            }
        )
    return json.loads(json.dumps(out, default=str))  # plain data: answers as their words, NaN kept


def context_for(summary: list[dict], keys: dict) -> dict | None:
    """The entry of ``summary`` for a recommendation's scenario (its workload named without options), or None."""
    workload = str(keys.get("workload")).split(":")[0]
    for entry in summary:
        if entry["workload"] == workload and all(
            str(entry[k]) == str(keys.get(k)) for k in BASELINE_KEYS if k != "workload"
        ):
            return entry
    return None

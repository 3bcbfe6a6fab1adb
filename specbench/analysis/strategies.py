"""Nested speculation against sequential drafting, configuration by configuration (docs/strategies.md).

For every (target, sampling, workload, drafter, tree, γ) measured both ways — sequentially and with
nested speculation — one row per strategy:

* tokens/s = Σ decode tokens ÷ Σ decode time over the configuration's units (live records only),
  and ``vs_sequential`` its ratio to the sequential row's over the same units;
* hit rate = Σ prepared_hits ÷ Σ (rounds − 1): the share of rounds, after each generation's first
  (which has nothing prepared), that verified a draft prepared during the previous verification;
* draft hidden = Σ draft_hidden_s ÷ Σ decode_s: the share of decode time spent drafting drafts
  that were then used, concurrently with the target (the latency nesting took off the critical path);
* draft share = Σ draft_s ÷ Σ decode_s: drafting still on the critical path.
"""

from __future__ import annotations

import pandas as pd

from specbench.records.summary import BASELINE_KEYS, UNIT_KEYS

KEYS = BASELINE_KEYS + ["drafter", "drafter_params", "tree", "gamma"]
COLUMNS = KEYS + [
    "drafter_label",
    "strategy",
    "prepared",
    "units",
    "tokens_per_s",
    "vs_sequential",
    "hit_rate",
    "draft_hidden_share",
    "draft_share",
]


def strategy_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per strategy of every configuration that has a nested run (empty frame when none)."""
    if records.empty or "strategy" not in records or not (records["strategy"] == "nested").any():
        return pd.DataFrame(columns=COLUMNS)
    live = records[
        (records["mode"] == "live") & (records["gamma"] > 0) & records["strategy"].isin(["sequential", "nested"])
    ].copy()  # online: docs/strategies.md
    live["prepared"] = live["prepared"].fillna(0).astype(int)
    nested_keys = live.loc[live["strategy"] == "nested", KEYS].drop_duplicates()
    live = live.merge(nested_keys, on=KEYS)  # configurations measured nested (and their sequential twins)
    sequential = live[live["strategy"] != "nested"]
    rows = []
    for (keys, strategy, prepared), part in _groups(live):
        twin = sequential.merge(part[KEYS + UNIT_KEYS], on=KEYS + UNIT_KEYS)
        same = part.merge(twin[KEYS + UNIT_KEYS], on=KEYS + UNIT_KEYS)
        tps = part["decode_tokens"].sum() / part["decode_s"].sum()
        ratio = float("nan")
        if len(twin) and strategy == "nested":
            ratio = (same["decode_tokens"].sum() / same["decode_s"].sum()) / (
                twin["decode_tokens"].sum() / twin["decode_s"].sum()
            )
        later_rounds = (part["rounds"] - 1).clip(lower=0).sum()
        nested = strategy == "nested"
        rows.append(
            {
                **keys,
                "drafter_label": part["drafter_label"].iloc[0],
                "strategy": strategy,
                "prepared": prepared,
                "units": len(part),
                "tokens_per_s": tps,
                "vs_sequential": ratio,
                "hit_rate": part["prepared_hits"].sum() / later_rounds if nested and later_rounds else float("nan"),
                "draft_hidden_share": part["draft_hidden_s"].sum() / part["decode_s"].sum() if nested else float("nan"),
                "draft_share": part["draft_s"].sum() / part["decode_s"].sum(),
            }
        )
    table = pd.DataFrame(rows, columns=COLUMNS)
    order = table.assign(_nested=table["strategy"] == "nested").sort_values(KEYS + ["_nested", "prepared"])
    return order.drop(columns="_nested").reset_index(drop=True)


def _groups(frame: pd.DataFrame):
    """((configuration keys as a dict), strategy, P), rows of each strategy of each configuration."""
    for values, part in frame.groupby(KEYS + ["strategy", "prepared"], dropna=False, sort=True):
        *config, strategy, prepared = values
        yield (dict(zip(KEYS, config)), str(strategy), int(prepared)), part

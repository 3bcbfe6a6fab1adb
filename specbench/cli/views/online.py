"""Online adaptation over a stream as Rich tables: windows of the stream, recovery after each shift, the verdict
(the numbers: `specbench.analysis.stream_adaptation`)."""

from __future__ import annotations

import math

import pandas as pd
from rich.table import Table
from rich.text import Text

from specbench.analysis.stream_adaptation import WINDOW, is_confident, per_prompt, recovery_table, window_table
from specbench.cli.views.render import fmt, plain


def online_frames(records: pd.DataFrame, window: int = WINDOW) -> dict[str, pd.DataFrame]:
    """`fit`'s online tables: ``online_windows`` and ``online_recovery`` (empty frames without online records)."""
    prompts = per_prompt(records)
    if prompts.empty:
        return {"online_windows": pd.DataFrame(), "online_recovery": pd.DataFrame()}
    return {"online_windows": window_table(prompts, window), "online_recovery": recovery_table(prompts, window)}


def _interval(point, lo, hi, digits: int = 2, suffix: str = "") -> str:
    if point is None or point != point:
        return "-"
    if lo != lo or hi != hi:
        return f"{point:.{digits}f}{suffix}"
    return f"{point:.{digits}f}{suffix} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _row(table: Table, *cells) -> None:
    table.add_row(*(Text(str(c)) for c in cells))


def print_online(frames: dict[str, pd.DataFrame], console, window: int = WINDOW) -> None:
    """The windows table and the recovery table; nothing without online records."""
    windows, recovery = frames["online_windows"], frames["online_recovery"]
    if windows.empty:
        return
    many = windows["workload"].nunique() > 1
    lead = ["workload"] if many else []
    _print_table(
        console,
        f"Online adaptation over the stream: windows of {window} prompts (cut at shift points)",
        "α, τ: ratios of sums over the window's prompts, t-interval over prompts; speedup: over the target alone "
        "without / with the training seconds (training elsewhere / on this machine); versions: the drafter's "
        "versions the window ran",
        lead
        + ["configuration", "prompts", "segment", "versions", "α [95% CI]", "τ [95% CI]", "speedup [95% CI]"]
        + ["with training", "train s"],
        [
            [
                *([r["workload"]] if many else []),
                r["drafter_label"],
                f"{r['first']}–{r['last']}",
                r["stream_segment"],
                r["versions"],
                _interval(r["alpha"], r["alpha_lo"], r["alpha_hi"], 3),
                _interval(r["tau"], r["tau_lo"], r["tau_hi"]),
                _interval(r["speedup"], r["speedup_lo"], r["speedup_hi"], suffix="×"),
                _interval(
                    r["speedup_with_training"], r["speedup_with_training_lo"], r["speedup_with_training_hi"], suffix="×"
                ),
                fmt(r["train_s"], 1),
            ]
            for _, r in windows.iterrows()
        ],
    )
    if recovery.empty:
        return
    _print_table(
        console,
        "Recovery after each shift point",
        f"α before: the last {window} prompts before the shift; first / end: the first and the last {window} "
        "prompts of the new segment; recover: prompts until the windowed α reaches 90 % of its end level (tokens, "
        "seconds of decoding and training); beats static: prompts until an online drafter's windowed α exceeds "
        "the static one's",
        lead
        + ["configuration", "shift at", "to", "α before", "α first", "α end", "recover: prompts", "tokens", "s"]
        + ["beats static at"],
        [
            [
                *([r["workload"]] if many else []),
                r["drafter_label"],
                r["shift_at"],
                r["segment"],
                fmt(r["alpha_before"]),
                fmt(r["alpha_first"]),
                fmt(r["alpha_end"]),
                _count(r["recover_prompts"]),
                _count(r["recover_tokens"]),
                fmt(r["recover_s"], 1),
                "-" if r["strategy"] != "online" else _count(r["beats_static_at"], "never"),
            ]
            for _, r in recovery.iterrows()
        ],
    )


def _print_table(console, title: str, caption: str, columns: list[str], rows: list[list]) -> None:
    table = Table(title=plain(title), caption=plain(caption))  # data and labels printed as written
    for column in columns:
        table.add_column(plain(column), overflow="fold")
    for cells in rows:
        _row(table, *cells)
    console.print(table)


def _count(value, missing: str = "-") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return str(int(value))


def print_online_verdict(verdict: dict, console) -> None:
    """`recommend`'s lines: does online adaptation pay, without and with its training cost, and the τ ratio."""
    for line in verdict["deployments"]:
        console.print(Text(line["text"], style="bold" if is_confident(line) else ""))
    for tau in verdict["tau_ratio"]:
        console.print(
            Text(
                f"τ of {tau['configuration']} ÷ τ of {tau['static']} (timing-free): "
                f"{_interval(tau['ratio'], tau['lo'], tau['hi'], suffix='×')} over {tau['n_prompts']} "
                "prompts",
                style="dim",
            )
        )

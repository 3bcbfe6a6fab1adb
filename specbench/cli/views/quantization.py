"""What `specbench recommend` prints about the draft model's GGUF types (`specbench.analysis.recommendation.
quantization`): α, τ, tokens/s and the verdict per (target type, drafter type), and the drops the detector found."""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from specbench.analysis.recommendation.quantization import Quantization
from specbench.catalogue import gguf_types
from specbench.cli.fit_cmd import text_row
from specbench.cli.views.render import plain


def _number(value, digits: str) -> str:
    return "-" if value is None or value != value else f"{value:{digits}}"


def quantization_table(table) -> Table:
    """One row per drafter type: target type, drafter type, γ, α, τ, tokens/s, speedup [95% CI], verdict."""
    out = Table(
        title="Quantization: per (target type, drafter type)",
        caption="α: accepted ÷ drafted draft tokens; τ: tokens per target forward; speedup: tokens/s ÷ the "
        "target alone on the same prompts, 95% interval (unadjusted); verdict: pays when the interval is above 1",
    )
    for column in ("workload", "target", "drafter", "γ", "α", "τ", "tok/s", "speedup [95% CI]", "verdict"):
        out.add_column(column, overflow="fold")
    for row in table.to_dict("records"):
        speedup = _number(row["speedup"], ".2f")
        if speedup != "-":
            speedup += "×" + (f" [{row['lo']:.2f}, {row['hi']:.2f}]" if row["lo"] == row["lo"] else " (no interval)")
        text_row(
            out,
            str(row["workload"]),
            gguf_types.split(str(row["target"]))[1] or "as shipped",
            f"{row['family']} at {row['quant']}",
            str(int(row["gamma"])),
            _number(row["alpha"], ".3f"),
            _number(row["tau"], ".2f"),
            _number(row["tokens_per_s"], ".1f"),
            speedup,
            row["verdict"] or "-",
        )
    return out


def print_quantization(views: list[Quantization | None], console) -> None:
    """One table of every recommendation's (target type, drafter type) pairs — a sweep over several target types
    has one recommendation per type — then one line per drop (or the line that none was confident); nothing
    without a view."""
    present = [v for v in views if v is not None]
    if not present:
        return
    table = pd.concat([v.table for v in present], ignore_index=True)
    found = [drop for v in present for drop in v.drops]
    console.print(quantization_table(table))
    for drop in found:
        console.print(plain(f"drop: {drop.words()}", style="bold red"))
    if not found and table["quant"].nunique() > 1:
        console.print(plain("drop: no drafter type accepts confidently fewer tokens than another (intervals hold 1)"))

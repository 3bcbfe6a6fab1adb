"""What `specbench recommend` prints about context length (`specbench.analysis.context`): per workload, the verdict
in every bin with α̂, τ and the cost per round, the crossover length, and the length-aware setting with one line
per engine."""

from __future__ import annotations

from rich.table import Table

from specbench.cli.fit_cmd import text_row
from specbench.cli.views.render import estimate, fmt, ms, plain


def _named(row: dict) -> str:
    named = row.get("named")
    if not named:
        return "-"
    tree = "" if named["tree"] == "chain" else f" tree {named['tree']}"
    return f"{named['drafter_label']}{tree} γ={named['gamma']}"


def context_table(entry: dict) -> Table:
    """One workload's bins, shortest first."""
    table = Table(
        title=f"{entry['workload']} · T={fmt(entry['temperature'], 2)} · verdict per context-length bin",
        caption="verdict: the recommender's in each bin (adjusted for the looks and the best of K); α̂, τ: of "
        "the configuration it names, 95% prompt-bootstrap intervals; ms/round: Σ decode time ÷ Σ rounds of "
        "that configuration in the bin, measured (the sweep's own timings), beside the target alone",
    )
    for c in ("bin", "prompt tokens", "verdict", "configuration", "α̂", "τ", "ms/round (target)"):
        table.add_column(c, overflow="fold")
    for row in entry["bins"]:
        text_row(
            table,
            row["context_bin"],
            f"{row['prompt_tokens']:,.0f} ({row['shortest']:,}–{row['longest']:,})",
            row["short"],
            _named(row),
            estimate(row.get("alpha"), row.get("alpha_lo"), row.get("alpha_hi"), 2),
            estimate(row.get("tau"), row.get("tau_lo"), row.get("tau_hi"), 2),
            f"{ms(row.get('round_s'))} ({ms(row.get('baseline_round_s'))}) {row.get('cost_source', '')}",
        )
    return table


def context_lines(entry: dict) -> list[str]:
    """The crossover length, the shorter γ beyond it, the setting's ranges, one line per engine, and notes."""
    lines = []
    line = entry.get("crossover")
    if line is None:
        lines.append("crossover length: no configuration named at the shortest bin was measured in two bins")
    else:
        lines.append(f"crossover length ({line['why']}): {line['text']}")
        shorter = line.get("shorter")
        if shorter is not None:
            lines.append(f"beyond it: {shorter['text']}")
        elif line.get("none_beyond") is not None:
            lines.append("beyond it: no shorter γ of this drafter pays longer")
        if line.get("none_beyond") is not None:
            lines.append(f"no speculation is better beyond about {line['none_beyond']:,.0f} prompt tokens")
    setting = entry["setting"]
    if setting["ranges"]:
        ranges = "; ".join(
            f"{r[0]:,}–{r[1]:,} tokens: γ={r[2]}" if r[1] is not None else f"{r[0]:,} tokens and over: γ={r[2]}"
            for r in setting["ranges"]
        )
        lines.append(f"length-aware setting ({setting['drafter_label']}): {ranges}")
    lines.extend(setting["lines"])
    lines.extend(f"note: {n}" for n in setting.get("notes", []))
    return lines


def print_context(summary: list[dict], console) -> None:
    """Every workload scenario's context-length section."""
    for entry in summary:
        console.print(context_table(entry))
        for line in context_lines(entry):
            console.print(plain(line))

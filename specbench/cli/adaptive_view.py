"""An adaptive sweep's stopping history as a Rich table (the words: `specbench.analysis.stopping_report`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from specbench.analysis.stopping_report import best_label, duration, interval_text


def history_table(history: dict) -> Table:
    """Look by look: prompts (and calibration prompts), the answer, the best option and its adjusted interval."""
    table = Table(
        title="adaptive sweep: stopping history",
        caption=f"intervals adjusted for the planned looks and for picking the best configuration "
        f"(docs/fit.md); wall time {duration(float(history.get('elapsed_s') or 0))}",
    )
    for col in ("workload", "look", "prompts", "timed", "answer", "best", "speedup [adjusted]", "dropped"):
        table.add_column(col, overflow="fold")
    for name, entry in history.get("workloads", {}).items():
        for look in entry.get("looks") or []:
            timed = look.get("calibration_prompts")
            table.add_row(
                Text(name),
                str(look["look"]),
                str(look["prompts"]),
                "-" if timed is None else str(timed),
                Text(str(look.get("answer"))),
                Text(best_label(look.get("best"))),
                interval_text(look.get("best"), look.get("answer", "")),
                Text(", ".join(look.get("dropped") or []) or "-"),
            )
    return table

"""An adaptive sweep's stopping history as a Rich table (the words: `specbench.analysis.stopping_report`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from specbench.analysis.stopping_history import History
from specbench.analysis.stopping_report import duration


def history_table(history: History) -> Table:
    """Look by look: prompts (and calibration prompts), the answer, the best option and its adjusted interval."""
    table = Table(
        title="adaptive sweep: stopping history",
        caption=f"intervals adjusted for the planned looks and for picking the best configuration "
        f"(docs/fit.md); wall time {duration(history.elapsed_s)}",
    )
    for col in ("workload", "look", "prompts", "timed", "answer", "best", "speedup [adjusted]", "dropped"):
        table.add_column(col, overflow="fold")
    for name, entry in history.workloads.items():
        for look in entry.looks:
            timed = look.calibration_prompts
            table.add_row(
                Text(name),
                str(look.look),
                str(look.prompts),
                "-" if timed is None else str(timed),
                Text(str(look.answer)),
                Text(look.best_label()),
                look.best_interval_text(),
                Text(", ".join(look.dropped) or "-"),
            )
    return table

"""An adaptive sweep's stopping history as a Rich table (the words: `specbench.analysis.verdicts.stopping_report`)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from specbench.analysis.verdicts.stopping_history import History
from specbench.analysis.verdicts.stopping_report import duration, look_rows


def history_table(history: History) -> Table:
    """Look by look (and load by load, where a look judged several): prompts (and calibration prompts), the
    answer, the best option and its adjusted interval (`specbench.analysis.verdicts.stopping_report.look_rows`)."""
    table = Table(
        title="adaptive sweep: stopping history",
        caption=f"intervals adjusted for the planned looks and for picking the best configuration "
        f"(docs/fit.md); wall time {duration(history.elapsed_s)}",
    )
    for col in ("workload", "look", "prompts", "timed", "answer", "best", "speedup [adjusted]", "dropped"):
        table.add_column(col, overflow="fold")
    for row in look_rows(history):
        table.add_row(
            Text(row["workload"]),
            str(row["look"]),
            str(row["prompts"]),
            "-" if row["timed"] is None else str(row["timed"]),
            Text(row["said"]),
            Text(row["best"]),
            row["interval"],
            Text(row["dropped"]),
        )
    return table

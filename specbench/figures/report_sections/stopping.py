"""The report's stopping history: an adaptive sweep's looks, per workload, and why it stopped."""

from __future__ import annotations

from specbench.analysis.verdicts.stopping_report import look_rows, summary_lines
from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, bullet_list, esc, paragraph, section, table


def stopping_section(data: PlotData) -> Html:
    """An adaptive sweep's looks per workload (and load): prompts, answer, best option and its adjusted interval
    (`specbench.analysis.verdicts.stopping_report.look_rows`, the rows the text table prints)."""
    if not data.history:
        return section(
            "stopping",
            "Stopping history",
            paragraph(
                "A fixed grid: every prompt was measured, then judged once. A verdict picks the best "
                "of the configurations, so its interval is adjusted for that choice (docs/fit.md, "
                "'Sweeps that decide'); `specbench sweep --until-decided` measures until each "
                "workload is decided instead."
            ),
        )
    rows = [
        [
            r["workload"],
            r["look"],
            r["prompts"],
            "none" if r["timed"] is None else r["timed"],
            r["said"],
            r["best"],
            r["interval"],
            r["dropped"],
        ]
        for r in look_rows(data.history)
    ]
    outcome = bullet_list([esc(line) for line in summary_lines(data.history)], cls="")
    return section(
        "stopping",
        "Adaptive sweep: stopping history",
        paragraph(
            "Each workload was measured look by look until its verdict was confident; intervals "
            "are adjusted for the planned looks and for picking the best configuration "
            "(docs/fit.md, 'Sweeps that decide')."
        ),
        outcome,
        table(
            [
                "workload",
                "look",
                "prompts",
                "timed prompts",
                "answer",
                "best",
                "speedup [adjusted]",
                "dropped from timing",
            ],
            rows,
            numeric={1, 2, 3},
        ),
    )

"""The report's lossless check: the share of greedy outputs identical to the target alone's."""

from __future__ import annotations

from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, paragraph, row_series, section, table


def lossless_section(data: PlotData) -> Html:
    if data.lossless.empty:
        return section(
            "lossless",
            "Lossless check",
            paragraph("No greedy speculative units paired with the baseline: nothing to compare."),
        )
    rows = [[r["workload"], row_series(r), r["gamma"], f"{r['identical']:.0%}"] for _, r in data.lossless.iterrows()]
    return section(
        "lossless",
        "Lossless check",
        paragraph(
            "Greedy speculative decoding must reproduce the target-only output token for token: "
            "share of units whose output equals the baseline's.",
            "note",
        ),
        table(["workload", "drafter", "γ", "identical to baseline"], rows, {2, 3}),
    )

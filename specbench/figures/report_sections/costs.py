"""The report's costs: the measured round costs of each configuration (draft, verify, overhead)."""

from __future__ import annotations

import pandas as pd

from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, num, paragraph, row_series, section, table


def costs_section(data: PlotData) -> Html:
    fitted = data.costs[data.costs["verify_a_s"].notna()] if "verify_a_s" in data.costs else pd.DataFrame()
    if fitted.empty:
        return section(
            "costs", "Costs", paragraph("No cost model: costs need live timings and a target-only baseline.")
        )
    rows = [
        [
            r["workload"],
            row_series(r),
            f"{1e3 * r['verify_a_s']:.2f} + {1e3 * r['verify_b_s']:.3f}·k"
            + (f" (+ knee at {r['verify_knee']:.0f})" if r["verify_model"] == "knee" else ""),
            num(1e3 * r["target_step_s"], 2),
            num(1e3 * r["draft_step_s"], 2),
            num(r["c"]),
            num(1e3 * r["overhead_s"], 2),
            num(r["propose_rate"], 2),
            r["cost_notes"] or "",
        ]
        for _, r in fitted.iterrows()
    ]
    return section(
        "costs",
        "Costs (measured, batch 1)",
        paragraph(
            "t(k): target forward over k = drafted + 1 tokens, in ms; c = draft step ÷ target "
            "step; ρ = share of rounds that drafted at all.",
            "note",
        ),
        table(
            [
                "workload",
                "drafter",
                "verify t(k) [ms]",
                "target step [ms]",
                "draft step [ms]",
                "c",
                "overhead per round [ms]",
                "ρ",
                "notes",
            ],
            rows,
            {3, 4, 5, 6, 7},
        ),
    )

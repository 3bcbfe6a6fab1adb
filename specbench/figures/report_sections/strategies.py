"""The report's strategy tables: nested speculation and verify-length schedules against the plain chain, and online
adaptation over a stream (per window, per prompt, recovery after a shift).
"""

from __future__ import annotations

from specbench.analysis.strategies import strategy_table
from specbench.analysis.stream_adaptation import WINDOW, per_prompt, recovery_table, window_table
from specbench.figures.plot_data import PlotData, series_name
from specbench.figures.report import Html, interval, num, paragraph, section, table


def strategies_section(data: PlotData) -> Html:
    """Nested speculation vs sequential per configuration; nothing when no unit ran nested."""
    rows = [
        [
            r["workload"],
            series_name(r["drafter_label"], r["tree"]),
            r["gamma"],
            r["units"],
            num(r["tokens_per_s"], 2),
            num(r["vs_sequential"], 3, "×"),
            num(r["hit_rate"], 3),
            num(r["draft_hidden_share"], 3),
            num(r["draft_share"], 3),
        ]
        for _, r in strategy_table(data.records).iterrows()
    ]
    if not rows:
        return Html("")
    return section(
        "strategies",
        "Nested speculation vs sequential",
        paragraph(
            "Hit rate: rounds (after each generation's first) that verified a draft prepared during "
            "the previous verification. Draft hidden / on path: drafting time that ran during "
            "verification and was used, and drafting still on the critical path, as shares of "
            "decode time. × sequential: tokens/s over the sequential run's on the same units.",
            "note",
        ),
        table(
            [
                "workload",
                "drafter",
                "γ",
                "units",
                "tokens/s",
                "× sequential",
                "hit rate",
                "draft hidden",
                "draft on path",
            ],
            rows,
            {2, 3, 4, 5, 6, 7, 8},
        ),
    )


def online_section(data: PlotData) -> Html:
    """Online adaptation over a stream: windows, recovery after each shift, and the verdicts; nothing without
    online units."""
    prompts = per_prompt(data.records)
    if prompts.empty:
        return Html("")
    windows = window_table(prompts)
    rows = [
        [
            r["workload"],
            r["drafter_label"],
            f"{r['first']}–{r['last']}",
            r["stream_segment"],
            r["versions"],
            interval(r["alpha"], r["alpha_lo"], r["alpha_hi"]),
            interval(r["tau"], r["tau_lo"], r["tau_hi"], 2),
            interval(r["speedup"], r["speedup_lo"], r["speedup_hi"], 2, "×"),
            interval(r["speedup_with_training"], r["speedup_with_training_lo"], r["speedup_with_training_hi"], 2, "×"),
        ]
        for _, r in windows.iterrows()
    ]
    recovery = recovery_table(prompts)
    shifts = [
        [
            r["workload"],
            r["drafter_label"],
            r["shift_at"],
            r["segment"],
            num(r["alpha_before"]),
            num(r["alpha_first"]),
            num(r["alpha_end"]),
            num(r["recover_prompts"], 0),
            num(r["beats_static_at"], 0) if r["strategy"] == "online" else "–",
        ]
        for _, r in recovery.iterrows()
    ]
    verdicts = [
        paragraph(line["text"])
        for rec in data.recommendations
        if getattr(rec, "online", None)
        for line in rec.online["deployments"]
    ]
    return section(
        "online",
        "Online adaptation over the stream",
        *verdicts,
        paragraph(
            f"Windows of {WINDOW} prompts, cut at shift points; α and τ are ratios of sums with a "
            "t-interval over the window's prompts; speedups over the target alone, without and with "
            "the training seconds (docs/strategies.md).",
            "note",
        ),
        table(
            [
                "workload",
                "configuration",
                "prompts",
                "segment",
                "versions",
                "α [95% CI]",
                "τ [95% CI]",
                "speedup",
                "with training",
            ],
            rows,
            {5, 6, 7, 8},
        ),
        Html("<h3>Recovery after each shift point</h3>"),
        paragraph(
            "Recover: prompts from the shift until the windowed α reaches 90 % of the level the "
            "configuration ends the segment at; beats static: until an online drafter's windowed α "
            "exceeds the static drafter's.",
            "note",
        ),
        table(
            [
                "workload",
                "configuration",
                "shift at",
                "to",
                "α before",
                "α first",
                "α end",
                "recover (prompts)",
                "beats static at",
            ],
            shifts,
            {2, 4, 5, 6, 7, 8},
        ),
    )

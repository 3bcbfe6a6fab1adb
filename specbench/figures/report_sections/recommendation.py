"""The report's recommendation: per scenario, the one configuration to deploy with its speedup interval, or the
verdict's words when there is none.
"""

from __future__ import annotations

from specbench.analysis.recommendation.result import recommendation_lines
from specbench.analysis.verdicts.decision import gamma_span
from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, bullet_list, esc, interval, num, paragraph, scenario_name, section, table


def recommendation_section(data: PlotData) -> Html:
    """One row per scenario: the one configuration to deploy (or the verdict's words when there is none), its
    adjusted interval and the γ within it; then each scenario's recommendation and verdict in words."""
    if not data.recommendations:
        return section(
            "recommendation", "Recommendation", paragraph("No recommendation could be made."), bullet_list(data.notes)
        )
    rows = []
    for rec in data.recommendations:
        k, choice = rec.keys, rec.final
        flat = rec.flat_range
        rows.append(
            [
                scenario_name(k),
                k["target"],
                num(k["temperature"], 2),
                Html(f'<span class="verdict-{"yes" if choice else "no"}">{esc(rec.headline())}</span>'),
                interval(choice.speedup, choice.lo, choice.hi, 2, "×") if choice else "none recommended",
                gamma_span(flat["gammas"]) if flat else "none recommended",
                num(rec.baseline_tokens_per_s, 1),
                rec.n_prompts,
            ]
        )
    headers = [
        "workload",
        "target",
        "T",
        "verdict",
        "speedup [adjusted 95% CI]",
        "γ within the interval",
        "baseline tokens/s",
        "prompts",
    ]
    verdicts = [
        f"{scenario_name(rec.keys)}: " + "; ".join(recommendation_lines(rec)) + f" — {rec.verdict}"
        for rec in data.recommendations
    ]
    verdicts += [
        f"{rec.keys['workload']}: {rec.schedules['text']}"
        for rec in data.recommendations
        if getattr(rec, "schedules", None) is not None
    ]
    notes = sorted({n for rec in data.recommendations for n in rec.notes} | set(data.notes))
    return section(
        "recommendation",
        "Recommendation",
        table(headers, rows, {2, 4, 6, 7}),
        bullet_list(verdicts, ""),
        Html("<h3>Notes</h3>") + bullet_list(notes) if notes else "",
    )

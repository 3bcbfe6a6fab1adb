"""The report's recommendation: per scenario, the one configuration to deploy with its speedup interval, or the
verdict's words when there is none; where the draft model ran at several GGUF types, the quantization table (α, τ,
tokens/s, speedup and verdict per type) and the drops the detector found
(`specbench.analysis.recommendation.quantization`).
"""

from __future__ import annotations

from specbench.analysis.recommendation.quantization import for_recommendation
from specbench.analysis.recommendation.result import recommendation_lines
from specbench.analysis.verdicts.decision import gamma_span
from specbench.catalogue import gguf_types
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
        _quantization(data),
        Html("<h3>Notes</h3>") + bullet_list(notes) if notes else "",
    )


def _quantization(data: PlotData) -> Html:
    """Per (target type, drafter type): α, τ, tokens/s, speedup and verdict; then the drops, in words."""
    rows, found = [], []
    for rec in data.recommendations:
        view = for_recommendation(data.records, rec)
        if view is None:
            continue
        for r in view.table.to_dict("records"):
            rows.append(
                [
                    r["workload"],
                    gguf_types.split(str(r["target"]))[1] or "as shipped",
                    f"{r['family']} at {r['quant']}",
                    int(r["gamma"]),
                    num(r["alpha"], 3),
                    num(r["tau"], 2),
                    num(r["tokens_per_s"], 1),
                    interval(r["speedup"], r["lo"], r["hi"], 2, "×"),
                    r["verdict"] or "-",
                ]
            )
        found += [f"drop: {d.words()}" for d in view.drops]
    if not rows:
        return Html("")
    headers = ["workload", "target", "drafter", "γ", "α", "τ", "tokens/s", "speedup [95% CI]", "verdict"]
    said = found or ["no drafter type accepts confidently fewer tokens than another (intervals hold 1)"]
    return Html(
        "<h3>Quantization: per (target type, drafter type)</h3>"
        + table(headers, rows, {3, 4, 5, 6, 7})
        + bullet_list(said, "")
    )

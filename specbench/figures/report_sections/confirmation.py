"""The report's confirmation: the recommendation checked on fresh prompts (`specbench confirm`)."""

from __future__ import annotations

from specbench.figures.plot_data import PlotData
from specbench.figures.report import Html, bullet_list, paragraph, section, table


def confirmation_section(data: PlotData) -> Html:
    """`specbench confirm`'s report: per target the prediction against what fresh prompts realized, held or
    missed, the regret against the best contender, losslessness; nothing when the folder was not confirmed."""
    report = data.confirmation
    if report is None:
        return Html("")
    rows = []
    for state in report.targets.values():
        target, last = state.target, state.last
        prediction = target.prediction
        check = last.check if last else None
        rows.append(
            [
                target.name,
                target.chosen.name,
                prediction.interval_text if prediction else "–",
                check.realized.text if check else "–",
                str(check.outcome) if check else "–",
                f"{last.regret.best} at {last.regret.ratio_text}" if last and last.regret.best else "–",
                last.regret.answer.word if last else "–",
                last.n_prompts if last else 0,
                (last.cliff or "–") if last else "–",
                (last.lossless or "–") if last else "–",
            ]
        )
    return section(
        "confirmation",
        "Confirmation on fresh prompts",
        paragraph(
            "The recommendation was run again, live, on prompts the sweep never used, beside the "
            "target alone and its contenders (the engine's own adaptive mechanisms, the other γ the "
            "sweep named), under the sweep's timing protocol (`specbench confirm`). Held: the "
            "realized interval lies on the verdict's side of 1 and meets the predicted one; regret: "
            "the best contender's tokens/s ÷ the recommendation's (docs/fit.md, 'Recommendations "
            "that prove themselves')."
        ),
        table(
            [
                "target",
                "configuration",
                "predicted",
                "realized",
                "prediction",
                "best contender",
                "beats it",
                "fresh prompts",
                "cliff",
                "lossless",
            ],
            rows,
            numeric={7},
        ),
        bullet_list(report.lines(), cls=""),
        bullet_list([f"absent: {line}" for line in report.absent] + [f"note: {line}" for line in report.notes]),
    )

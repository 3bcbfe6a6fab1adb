"""A confirmation as Rich tables (`specbench confirm`, `results show`, `recommend`): predicted against realized,
held or missed, the regret, and every contender (`specbench.analysis.recommendation.confirmation`)."""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from specbench.analysis.recommendation.confirm_report import Report, TargetLooks
from specbench.analysis.recommendation.confirmed import BEATEN, CONFIRMED, deployments
from specbench.analysis.verdicts.stopping_report import duration
from specbench.cli.views.render import plain


def confirmation_table(report: Report) -> Table:
    """One row per target: the sweep's prediction, the realized speedup, held or missed, the regret."""
    table = Table(
        title="confirmation on fresh prompts: predicted against realized",
        caption="realized: tokens/s ÷ the target alone on the same fresh prompts, interval adjusted for the looks; "
        "regret: the best contender's tokens/s ÷ the recommendation's, adjusted for the best of the contenders "
        f"(docs/fit.md, 'Recommendations that prove themselves'); wall time {duration(report.elapsed_s)}",
    )
    for col in (
        "target",
        "configuration",
        "predicted",
        "realized",
        "prediction",
        "best contender",
        "regret",
        "fresh prompts",
    ):
        table.add_column(col, overflow="fold")
    for state in report.targets.values():
        table.add_row(*_cells(state))
    return table


def _cells(state: TargetLooks) -> list:
    target, last = state.target, state.last
    prediction = target.prediction
    configuration = prediction.configuration if prediction else "-"
    predicted = prediction.interval_text if prediction else "-"
    if last is None:
        return [
            Text(target.name),
            Text(configuration),
            predicted,
            "-",
            Text(f"not run ({state.status})"),
            "-",
            "-",
            "0",
        ]
    check, regret = last.check, last.regret
    realized = check.realized.text if check else "-"
    outcome = Text(str(check.outcome), style=_style(str(check.outcome))) if check else Text("-")
    best = "-" if regret.best is None else f"{regret.best} at {regret.ratio_text}"
    return [
        Text(target.name),
        Text(configuration),
        predicted,
        realized,
        outcome,
        Text(best),
        Text(_regret_word(regret)),
        str(last.n_prompts),
    ]


def _regret_word(regret) -> str:
    """'yes: 12 %' (a contender beats the recommendation by more than ε: the throughput left behind), 'no',
    'within 5 %' (no contender can be more than ε ahead), 'cannot tell'."""
    if regret.best is None:
        return "-"
    if regret.beaten:
        return f"yes: {regret.percent:.0f} %"
    if regret.answer.word == "no":
        return "no"
    return f"within {regret.tolerance * 100:.0f} %" if regret.within else regret.answer.word


def _style(outcome: str) -> str:
    return {"held": "green", "missed": "red"}.get(outcome, "yellow")


def contenders_table(state: TargetLooks) -> Table:
    """One target's arms: each against the target alone and against the recommendation."""
    target, last = state.target, state.last
    table = Table(title=f"{target.name}: every configuration on {last.n_prompts if last else 0} fresh prompts")
    for col in ("configuration", "role", "÷ target alone", f"÷ {target.reference.name}", "why it ran"):
        table.add_column(col, overflow="fold")
    versus = {c.arm: c for c in (last.versus_baseline if last else [])}
    regrets = {c.arm: c for c in (last.regret.contenders if last else [])}
    for arm in target.arms:
        if arm.role == "baseline":
            continue
        left = " (dropped: confidently behind)" if arm.name in state.dropped else ""
        table.add_row(
            Text(arm.name),
            Text(arm.role + left),
            versus[arm.name].text if arm.name in versus else "-",
            regrets[arm.name].text if arm.name in regrets else "-",
            Text(arm.why or "-"),
        )
    return table


def print_deployments(report: Report | None, out, settings_for=None) -> None:
    """What to deploy per confirmed target (`specbench.analysis.recommendation.confirmed`), one bold line each; with
    ``settings_for`` (an `Arm` → engine name → `EngineSetting`), the settings of a contender that beat the
    recommendation, ready to paste."""
    for item in deployments(report):
        style = {BEATEN: "bold red", CONFIRMED: "bold green"}.get(item.status, "bold yellow")
        out.print(Text(f"deploy: {item.text}", style=style))
        if item.status == BEATEN and item.arm is not None and settings_for is not None:
            for name, setting in settings_for(item.arm).items():
                body = setting.snippet or "(not expressible)"
                out.print(Panel(plain(body), title=plain(f"{name} settings for {item.arm.name} (confirmed winner)")))


def print_confirmation(report: Report | None, out, detail: bool = True) -> None:
    """The confirmation's tables and one line per target; its notes and absent mechanisms, one line each."""
    if report is None:
        return
    out.print(confirmation_table(report))
    if detail:
        for state in report.targets.values():
            out.print(contenders_table(state))
    for line in report.lines():
        out.print(Text(line))
    for line in report.absent:
        out.print(Text(f"absent: {line}"))
    for line in report.notes:
        out.print(Text(f"note: {line}"))

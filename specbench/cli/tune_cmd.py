"""`specbench tune SPEC --budget 20m`: the whole loop in one budget — sweep until decided, confirm on fresh prompts,
print the confirmed setting per workload with its paste-ready flags."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer
from rich.panel import Panel
from rich.text import Text

from specbench.analysis.recommendation.confirm_report import load_report
from specbench.analysis.recommendation.confirmed import BEATEN, CONFIRMED, MISSED, Deployment, deployments
from specbench.analysis.settings.engine_settings import engine_settings, target_only_settings
from specbench.analysis.verdicts.stopping_history import load_history
from specbench.analysis.verdicts.stopping_report import summary_lines
from specbench.catalogue import engines as catalogue_engines
from specbench.cli.shell.exit_codes import INTERRUPTED, TERMINATED, Terminated, say
from specbench.cli.shell.params import bounded, folder_path
from specbench.cli.views.progress_lines import LineProgress
from specbench.cli.views.render import console as wide_console
from specbench.cli.views.render import plain
from specbench.errors import SpecbenchError, did_you_mean
from specbench.models.gguf_files import paste_names
from specbench.safe_files import json_ready

EPILOG = """Examples:

  specbench tune sweeps/demo.yaml --budget 20m            # sweep until decided, confirm, print what to deploy

  specbench tune sweeps/demo.yaml --budget 1h --tolerance 0.03 --engine llamacpp

  specbench tune sweeps/demo.yaml --budget 20m --json > tuned.json
"""

SWEEP_SHARE = 0.6  # of the budget, for the sweep until decided; the confirmation gets what it leaves


def tune(
    spec_file: Path = typer.Argument(..., parser=folder_path, help="A sweep file (the grid to tune over)."),
    budget: str = typer.Option("20m", "--budget", help="Wall-time budget of the whole loop: 90s, 20m, 1.5h."),
    tolerance: float = typer.Option(
        None,
        "--tolerance",
        callback=bounded("tolerance"),
        help="ε of the choice (default: the sweep file's, else 0.05).",
    ),
    share: float = typer.Option(
        SWEEP_SHARE,
        "--sweep-share",
        callback=bounded("tune.sweep_share"),
        help="Share of the budget the sweep may use; the confirmation gets the rest.",
    ),
    engine: str = typer.Option(
        "vllm", "--engine", help=f"Whose settings to print: {catalogue_engines.choices_help()}."
    ),
    out: Path = typer.Option(None, "--out", parser=folder_path, help="Results folder (default: results/NAME)."),
    json_out: bool = typer.Option(False, "--json", help="End with what to deploy per workload as JSON on stdout."),
):
    """Sweep until decided, confirm the recommendation on fresh prompts, and print what to deploy — in one budget.

    The sweep measures in looks until every workload's direction (does speculation pay?) and choice (which option,
    within the tolerance of the best) are settled, within its share of the budget; the confirmation then runs the
    recommendation, its contenders and the target alone on prompts the sweep never used, with the rest. The loop
    ends with one line per workload: the confirmed configuration and its settings, the contender that beat it, or
    "not settled" with what it would take. A killed tune resumes with the same command.
    """
    from specbench.measure.grid.adaptive import AdaptivePlan, parse_budget  # lazy: loads torch
    from specbench.measure.grid.sweep import build_spec, load_spec_file  # lazy: loads torch
    from specbench.measure.run.confirm import (  # lazy: loads torch; keeps `specbench --help` fast
        ConfirmSettings,
        plan_confirmation,
        policy_for,
    )
    from specbench.measure.run.runner import SweepRunner  # lazy: loads torch; keeps `specbench --help` fast

    if engine not in catalogue_engines.names():
        choices = catalogue_engines.names()
        raise SpecbenchError(
            f"unknown engine '{engine}'{did_you_mean(engine, choices)} (choose from: {', '.join(choices)})"
        )
    total = parse_budget(budget, "--budget")
    raw = load_spec_file(spec_file)
    if tolerance is not None:
        raw = {**raw, "tolerance": tolerance}
    spec = build_spec(raw, where=str(spec_file))
    plan = spec.adaptive or AdaptivePlan()
    spec.adaptive = AdaptivePlan(plan.batch, plan.first, plan.max_prompts, total * share, plan.calibration_batch)
    folder = out or Path("results") / spec.name
    log = wide_console(stderr=True, wide=False)
    started = time.monotonic()
    log.print(Text(f"tune: sweep until decided, at most {spec.adaptive.budget_s:.0f} s of {total:.0f} s → {folder}"))
    _run(lambda observer: SweepRunner(spec, folder, observer=observer, yes=True), json_out)
    history = load_history(folder)
    for line in summary_lines(history) if history else []:
        log.print(Text(line))
    left = max(total - (time.monotonic() - started), 0.0)
    settings = ConfirmSettings(budget_s=max(left, 1.0))
    confirmation = plan_confirmation(folder, settings)
    if confirmation.targets and left > 0:
        log.print(Text(f"tune: confirm on fresh prompts, {left:.0f} s left → {confirmation.folder}"))
        _run(
            lambda observer: SweepRunner(
                confirmation.spec,
                confirmation.folder,
                observer=observer,
                yes=True,
                workloads=list(confirmation.workloads.values()),
                policy=policy_for(confirmation),
            ),
            json_out,
        )
    else:
        why = "no time left" if left <= 0 else "no workload has a confident verdict and fresh prompts left"
        log.print(Text(f"tune: nothing confirmed ({why})"))
    for note in confirmation.notes:
        log.print(Text(f"note: {note}"))
    report = load_report(folder)
    found = deployments(report)
    unconfirmed = _unconfirmed(history, {d.workload for d in found})
    if json_out:
        data = {"folder": str(folder), "deploy": [d.as_dict() for d in found], "unconfirmed": unconfirmed}
        typer.echo(json.dumps(json_ready(data), indent=2))
        return
    _print(found, unconfirmed, spec.target, engine)


def _run(make_runner, json_out: bool) -> None:
    """One runner to its end with line progress; Ctrl-C keeps what is measured (the same command resumes)."""
    observer = LineProgress(sys.stderr if json_out else sys.stdout)
    runner = make_runner(observer)
    with observer:
        try:
            runner.run()
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, Terminated)
            say(
                f"specbench: {'terminated' if terminated else 'interrupted'}: what is measured is saved; "
                "run the same command to resume"
            )
            raise typer.Exit(TERMINATED if terminated else INTERRUPTED) from None


def _unconfirmed(history, confirmed: set[str]) -> list[str]:
    """Workloads of the sweep that no confirmation target covers, with how the sweep ended for them."""
    if history is None:
        return []
    return [
        f"{name}: not confirmed — the sweep ended '{state.status}' without a confident verdict to confirm"
        for name, state in history.workloads.items()
        if name not in confirmed
    ]


def _print(found: list[Deployment], unconfirmed: list[str], target: str, engine: str) -> None:
    console = wide_console()
    hubs = paste_names()
    for item in found:
        style = {CONFIRMED: "green", BEATEN: "green", MISSED: "yellow"}.get(item.status, "yellow")
        body = item.text
        if item.status in (CONFIRMED, BEATEN, MISSED):
            if item.arm is None:
                body += "\n\n" + target_only_settings(target=target, engines=(engine,), hub_ids=hubs)[engine].snippet
            else:
                arm = item.arm
                setting = engine_settings(
                    arm.drafter, arm.drafter_params, arm.tree, arm.gamma, target=target, engines=(engine,), hub_ids=hubs
                )[engine]
                body += f"\n\n{setting.snippet or '(not expressible in ' + engine + ')'}"
        console.print(Panel(plain(body), title=plain(f"{item.target}: {item.status}"), border_style=style))
    for line in unconfirmed:
        console.print(Text(line, style="yellow"))
    if not found and not unconfirmed:
        raise SpecbenchError("tune ended with nothing to report: the sweep produced no workload")


def register(app: typer.Typer) -> None:
    app.command("tune", epilog=EPILOG)(tune)

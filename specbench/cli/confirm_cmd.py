"""`specbench confirm RESULTS`: run the recommendation again on fresh prompts and say whether it held."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from specbench.analysis.recommendation.confirm_report import CONFIRM_DIR, load_report
from specbench.bounds import check as check_bound
from specbench.cli.shell.exit_codes import INTERRUPTED, TERMINATED, Terminated, say
from specbench.cli.shell.params import bounded, folder_path
from specbench.cli.sweep_cmd import SweepProgress
from specbench.cli.views.confirm import print_confirmation
from specbench.cli.views.progress_lines import LineProgress
from specbench.cli.views.render import console as wide_console
from specbench.errors import SpecbenchError
from specbench.records.identity import CONFIRMATION, check_together, identified_if_any, identify
from specbench.records.lock import lock_holder
from specbench.safe_files import json_ready

EPILOG = """Examples:

  specbench confirm results/demo                    # every decided workload, fresh prompts, 15-minute budget

  specbench confirm results/demo --workload humaneval --budget 5m --max-prompts 12

  specbench confirm results/demo --dry-run          # the targets, their contenders and fresh prompts; nothing runs

  specbench confirm results/vllm-load --json        # a serving sweep: its per-batch-size schedule, load by load
"""


def confirm(
    results: Path = typer.Argument(
        ..., parser=folder_path, help="A sweep's results folder (its recommendation is what gets confirmed)."
    ),
    workload: list[str] = typer.Option(None, "--workload", "-w", help="Confirm only this workload (repeatable)."),
    budget: str = typer.Option(
        "15m",
        "--budget",
        help="Wall-time budget: 90s, 8m, 1.5h (a killed confirmation resumes with the same command, keeping its time).",
    ),
    first: int = typer.Option(4, "--first", help="Fresh prompts of each target's first look."),
    batch: int = typer.Option(4, "--batch", help="Fresh prompts added per look."),
    max_prompts: int = typer.Option(48, "--max-prompts", help="Fresh prompts per target at most."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fresh draw (which unused prompts, in which order)."),
    tolerance: float = typer.Option(
        None,
        "--tolerance",
        callback=bounded("tolerance"),
        help="ε of the regret: a contender confidently less than ε ahead settles it as within tolerance "
        "(default: the sweep's).",
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the targets, contenders and fresh prompts, then stop."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Start over when RESULTS/confirm holds a confirmation of "
        "another plan (it moves to RESULTS/confirm-old-PLAN).",
    ),
    json_out: bool = typer.Option(False, "--json", help="End with the confirmation as JSON on stdout."),
):
    """Run the recommended configuration again, as a deployment would, on prompts the sweep never used.

    For every workload whose verdict was confident, the target alone, the configuration the verdict named
    and its contenders (the engine's own adaptive mechanisms at the recommended γ, and the other γ the
    sweep's panels named) run live, interleaved under the sweep's timing protocol, look by look, until the
    prediction has held or missed and the regret is settled, or the budget is spent. Records go to
    RESULTS/confirm/; `results show`, `recommend` and `plot` show them beside the prediction.
    """
    from specbench.measure.grid.adaptive import parse_budget  # lazy: loads torch; keeps `specbench --help` fast
    from specbench.measure.run.confirm import (  # lazy: loads torch; keeps `specbench --help` fast
        ConfirmSettings,
        plan_confirmation,
        policy_for,
    )
    from specbench.measure.run.runner import SweepRunner  # lazy: loads torch; keeps `specbench --help` fast

    settings = ConfirmSettings(
        first=check_bound("confirm.first", first, key="--first"),
        batch=check_bound("confirm.batch", batch, key="--batch"),
        max_prompts=check_bound("confirm.max_prompts", max_prompts, key="--max-prompts"),
        budget_s=parse_budget(budget, "--budget"),
        seed=check_bound("seed", seed, key="--seed"),
        workloads=tuple(dict.fromkeys(workload or [])),
        tolerance=tolerance,
    )
    writer = lock_holder(results)
    if writer is not None:
        raise SpecbenchError(
            f"{results} is being written by PID {writer} (a sweep is running there): confirm it once "
            "the sweep has finished"
        )
    check_together("confirm", identify(results), *identified_if_any(results / CONFIRM_DIR))
    console = wide_console(stderr=True, wide=False)
    plan = plan_confirmation(results, settings)
    _print_plan(plan, wide_console(stderr=json_out))
    if dry_run:
        if json_out:  # the plan is the answer of a dry run: on stdout, as the run's report would be
            typer.echo(json.dumps(json_ready(plan_dict(plan)), indent=2))
        return
    if not plan.targets:
        wide_console(stderr=json_out).print(
            Text("nothing to confirm: no workload has a confident verdict and fresh prompts left")
        )
        if json_out:
            typer.echo(json.dumps({"targets": {}, "notes": plan.notes, "absent": plan.absent}, indent=2))
        return
    _check_resumable(plan, force)
    observer = _observer(console, json_out)
    runner = SweepRunner(
        plan.spec,
        plan.folder,
        observer=observer,
        yes=True,
        workloads=list(plan.workloads.values()),
        policy=policy_for(plan),
        role=CONFIRMATION,
        out_flag=None,  # confirm writes RESULTS/confirm: it has no --out to suggest
    )
    with observer:
        try:
            runner.run()
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, Terminated)
            say(
                f"specbench: {'terminated' if terminated else 'interrupted'}: finished units are saved in "
                f"{plan.folder}; run the same command to resume"
            )
            raise typer.Exit(TERMINATED if terminated else INTERRUPTED) from None
    report = load_report(results)
    if json_out:
        typer.echo(json.dumps(json_ready(report.as_dict()), indent=2))
        return
    print_confirmation(report, wide_console())


def _observer(console, json_out: bool):
    if sys.stdout.isatty() and not json_out:
        return SweepProgress(console)
    return LineProgress(sys.stderr if json_out else sys.stdout)


def _check_resumable(plan, force: bool) -> None:
    """The same plan resumes; another plan's confirmation is refused, or (--force) moved aside, never lost."""
    previous = load_report(plan.results)
    if previous is None or previous.plan_hash == plan.hash:
        return
    if not force:
        raise SpecbenchError(
            f"{plan.folder} holds a confirmation of another plan ({previous.plan_hash}; now "
            f"{plan.hash}: the sweep, its verdicts or the settings changed); use --force to start "
            "over (the old one is moved aside)"
        )
    aside = plan.results / f"{CONFIRM_DIR}-old-{previous.plan_hash}"
    if aside.exists():
        raise SpecbenchError(f"{aside} exists already: move it away first")
    shutil.move(str(plan.folder), str(aside))


def plan_dict(plan) -> dict:
    """What ``--dry-run --json`` prints: the plan (targets with their predictions, arms, fresh prompts and planned
    looks; what is absent and why), before anything runs."""
    return {
        "dry_run": True,
        "results": str(plan.results),
        "folder": str(plan.folder),
        "plan_hash": plan.hash,
        "settings": plan.settings.as_dict(),
        "targets": [
            {
                "name": target.name,
                **target.as_dict(),
                "fresh_prompts": len(plan.workloads[target.workload].prompts),
                "looks": list(plan.looks(target)),
            }
            for target in plan.targets
        ],
        "absent": list(plan.absent),
        "notes": list(plan.notes),
    }


def _print_plan(plan, out) -> None:
    table = Table(title=f"confirm {plan.results}: {len(plan.targets)} target(s) on fresh prompts")
    for col in ("target", "prediction", "runs", "fresh prompts", "looks"):
        table.add_column(col, overflow="fold")
    for target in plan.targets:
        prediction = target.prediction
        said = f"{prediction.answer}: {prediction.configuration} {prediction.interval_text}" if prediction else "-"
        arms = ", ".join(
            f"{a.name}" + ("" if a.role in ("baseline", "contender") else f" ({a.role})") for a in target.arms
        )
        looks = plan.looks(target)
        table.add_row(
            Text(target.name),
            Text(said),
            Text(arms),
            str(len(plan.workloads[target.workload].prompts)),
            ", ".join(map(str, looks)),
        )
    out.print(table)
    for line in plan.absent:
        out.print(Text(f"absent: {line}"))
    for line in plan.notes:
        out.print(Text(f"note: {line}"))


def register(app: typer.Typer) -> None:
    app.command("confirm", epilog=EPILOG)(confirm)

"""`specbench plot RESULTS_DIR --out DIR`: figures and a self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from specbench.analysis.load.slo import slos_from_flags
from specbench.analysis.load.verdicts import settings_of
from specbench.analysis.options import MAX_GAMMA
from specbench.analysis.statistics.intervals import N_BOOT
from specbench.cli.shell.engine_checks import check_engine_settings, local_model_folder
from specbench.cli.shell.params import bounded, folder_path
from specbench.cli.views.render import console as make_console
from specbench.cli.views.render import plain, styled, text_column
from specbench.models.gguf_files import paste_names
from specbench.records.lock import check_writable_folder

EPILOG = """Examples:

  specbench plot results/demo                          # -> results/demo/report/index.html

  specbench plot results/demo --out slides --format png,pdf

  specbench plot results/mt-bench --objective latency --max-gamma 12

  specbench plot results/vllm-load --itl-p90 50ms --slo latency-p99=4s   # + latency targets against load

  specbench plot results/vllm-load --price-per-hour 2.50 --itl-p90 50ms   # + cost, goodput, energy per load
"""


def plot_command(
    results_dir: Path = typer.Argument(..., help="A results folder written by `specbench sweep`."),
    out: Path = typer.Option(
        None,
        "--out",
        "-o",
        parser=folder_path,
        help="Output folder for index.html and the figures (default RESULTS_DIR/report).",
    ),
    formats: str = typer.Option("png,svg", "--format", "-f", help="Figure formats, comma separated: png, svg, pdf."),
    objective: str = typer.Option(
        "throughput", "--objective", help="Speedup the recommendation optimises: throughput or latency."
    ),
    max_gamma: int = typer.Option(
        None,
        "--max-gamma",
        callback=bounded("max_gamma"),
        help=f"Largest γ of the model curves and the heat map (default: twice the largest measured, 8 to {MAX_GAMMA}).",
    ),
    n_boot: int = typer.Option(
        N_BOOT, "--bootstrap", callback=bounded("bootstrap"), help="Bootstrap replicates over prompts."
    ),
    seed: int = typer.Option(0, "--seed", callback=bounded("seed"), help="Seed of the bootstrap."),
    itl_p90: str = typer.Option(
        None,
        "--itl-p90",
        help="A serving sweep's latency target for the report: the p90 inter-token latency to keep, e.g. 50ms.",
    ),
    ttft_p90: str = typer.Option(None, "--ttft-p90", help="The p90 time to first token to keep, e.g. 2s."),
    latency_p90: str = typer.Option(
        None, "--latency-p90", help="The p90 request latency (arrival to last token) to keep, e.g. 4s."
    ),
    slo: list[str] = typer.Option(
        None,
        "--slo",
        help="METRIC-pNN=DURATION (metric ttft, itl or latency; p50, p90 or p99), e.g. itl-p99=80ms (repeatable).",
    ),
    price_per_hour: float = typer.Option(
        None,
        "--price-per-hour",
        callback=bounded("price_per_hour"),
        help="The machine's price per hour (any currency; default: the sweep's "
        "price_per_hour key): the report's cost per million output tokens "
        "and its cost-against-load figure.",
    ),
):
    """Draw the figures of a sweep and write an HTML report that opens offline.

    Figures: τ vs γ with the fitted (1 − α^(γ+1)) / (1 − α) curve; tokens/s and speedup vs γ with
    the recommendation; acceptance per draft position; α by workload and by category; the time
    split of a round; predicted speedup over (γ, α). A figure whose data are absent (one γ only,
    no categories, no baseline) is skipped with a note. The report adds the recommendation, the
    engine settings to paste, the α and cost tables, the environment and the sweep spec; for a serving
    sweep (a load axis) the verdict per load, the crossovers and, with --itl-p90 / --ttft-p90 / --slo,
    how far each configuration keeps each latency target, and goodput, cost per million output tokens
    (--price-per-hour) and energy per token at every load, with the cost-against-load figure.
    Reading the figures: docs/plots.md.
    """

    from specbench.figures.plot import FIGURES, parse_formats  # lazy: loads matplotlib; keeps `specbench --help` fast
    from specbench.figures.report_page import build_report  # lazy: loads matplotlib; keeps `specbench --help` fast

    chosen = parse_formats(formats)  # bad formats and latency targets fail before any work
    slos = slos_from_flags(itl_p90, ttft_p90, slo or [], latency_p90=latency_p90)
    out_dir = out if out is not None else Path(results_dir) / "report"

    check_writable_folder(out_dir)  # a file or a read-only folder: refused before any figure is drawn
    console = make_console(stderr=True, wide=False)
    progress = Progress(
        text_column("{task.description}", "bold"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )

    def on_figure(figure) -> None:
        progress.advance(task)
        if figure.skipped:
            progress.console.print(styled(("skipped", "yellow"), f" {figure.spec.name}: {figure.skipped}"))
        else:
            progress.console.print(styled(("wrote", "green"), f" {figure.spec.name} ({', '.join(figure.files)})"))

    with progress:
        task = progress.add_task("loading results", total=len(FIGURES))
        report = build_report(
            results_dir,
            out_dir,
            formats=chosen,
            n_boot=n_boot,
            seed=seed,
            max_gamma=max_gamma,
            objective=objective,
            status=lambda message: progress.update(task, description=message),
            on_figure=on_figure,
            hub_ids=paste_names(),
            check_settings=check_report_settings,
            slos=slos,
            price_per_hour=price_per_hour,
        )
    for note in report.data.notes:
        console.print(plain(f"note: {note}", "dim"))
    typer.echo(f"report: {report.index}")


def check_report_settings(data) -> None:
    """The report's engine settings checked as `specbench recommend` checks them (`cli.shell.engine_checks`)."""
    target = local_model_folder(str(data.recommendations[0].keys["target"])) if data.recommendations else None
    schedules = [({s.engine: s}, target) for s in (settings_of(data.load) if data.load else [])]
    check_engine_settings(
        [(rec.settings, local_model_folder(str(rec.keys["target"]))) for rec in data.recommendations] + schedules
    )


def register(app: typer.Typer) -> None:
    app.command("plot", epilog=EPILOG)(plot_command)

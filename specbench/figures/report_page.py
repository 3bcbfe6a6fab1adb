"""The HTML report of a results folder: one self-contained ``index.html`` beside its figures (`build_report`).

The page works opened from disk, offline: inline CSS, no script, no external asset; figures are
the files `specbench.figures.plot` wrote next to it (PNG, else SVG, in ``<img>``; every written format
linked), and only files written in this run are referenced. Sections, one module each in
`specbench.figures.report_sections`: recommendation, stopping history, confirmation, engine settings, load, cost,
figures (each with a line on how to read it, or the reason it was skipped), fitted α and goodness of fit, costs,
strategies, the lossless check, the environment from run.json and the sweep spec.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.analysis.load.slo import Slo
from specbench.analysis.statistics.intervals import N_BOOT
from specbench.errors import SpecbenchError
from specbench.figures.plot import DEFAULT_FORMATS, RenderedFigure, figures_for, render_figure
from specbench.figures.plot_data import PlotData, load_plot_data
from specbench.figures.report import CSS, INDEX, Html, esc, paragraph
from specbench.figures.report_sections.acceptance import acceptance_section
from specbench.figures.report_sections.confirmation import confirmation_section
from specbench.figures.report_sections.costs import costs_section
from specbench.figures.report_sections.environment import environment_section, spec_section, sweep_spec
from specbench.figures.report_sections.figures import figures_section
from specbench.figures.report_sections.load import load_section
from specbench.figures.report_sections.lossless import lossless_section
from specbench.figures.report_sections.operating import operating_section
from specbench.figures.report_sections.recommendation import recommendation_section
from specbench.figures.report_sections.settings import settings_section
from specbench.figures.report_sections.stopping import stopping_section
from specbench.figures.report_sections.strategies import online_section, strategies_section
from specbench.records.store import atomic_write_bytes


def header(data: PlotData, generated: str) -> Html:
    spec = sweep_spec(data.run_info) or {}
    plain = data.run_info.get("sweep")
    name = spec.get("name") or (plain if isinstance(plain, str) else None) or data.folder.name
    targets = ", ".join(sorted(map(str, data.records["target"].unique())))
    lines = [
        f"target {targets} · {len(data.records)} records · "
        f"{data.records['prompt_id'].nunique()} prompts · objective {data.objective}",
        f"results {data.folder} · report generated {generated}",
    ]
    description = spec.get("description")
    return Html(
        f"<h1>specbench report — {esc(name)}</h1>"
        + (paragraph(description) if description else "")
        + "".join(paragraph(line, "muted") for line in lines)
    )


NAV = (
    ("recommendation", "Recommendation"),
    ("stopping", "Stopping history"),
    ("confirmation", "Confirmation"),
    ("settings", "Engine settings"),
    ("load", "Load"),
    ("operating", "Cost"),
    ("figures", "Figures"),
    ("acceptance", "Acceptance"),
    ("costs", "Costs"),
    ("lossless", "Lossless check"),
    ("environment", "Environment"),
    ("spec", "Sweep spec"),
)


def render_html(data: PlotData, figures: list[RenderedFigure], out_dir: Path, generated: str) -> str:
    """The whole page as a string."""
    nav = Html(
        "<nav>"
        + "".join(
            f'<a href="#{esc(a)}">{esc(t)}</a>'
            for a, t in NAV
            if (a != "load" or data.load)
            and (a != "operating" or data.operating)
            and (a != "confirmation" or data.confirmation)
        )
        + "</nav>"
    )
    body = [
        header(data, generated),
        nav,
        recommendation_section(data),
        stopping_section(data),
        confirmation_section(data),
        settings_section(data),
        load_section(data),
        operating_section(data),
        figures_section(figures, out_dir),
        acceptance_section(data),
        costs_section(data),
        strategies_section(data),
        online_section(data),
        lossless_section(data),
        environment_section(data),
        spec_section(data),
    ]
    title = esc(f"specbench report — {data.folder.name}")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{title}</title>'
        f"<style>{CSS}</style></head><body><main>{''.join(body)}</main></body></html>\n"
    )


@dataclass
class Report:
    index: Path
    figures: list[RenderedFigure]
    data: PlotData


def prepare_out_dir(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SpecbenchError(f"--out {out} exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SpecbenchError(f"cannot create output folder {out}: {exc.strerror or exc}") from None
    return out


def write_report(data: PlotData, figures: list[RenderedFigure], out_dir: str | Path) -> Path:
    """Write ``out_dir/index.html`` for already rendered figures; returns its path."""

    out = Path(out_dir)
    index = out / INDEX
    atomic_write_bytes(
        index,
        render_html(data, figures, out, dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")).encode("utf-8"),
    )
    index.chmod(0o644)  # a temporary file's 0600 would hide the page from a web server
    return index


def build_report(
    folder: str | Path,
    out_dir: str | Path,
    *,
    formats=DEFAULT_FORMATS,
    n_boot: int = N_BOOT,
    seed: int = 0,
    max_gamma: int | None = None,
    objective: str = "throughput",
    status: Callable[[str], None] | None = None,
    on_figure: Callable[[RenderedFigure], None] | None = None,
    hub_ids: Mapping[str, str] | None = None,
    check_settings: Callable[[PlotData], None] | None = None,
    slos: Sequence[Slo] = (),
    price_per_hour: float | None = None,
) -> Report:
    """Results folder → figures + index.html in ``out_dir``.

    ``status`` hears what is being done; ``on_figure`` each figure as it is rendered or skipped; ``hub_ids``
    names models in the engine settings; ``check_settings`` checks them with the engines (marks ``checked``);
    ``slos``: latency targets answered in the load section (a serving sweep), and whose goodput the cost section
    shows; ``price_per_hour``: the machine's price (default: the sweep's key), for the cost per token.
    """
    status = status or (lambda message: None)
    status("fitting acceptance and costs")
    data = load_plot_data(
        folder,
        n_boot=n_boot,
        seed=seed,
        max_gamma=max_gamma,
        objective=objective,
        hub_ids=hub_ids,
        slos=slos,
        price_per_hour=price_per_hour,
    )
    if check_settings is not None:
        status("checking the engine settings")
        check_settings(data)
    out = prepare_out_dir(out_dir)
    figures = []
    for spec in figures_for(data):
        status(f"rendering {spec.title}")
        figures.append(render_figure(spec, data, out, formats))
        if on_figure:
            on_figure(figures[-1])
    status("writing index.html")
    return Report(index=write_report(data, figures, out), figures=figures, data=data)

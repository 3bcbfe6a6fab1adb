"""Figures of a results folder: records and fits in, matplotlib figures out.

Everything plotted comes from the project's own estimators — `specbench.records.summary`
(measured throughput, time shares), `specbench.analysis.fit` (α̂ and its interval, per-position rates,
measured τ with its interval), `specbench.analysis.cost.round_cost` (the measured cost model) and
`specbench.analysis.recommendation.recommend` (speedups with intervals, model curves, the recommendation); nothing is
re-fitted here. Definitions as in DESIGN.md: γ draft length (tree: depth), α̂ the fitted α of the
geometric model, τ tokens per target forward with the bonus token, speedup tokens/s ÷ target-only
tokens/s on the same prompts.

Figures are built on `matplotlib.figure.Figure` objects with the Agg canvas — pyplot is never
imported, so no global figure state survives a figure — under a local `rc_context` (`STYLE`).
Each figure has one panel per *scenario* (target, sampling, workload) where it makes sense, the
legend outside the axes below them, and a colour per drafter label from `specbench.figures.palette`.
A figure whose data are absent raises `FigureSkipped` with the reason; `render_figure` turns that
into a note.

This module holds the registry (`FIGURES`, each figure with its title and how to read it) and the rendering;
the data every figure reads are `specbench.figures.plot_data`'s, the figures themselves live in one module per
family (`specbench.figures.families`: over γ, acceptance, costs; and the load, schedule, stream and
confirmation figures beside this module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import matplotlib.text
import matplotlib.ticker
from matplotlib.figure import Figure

from specbench.errors import SpecbenchError
from specbench.figures.confirmation import figure_confirmation
from specbench.figures.families.acceptance import (
    figure_alpha_category,
    figure_alpha_workload,
    figure_context,
    figure_positions,
)
from specbench.figures.families.context import figure_speedup_vs_context
from specbench.figures.families.costs import figure_heatmap, figure_moe_experts, figure_time_split
from specbench.figures.families.gamma import figure_nested, figure_tau, figure_throughput
from specbench.figures.load_figures import figure_cost_vs_load, figure_latency_vs_load, figure_speedup_vs_load
from specbench.figures.plot_data import PlotData
from specbench.figures.schedules import figure_schedules, schedule_panels
from specbench.figures.skipped import FigureSkipped  # re-exported: the figures' one skip type
from specbench.figures.stream_figures import figure_online, has_online_records
from specbench.safe_files import replacing
from specbench.text_sinks import for_label

FORMATS = ("png", "svg", "pdf")
DEFAULT_FORMATS = ("png", "svg")
DPI = 150
STYLE = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "figure.titlesize": 14,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "specbench",
    "savefig.facecolor": "white",
    "text.parse_math": False,  # labels come from the results: a '$' in a model path must stay a '$'
}
_METADATA = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}


@dataclass(frozen=True)
class FigureSpec:
    """A figure of the report: file stem, title, how to read it, and its builder."""

    name: str
    title: str
    how_to_read: str
    build: Callable[[PlotData], Figure]


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "tau_vs_gamma",
        "Tokens per target forward τ vs γ",
        "Points: measured τ per draft length with a prompt-bootstrap interval; dashed line: τ predicted by "
        "the fitted α̂, (1 − α̂^(γ+1)) / (1 − α̂), its band the interval of α̂; crosses: the same model over "
        "the rounds' actual draft lengths (rounds cut short, n-gram misses). Points on their crosses mean the "
        "geometric model holds; the dotted γ + 1 line is the ceiling (every draft accepted).",
        figure_tau,
    ),
    FigureSpec(
        "throughput_vs_gamma",
        "Throughput and speedup vs γ",
        "Top: measured decode tokens/s, the dashed grey line the target-only baseline. Bottom: speedup over "
        "the baseline on the same prompts with its interval, dashed the model's prediction for every γ. "
        "The star marks the recommendation; a configuration is recommended only when its interval lies "
        "above 1× (adjusted for the looks and for picking among the configurations). Each panel's title "
        "gives the verdict — the one configuration, and the γ within its interval — or 'cannot tell'.",
        figure_throughput,
    ),
    FigureSpec(
        "acceptance_by_position",
        "Acceptance per draft position",
        "Points: P(position i accepted | all earlier positions accepted) with exact intervals; line and "
        "band: the constant α̂ the model assumes. Points falling with i mean acceptance decays along the "
        "draft (long drafts are worth less than the model says); rising points usually mean prompts of "
        "unequal difficulty were pooled.",
        figure_positions,
    ),
    FigureSpec(
        "alpha_by_workload",
        "Acceptance α by workload",
        "Bars: fitted α̂ per drafter and workload with its interval; diamonds: α observed (accepted ÷ "
        "drafted), lower because drafted tokens after the first rejection are never tested.",
        figure_alpha_workload,
    ),
    FigureSpec(
        "alpha_by_category",
        "Acceptance α by prompt category",
        "As the workload figure, per prompt category (MT-Bench's eight): which kinds of prompts the "
        "drafter predicts well. Few prompts per category give wide intervals.",
        figure_alpha_category,
    ),
    FigureSpec(
        "alpha_vs_context",
        "Acceptance α vs context length",
        "Points: fitted α̂ per drafter configuration in each context-length bin of a long-context workload, "
        "at the bin's mean prompt length, with its prompt-bootstrap interval. The same documents and tasks "
        "fill every bin, so a falling line means the drafter loses acceptance as the context grows.",
        figure_context,
    ),
    FigureSpec(
        "round_time_split",
        "Time split of a round",
        "Each bar is the mean time of one round (one target forward): drafting, verification and the rest. "
        "The label divides by τ: milliseconds per generated token, the number the speedup comes from.",
        figure_time_split,
    ),
    FigureSpec(
        "speedup_heatmap",
        "Predicted speedup over (γ, α)",
        "Colour: speedup the measured cost model (verify time by tokens verified, draft time, overhead) "
        "predicts for a drafter of acceptance α at draft length γ; blue is faster than the target alone, red "
        "slower, the black line breaks even. Circles: measured configurations at their α̂, labelled with "
        "their measured speedup — read across to see how much a better drafter (higher α) would gain.",
        figure_heatmap,
    ),
    FigureSpec(
        "moe_experts",
        "MoE targets: τ and predicted speedup vs experts per verify",
        "Only for an MoE target. Each point is a configuration (the target-only baseline at top_k experts, "
        "τ 1). Left: τ against the distinct experts a verification touches per layer (mean over rounds). "
        "Right: the speedup the expert-aware cost model predicts when every verification streams its "
        "distinct experts at the baseline step's bandwidth. A configuration up and to the left wins; an "
        "expert-aware tree should sit left of the plain one at a similar τ.",
        figure_moe_experts,
    ),
)

# Figures of one strategy axis (issue 17): drawn only when the sweep has that axis (`figures_for`), so a
# report of a sweep without it neither draws nor lists them as skipped.
STRATEGY_FIGURES: tuple[tuple[FigureSpec, Callable[[PlotData], bool]], ...] = (
    (
        FigureSpec(
            "schedules",
            "Verify-length schedules vs fixed γ",
            "Bars: measured speedup of each chain configuration with its interval — grey a fixed γ, coloured a "
            "schedule that chooses the draft length per round up to its cap γ (heuristic, threshold, dspark); "
            "'mean' is the draft length its rounds actually used. Dashed: the best fixed γ. The title compares "
            "the best dynamic schedule with the best fixed γ on the same prompts (tokens/s ratio and interval): "
            "'yes' only when the interval lies above 1.",
            figure_schedules,
        ),
        lambda data: bool(schedule_panels(data.recommendations)),
    ),
    (
        FigureSpec(
            "nested_vs_sequential",
            "Nested speculation vs sequential",
            "Top: measured decode tokens/s per γ, solid the sequential rounds, dashed the nested ones (the next "
            "draft prepared while the target verifies). Bottom: the nested hit rate, the share of rounds after "
            "the first that verified a prepared draft; a hit hides that round's drafting. Nested wins where "
            "hits are frequent and the drafter and target truly run at the same time.",
            figure_nested,
        ),
        lambda data: "strategy" in data.records and bool((data.records["strategy"] == "nested").any()),
    ),
    (
        FigureSpec(
            "online_adaptation",
            "Online adaptation over the stream",
            "Acceptance α (top), τ (middle) and speedup over the target alone (bottom) against the position in "
            "the stream, one colour per configuration: the static drafter and each online one. Dots: single "
            "prompts; lines: the trailing window of 8 prompts (never across a shift point) with its interval "
            "over prompts. Dashed verticals: shift points, labelled with the segment that starts there. In the "
            "speedup row the dotted line charges the training seconds (training on the serving machine); the "
            "solid one does not (training on hardware of its own). The title says whether online adaptation "
            "pays either way (`specbench recommend`).",
            figure_online,
        ),
        has_online_records,
    ),
    (
        FigureSpec(
            "confirmation",
            "The recommendation on fresh prompts: predicted against realized",
            "Per target of `specbench confirm`: the sweep's predicted speedup for the configuration its verdict "
            "named, with the adjusted interval it rests on (grey square), and the speedup realized on prompts the "
            "sweep never used, with its interval adjusted for the confirmation's looks (circle: green held, red "
            "missed, orange not settled yet). Below, each contender — the engine's own adaptive mechanisms and "
            "the other γ the sweep named — realized over the target alone (open diamonds). Held: the realized "
            "interval lies on the verdict's side of 1 and meets the predicted one (docs/fit.md).",
            lambda data: figure_confirmation(data.confirmation),
        ),
        lambda data: data.confirmation is not None,
    ),
)


# Figures against load: drawn only when the sweep varied the load (a serving backend's concurrency or request rate).
LOAD_FIGURES: tuple[tuple[FigureSpec, Callable[[PlotData], bool]], ...] = (
    (
        FigureSpec(
            "speedup_vs_load",
            "Speedup against load",
            "Top: per-request decode tokens/s of each configuration over the target-only run at the same load "
            "(what one user feels); bottom: the system's output tokens/s over the target-only system's (what the "
            "engine delivers; Σ output tokens ÷ the batch's wall time). Error bars: 95% intervals over prompts. "
            "▼ on the 1× line: where a configuration's speedup crosses 1 (log–log interpolation between measured "
            "loads); shaded: the load range where the interval of the configuration the verdict at the lowest "
            "load names (the crossover line's) includes 1. Left of it speculation pays, right of it it does not. "
            "Each column's title gives the verdict at every load.",
            figure_speedup_vs_load,
        ),
        lambda data: data.load is not None,
    ),
    (
        FigureSpec(
            "latency_vs_load",
            "Latency against load",
            "Time to first token (top) and inter-token latency (bottom; each request's mean gap between tokens) "
            "against load, for the target-only run, the verdict's configuration and the next fastest at the "
            "lowest load: p90 "
            "with its 95% prompt-bootstrap interval (solid), p50 (dotted), p99 (dashed). Speculation can lower "
            "ITL and still raise TTFT; `recommend --objective slo --itl-p90 50ms` reads the highest load that "
            "keeps a target.",
            figure_latency_vs_load,
        ),
        lambda data: data.load is not None,
    ),
    (
        FigureSpec(
            "cost_vs_load",
            "Cost against load",
            "Top: what a million output tokens cost at each load (the machine's price per hour ÷ the system's "
            "output tokens/s), target only in black and every configuration; bottom, where the machine has an "
            "energy counter: joules per output token above idle power. Error bars: 95% prompt-bootstrap "
            "intervals. Speculation pays for itself where its line lies below target only's: at low load it "
            "usually does, at high load the drafting and the rejected tokens can make each token dearer "
            "(docs/operating-cost.md).",
            figure_cost_vs_load,
        ),
        lambda data: data.load is not None and data.operating is not None,
    ),
)


# Figures against context length: drawn only when the records span two or more context-length bins.
CONTEXT_FIGURES: tuple[tuple[FigureSpec, Callable[[PlotData], bool]], ...] = (
    (
        FigureSpec(
            "speedup_vs_context",
            "Speedup and α vs context length",
            "Per workload, at each context-length bin's mean prompt length (log scale): top, the measured speedup of "
            "every configuration over the target alone on the same prompts, with its 95% interval over prompts; "
            "bottom, its fitted α̂ with its prompt-bootstrap interval; one marker per γ. Dashed: the crossover "
            "length, where the speedup of the configuration the verdict at the shortest bin names crosses 1 "
            "(log–log interpolation between bins); shaded: the lengths where its interval includes 1. Left of it "
            "that γ pays, right of it it does not (docs/context-length.md).",
            figure_speedup_vs_context,
        ),
        lambda data: bool(data.context),
    ),
)


def figures_for(data: PlotData) -> tuple[FigureSpec, ...]:
    """The report's figures for ``data``: every one of `FIGURES`, then the load, context and strategy figures its
    sweep calls for."""
    optional = LOAD_FIGURES + CONTEXT_FIGURES + STRATEGY_FIGURES
    return FIGURES + tuple(spec for spec, applies in optional if applies(data))


@dataclass
class RenderedFigure:
    """The outcome of one figure: files written (format → path) or the reason it was skipped."""

    spec: FigureSpec
    files: dict[str, Path] = field(default_factory=dict)
    skipped: str | None = None


def parse_formats(text: str | None) -> tuple[str, ...]:
    """'png,svg' → ('png', 'svg'); None → the defaults; unknown names → SpecbenchError."""
    if text is None:
        return DEFAULT_FORMATS
    names = [part.strip().lower().lstrip(".") for part in str(text).split(",") if part.strip()]
    if not names:
        raise SpecbenchError(f"--format: no format given (choose from: {', '.join(FORMATS)})")
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        raise SpecbenchError(f"--format: unknown format '{unknown[0]}' (choose from: {', '.join(FORMATS)})")
    return tuple(dict.fromkeys(names))


class _LabelFormatter(matplotlib.ticker.Formatter):
    """A tick formatter whose every label goes through `for_label` (the formatter it wraps makes the text)."""

    def __init__(self, inner: matplotlib.ticker.Formatter):
        self.inner = inner

    def __call__(self, x, pos=None):
        return for_label(self.inner(x, pos))

    def format_ticks(self, values):
        return [for_label(label) for label in self.inner.format_ticks(values)]

    def get_offset(self):
        return for_label(self.inner.get_offset())

    def set_locs(self, locs):
        self.inner.set_locs(locs)

    def set_axis(self, axis):
        super().set_axis(axis)
        self.inner.set_axis(axis)

    def format_data(self, value):
        return for_label(self.inner.format_data(value))

    def format_data_short(self, value):
        return for_label(self.inner.format_data_short(value))


def sanitise_labels(fig: Figure) -> None:
    """Every text of ``fig`` through `specbench.text_sinks.for_label` (the figures' one label sink): titles, axis
    labels, legend entries, annotations, and the tick labels of every axis (made by its formatters when the
    figure is drawn: each is wrapped), so that a control character from the data never reaches the SVG."""
    for text in fig.findobj(matplotlib.text.Text):
        text.set_text(for_label(text.get_text()))
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in (
                (axis.get_major_formatter, axis.set_major_formatter),
                (axis.get_minor_formatter, axis.set_minor_formatter),
            ):
                formatter = get()
                if not isinstance(formatter, (_LabelFormatter, matplotlib.ticker.NullFormatter)):
                    put(_LabelFormatter(formatter))


def save_figure(fig: Figure, out_dir: Path, name: str, formats) -> dict[str, Path]:
    """Write ``fig`` as ``out_dir/name.<format>`` for each format, its labels sanitised; returns format → path."""
    sanitise_labels(fig)
    files = {}
    for fmt in formats:
        path = Path(out_dir) / f"{name}.{fmt}"
        with replacing(path) as handle:  # whole, never through a symlink (`specbench.safe_files`)
            fig.savefig(handle, format=fmt, dpi=DPI, metadata=_METADATA[fmt], bbox_inches="tight", pad_inches=0.2)
        files[fmt] = path
    return files


def render_figure(spec: FigureSpec, data: PlotData, out_dir: str | Path, formats=DEFAULT_FORMATS) -> RenderedFigure:
    """Build one figure and save it in every format, or record why it was skipped."""
    try:
        with matplotlib.rc_context(STYLE):
            fig = spec.build(data)
            files = save_figure(fig, Path(out_dir), spec.name, formats)
    except FigureSkipped as exc:
        return RenderedFigure(spec, skipped=str(exc))
    return RenderedFigure(spec, files=files)

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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import matplotlib.text
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from specbench.analysis.context_bins import fit_by_context_bin
from specbench.analysis.cost.moe import expert_aware_table, is_moe
from specbench.analysis.cost.round_cost import fit_group_costs, group_cost_fits, predict_arrays
from specbench.analysis.fit import (
    AcceptanceModel,
    expected_tokens,
    fit_acceptance,
    fits_frame,
    goodness_frame,
    load_results,
    positions_frame,
    tau_intervals,
)
from specbench.analysis.load.goodput import goodput_answers
from specbench.analysis.load.operating import operating, price_of
from specbench.analysis.load.slo import Slo, slo_answers
from specbench.analysis.load.table import LOAD_KEYS, has_load_axis, load_keys, normalised, serving_table
from specbench.analysis.load.verdicts import summary as load_summary
from specbench.analysis.options import MAX_GAMMA
from specbench.analysis.recommendation.confirm_report import Report as ConfirmationReport
from specbench.analysis.recommendation.confirm_report import load_report as load_confirmation
from specbench.analysis.recommendation.recommend import OBJECTIVES, recommend
from specbench.analysis.statistics.intervals import LEVEL, N_BOOT
from specbench.analysis.strategies import strategy_table
from specbench.analysis.verdicts.decision import gamma_span
from specbench.analysis.verdicts.stopping_history import History, load_history
from specbench.errors import SpecbenchError
from specbench.figures.confirmation import figure_confirmation
from specbench.figures.drawing import (
    dodge,
    legend_below,
    measured_points,
    model_band,
    new_panels,
    panel_title,
    scenario_title,
    select,
    series_handle,
)
from specbench.figures.load_figures import figure_cost_vs_load, figure_latency_vs_load, figure_speedup_vs_load
from specbench.figures.palette import BASELINE_LABEL, CHAIN, Palette
from specbench.figures.schedules import figure_schedules, schedule_panels
from specbench.figures.skipped import FigureSkipped  # re-exported: the figures' one skip type
from specbench.figures.stream_figures import figure_online, has_online_records
from specbench.records.store import load_run_info
from specbench.records.summary import (
    BASELINE_KEYS,
    configuration_table,
    fixed_schedule,
    is_baseline,
    lossless_check,
    prefer_live,
)
from specbench.records.timing import has_round_timings
from specbench.safe_files import replacing
from specbench.text_sinks import for_label

FORMATS = ("png", "svg", "pdf")
DEFAULT_FORMATS = ("png", "svg")
DPI = 150
SCENARIO_KEYS = BASELINE_KEYS  # target, temperature, top_p, top_k, workload
SERIES_KEYS = ["drafter_label", "tree"]
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
COMPONENTS = (
    ("draft", "drafting", "#3A3A3A"),
    ("verify", "verification", "#9A9A9A"),
    ("overhead", "overhead", "#DADADA"),
)
CI = f"{LEVEL:.0%} CI"


# ----------------------------------------------------------------------------- data


@dataclass
class PlotData:
    """Everything the figures and the report read, computed once from a results folder."""

    folder: Path
    run_info: dict
    records: pd.DataFrame
    configs: pd.DataFrame  # summary.configuration_table of live records
    taus: pd.DataFrame  # fit.tau_intervals (a unit once, live preferred): τ per configuration, interval
    fits: pd.DataFrame  # fit.fits_frame per (target, drafter, tree, workload, sampling)
    positions: pd.DataFrame  # fit.positions_frame
    goodness: pd.DataFrame  # fit.goodness_frame
    category_fits: pd.DataFrame  # fits_frame by category, workloads with ≥ 2 categories
    costs: pd.DataFrame  # cost.fit_group_costs
    cost_fits: list  # cost.group_cost_fits: (keys, CostFit | None)
    recommendations: list  # recommend.Recommendation per scenario with a baseline
    lossless: pd.DataFrame  # summary.lossless_check
    palette: Palette
    max_gamma: int
    objective: str
    notes: list[str] = field(default_factory=list)
    context_bins: pd.DataFrame = field(default_factory=pd.DataFrame)  # context_bins.fit_by_context_bin
    history: History | None = None  # an adaptive sweep's stopping history (analysis.verdicts.stopping_history)
    load: dict | None = None  # a serving sweep with a load axis: analysis.load.verdicts.summary (None: one load)
    # goodput, cost and energy per load (analysis.load.operating.Operating.as_dict, with "goodput": the goodput
    # objective's answers); None without live records or with nothing to say (one load, no price, no energy)
    operating: dict | None = None
    confirmation: ConfirmationReport | None = None  # `specbench confirm`'s report (None: not confirmed)


def default_max_gamma(records: pd.DataFrame) -> int:
    """Largest γ the model curves and the heat map reach: twice the largest measured, 8 to MAX_GAMMA."""
    measured = int(records["gamma"].max()) if len(records) else 0
    return int(min(MAX_GAMMA, max(8, 2 * measured)))


def category_workloads(spec: pd.DataFrame) -> list[str]:
    """Workloads whose speculative records span at least two categories (MT-Bench's eight)."""
    counts = spec.dropna(subset=["category"]).groupby("workload")["category"].nunique()
    return sorted(str(w) for w in counts[counts >= 2].index)


def load_plot_data(
    folder: str | Path,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    max_gamma: int | None = None,
    objective: str = "throughput",
    hub_ids: Mapping[str, str] | None = None,
    slos: Sequence[Slo] = (),
    price_per_hour: float | None = None,
) -> PlotData:
    """Load a results folder and compute every table the figures use (``hub_ids``: model spec → Hugging Face
    id, how the engine settings name models; ``slos``: latency targets whose answers a serving sweep's load
    summary carries, `specbench.analysis.load.slo`, and whose goodput `specbench.analysis.load.operating` measures;
    ``price_per_hour``: the machine's price, for the cost per token (default: the sweep's key)).

    Raises `SpecbenchError` for a missing folder, a folder without run.json or without records.
    Missing parts (no speculative records, no baseline) leave empty tables and a note: the
    figures that need them are skipped, never an error.
    """

    if objective not in OBJECTIVES:
        raise SpecbenchError(f"unknown objective '{objective}' (choose from: {', '.join(OBJECTIVES)})")
    folder = Path(folder)
    records = load_results(folder)
    run_info = load_run_info(folder)
    max_gamma = max_gamma or default_max_gamma(records)
    notes: list[str] = []
    spec = records[~is_baseline(records) & (records["gamma"] > 0)]
    fits = positions = goodness = category_fits = pd.DataFrame()
    if spec.empty:
        notes.append("no speculative records (γ ≥ 1): acceptance figures and tables are empty")
    else:
        accepted = fit_acceptance(records, n_boot=n_boot, seed=seed)
        fits, positions, goodness = fits_frame(accepted), positions_frame(accepted), goodness_frame(accepted)
        with_categories = category_workloads(spec)
        if with_categories:
            subset = records[records["workload"].isin(with_categories)]
            category_fits = fits_frame(fit_acceptance(subset, by=["category"], n_boot=n_boot, seed=seed))
    history = load_history(folder)  # an adaptive sweep is judged the way it stopped (analysis.statistics.sequential)
    plans = history.plans() if history else {}
    try:
        recommendations = recommend(
            records, objective=objective, max_gamma=max_gamma, n_boot=n_boot, seed=seed, plans=plans, hub_ids=hub_ids
        )
    except SpecbenchError as exc:
        recommendations = []
        notes.append(f"no recommendation: {exc}")
    levels = load_keys(records)  # timings per load level, never pooled across levels (acceptance is pooled)
    live = normalised(records) if levels else records[records["mode"] == "live"]
    load = None
    if has_load_axis(records):
        table = serving_table(records, n_boot=n_boot, seed=seed)
        load = load_summary(records, recommendations, hub_ids=hub_ids, n_boot=n_boot, seed=seed, table=table)
        load["slo"] = [answer for slo in slos for answer in slo_answers(table, slo, load["axis"])]
    elif slos:
        notes.append("latency targets need a sweep with a load axis (--concurrency or --request-rate): no SLO section")
    price = price_of(price_per_hour, run_info)
    costs = None
    live_records = records[records["mode"] == "live"]
    measured = "energy_j" in live_records and live_records["energy_j"].notna().any()
    if len(live_records) and (load is not None or price is not None or measured):
        op = operating(records, slos=slos if load is not None else (), price_per_hour=price, n_boot=n_boot, seed=seed)
        costs = {**op.as_dict(), "goodput": goodput_answers(op, load["axis"]) if load is not None else []}
    return PlotData(
        folder=folder,
        run_info=run_info,
        records=records,
        configs=configuration_table(live, by=levels or None),
        load=load,
        operating=costs,
        taus=tau_intervals(prefer_live(records), n_boot=n_boot, seed=seed),
        fits=fits,
        positions=positions,
        goodness=goodness,
        category_fits=category_fits,
        costs=fit_group_costs(records),
        cost_fits=group_cost_fits(records),
        recommendations=recommendations,
        lossless=lossless_check(records),
        palette=Palette(records["drafter_label"], records["tree"]),
        max_gamma=max_gamma,
        objective=objective,
        notes=notes,
        context_bins=fit_by_context_bin(records, n_boot=n_boot, seed=seed),
        history=history,
        confirmation=load_confirmation(folder),
    )


# ----------------------------------------------------------------------------- scenarios and series


def scenarios(frame: pd.DataFrame) -> list[dict]:
    """The distinct (target, temperature, top_p, top_k, workload) of a frame — and load level (concurrency,
    request rate) where the frame has that column: figures over γ draw one panel per load, never pooled —
    sorted."""
    if frame.empty or not set(SCENARIO_KEYS) <= set(frame.columns):
        return []
    keys = SCENARIO_KEYS + [k for k in LOAD_KEYS if k in frame.columns]
    unique = frame[keys].drop_duplicates().sort_values(["workload", "target", "temperature"] + keys[5:])
    return [dict(zip(keys, row)) for row in unique.itertuples(index=False)]


def series_name(label: str, tree: str) -> str:
    """Legend name of a (drafter, tree) series: the drafter label, the tree when not a chain."""
    return str(label) if tree == CHAIN else f"{label} · tree {tree}"


def series(frame: pd.DataFrame, palette: Palette):
    """(name, style, rows) per (drafter label, tree) of ``frame``, in palette order. Rows of a dynamic
    verify-length schedule are left out: these figures plot against γ, which such a schedule only caps
    (the schedule figure, `specbench.figures.schedules`, shows them)."""
    frame = frame[fixed_schedule(frame)]
    order = {label: i for i, label in enumerate(palette.labels)}
    groups = sorted(frame.groupby(SERIES_KEYS, sort=False), key=lambda kv: (order.get(kv[0][0], -1), str(kv[0][1])))
    for (label, tree), rows in groups:
        yield series_name(label, tree), palette.style(label, tree), rows


def find_recommendation(data: PlotData, scenario: dict):
    """The recommendation of a scenario, or None (no baseline there)."""
    for rec in data.recommendations:
        if all(rec.keys.get(k) == v for k, v in scenario.items()):
            return rec
    return None


# ----------------------------------------------------------------------------- drawing helpers


def gamma_axis(ax, top: int, *, label: bool = True) -> None:
    """Integer γ ticks from 0 to ``top``."""
    ax.set_xlim(-0.4, top + 0.4)
    step = 1 if top <= 10 else 2
    ax.set_xticks(range(0, top + 1, step))
    if label:
        ax.set_xlabel("draft length γ (tokens drafted per round)")


def spec_taus(data: PlotData) -> pd.DataFrame:
    return data.taus[~is_baseline(data.taus) & (data.taus["gamma"] > 0)] if len(data.taus) else data.taus


def require_gammas(frame: pd.DataFrame) -> None:
    """Skip unless some (drafter, tree) of some scenario was measured at two or more γ."""
    if frame.empty:
        raise FigureSkipped("no speculative configuration (γ ≥ 1) was measured")
    widest = frame.groupby(SCENARIO_KEYS + SERIES_KEYS)["gamma"].nunique().max()
    if widest < 2:
        raise FigureSkipped("only one draft length γ per drafter was measured: a curve over γ needs at least two")


def require_baseline(data: PlotData) -> None:
    if not data.recommendations:
        reason = next((n for n in data.notes if n.startswith("no recommendation")), "no target-only baseline")
        raise FigureSkipped(f"speedup needs the target-only baseline (γ = 0) — {reason}")


# ----------------------------------------------------------------------------- τ vs γ


def tau_curves(ax, fit: pd.Series, top: float, colour: str) -> None:
    """The fitted (1 − α̂^(γ+1)) / (1 − α̂) over γ ∈ [0, top] with the band of α̂'s interval."""

    grid = np.linspace(0, top, 200)
    model_band(
        ax,
        grid,
        expected_tokens(fit["alpha"], grid),
        expected_tokens(fit["alpha_lo"], grid),
        expected_tokens(fit["alpha_hi"], grid),
        colour=colour,
    )
    ax.annotate(
        f"α̂={fit['alpha']:.2f}",
        (top, expected_tokens(fit["alpha"], top)),
        xytext=(4, 0),
        textcoords="offset points",
        color=colour,
        fontsize=9,
        va="center",
        annotation_clip=False,
    )
    if fit.get("model") == "decaying":
        gammas = np.arange(0, int(top) + 1)
        model = AcceptanceModel(float(fit["model_alpha"]), float(fit["decay"]))
        ax.plot(gammas, [model.expected_tokens(g) for g in gammas], color=colour, linestyle=":", linewidth=1.4)


def figure_tau(data: PlotData) -> Figure:
    """τ vs γ per scenario: measured τ with intervals, the fitted geometric curve with its band."""
    taus = spec_taus(data)
    require_gammas(taus)
    panels = scenarios(data.fits)
    fig, (axes,) = new_panels(len(panels))
    handles: dict[str, object] = {}
    for ax, scenario in zip(axes, panels):
        part, fits = select(taus, scenario), select(data.fits, scenario)
        top = int(part["gamma"].max())
        grid = np.linspace(0, top, 50)
        ax.plot(grid, grid + 1, color="0.55", linestyle=(0, (1, 2)), linewidth=1)
        named = list(series(part, data.palette))
        for i, (name, style, rows) in enumerate(named):
            rows = rows.sort_values("gamma")
            fit = select(fits, dict(zip(SERIES_KEYS, rows[SERIES_KEYS].iloc[0])))
            if len(fit):
                tau_curves(ax, fit.iloc[0], top, style["color"])
            own = select(data.goodness, dict(scenario, **dict(zip(SERIES_KEYS, rows[SERIES_KEYS].iloc[0]))))
            ax.plot(
                own["gamma"] + dodge(i, len(named)),
                own["tau_predicted"],
                marker="x",
                markersize=7,
                linestyle="none",
                color=style["color"],
                zorder=4,
            )
            measured_points(
                ax,
                rows["gamma"],
                rows["tau"],
                rows["tau_lo"],
                rows["tau_hi"],
                style=style,
                offset=dodge(i, len(named)),
                connect=False,
            )
            handles[name] = series_handle(name, dict(style, linestyle="none"))
        gamma_axis(ax, top)
        ax.set_ylim(0.9, min(top + 1.2, max(2.0, float(part["tau_hi"].max()) * 1.15)))
        ax.set_ylabel("τ (tokens per target forward)")
        panel_title(ax, scenario_title(scenario, panels))
    handles[f"measured τ, {CI} (prompt bootstrap)"] = Line2D([], [], color="0.3", marker="o", linestyle="none")
    handles["fit (1 − α̂^(γ+1)) / (1 − α̂)"] = Line2D([], [], color="0.3", linestyle="--")
    handles["model over the rounds' own draft lengths"] = Line2D([], [], color="0.3", marker="x", linestyle="none")
    handles[f"{CI} of α̂"] = Patch(color="0.3", alpha=0.18)
    if not data.fits.empty and (data.fits["model"] == "decaying").any():
        handles["decaying fit α̂·d^i (preferred)"] = Line2D([], [], color="0.3", linestyle=":")
    handles["α = 1 limit (γ + 1)"] = Line2D([], [], color="0.55", linestyle=(0, (1, 2)))
    fig.suptitle("Tokens per target forward τ vs draft length γ")
    legend_below(fig, handles)
    return fig


# ----------------------------------------------------------------------------- throughput and speedup vs γ


def mark_recommended(ax, x: float, y: float) -> None:
    ax.plot([x], [y], marker="*", markersize=18, color="#FFC20A", markeredgecolor="black", linestyle="none", zorder=5)


def throughput_panel(ax, data: PlotData, scenario: dict, rec, top: int) -> None:
    """Measured tokens/s per (drafter, tree) vs γ; the baseline as a horizontal line at γ = 0."""
    part = select(data.configs, scenario)
    spec = part[part["gamma"] > 0]
    base = part[part["drafter_label"] == BASELINE_LABEL]
    if len(base):
        level = float(base["tokens_per_s"].iloc[0])
        ax.axhline(level, color="0.35", linestyle="--", linewidth=1.2, zorder=1)
        ax.plot([0], [level], marker="o", color="0.35", markersize=7, zorder=3)
    named = list(series(spec, data.palette))
    for i, (_name, style, rows) in enumerate(named):
        rows = rows.sort_values("gamma")
        measured_points(ax, rows["gamma"], rows["tokens_per_s"], style=style, offset=dodge(i, len(named)))
    if rec is not None and rec.final is not None:
        hit = select(spec, {"drafter_label": rec.final.drafter_label, "tree": rec.final.tree, "gamma": rec.final.gamma})
        if len(hit):
            mark_recommended(ax, rec.final.gamma, float(hit["tokens_per_s"].iloc[0]))
    gamma_axis(ax, top, label=False)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    ax.set_ylabel("decode throughput (tokens/s)")


def speedup_panel(ax, data: PlotData, rec, top: int) -> None:
    """Measured speedup with its interval, the model's prediction (dashed, band) and the 1× line."""
    ax.axhline(1.0, color="0.35", linestyle="--", linewidth=1.2, zorder=1)
    if rec is None:
        ax.text(0.5, 0.5, "no baseline for this scenario", transform=ax.transAxes, ha="center", color="0.4")
        gamma_axis(ax, top)
        return
    values = [1.0]
    curves = rec.curves
    for _, style, rows in series(curves, data.palette) if len(curves) else ():
        rows = rows.sort_values("gamma")
        model_band(
            ax, rows["gamma"], rows["objective_speedup"], rows["lo"], rows["hi"], colour=style["color"], linewidth=1.1
        )
        values.extend(rows["objective_speedup"])
    named = list(series(rec.options, data.palette)) if len(rec.options) else []
    for i, (_name, style, rows) in enumerate(named):
        rows = rows.sort_values("gamma")
        measured_points(
            ax, rows["gamma"], rows["speedup"], rows["lo"], rows["hi"], style=style, offset=dodge(i, len(named))
        )
        values.extend(rows["speedup"])
    predicted = rec.predicted
    for _name, style, rows in series(predicted, data.palette) if len(predicted) else ():
        rows = rows.sort_values("gamma")  # the decision's evidence: acceptance on every prompt × cost
        measured_points(
            ax,
            rows["gamma"],
            rows["predicted"],
            rows["lo"],
            rows["hi"],
            style={**style, "markerfacecolor": "white", "marker": "s"},
            offset=0.12,
            connect=False,
        )
        values.extend(rows["hi"])
    if rec.final is not None:
        mark_recommended(ax, rec.final.gamma, rec.final.speedup)
    finite = [v for v in values if np.isfinite(v)]
    ax.set_ylim(0, max(finite) * 1.25 if finite else 2.0)
    gamma_axis(ax, top)
    label = "speedup" if rec.objective == "throughput" else f"{rec.objective} speedup"
    ax.set_ylabel(f"{label} vs target only (×)")


def recommendation_caption(rec) -> str:
    """The panel's answer in the words of every other panel (`Recommendation.headline`): the verdict's
    configuration and how flat the optimum is, or 'cannot tell (best so far …)', 'confident no: …'."""
    if rec is None:
        return "no baseline"
    text = rec.headline()
    flat = rec.flat_range
    if flat and len(flat["gammas"]) > 1:
        text += f" ({gamma_span(flat['gammas'])} within its interval)"
    return text


def figure_throughput(data: PlotData) -> Figure:
    """Tokens/s (top row) and speedup (bottom row) vs γ per (drafter, tree), one column per scenario."""
    require_baseline(data)
    require_gammas(spec_taus(data))
    panels = scenarios(data.configs[data.configs["gamma"] > 0])
    top = int(max(data.max_gamma, data.configs["gamma"].max()))
    fig, (upper, lower) = new_panels(len(panels), nrows_per=2, size=(5.4, 3.4), sharex=True)
    handles: dict[str, object] = {}
    for ax_tps, ax_speed, scenario in zip(upper, lower, panels):
        rec = find_recommendation(data, scenario)
        throughput_panel(ax_tps, data, scenario, rec, top)
        speedup_panel(ax_speed, data, rec, top)
        panel_title(ax_tps, scenario_title(scenario, panels), recommendation_caption(rec))
        for name, style, _ in series(select(data.configs, scenario).query("gamma > 0"), data.palette):
            handles[name] = series_handle(name, style)
    handles["target only (γ = 0): tokens/s and 1×"] = Line2D([], [], color="0.35", linestyle="--", marker="o")
    handles[f"measured speedup, {CI} (paired prompt bootstrap)"] = Line2D(
        [], [], color="0.3", marker="o", linestyle="none"
    )
    handles[f"model prediction (α̂ × measured costs), {CI}"] = Line2D([], [], color="0.3", linestyle="--")
    if any(len(r.predicted) for r in data.recommendations):
        handles[f"predicted speedup (replayed acceptance × timed costs), {CI}"] = Line2D(
            [], [], color="0.3", marker="s", markerfacecolor="white", linestyle="none"
        )
    handles["recommended"] = Line2D(
        [], [], marker="*", markersize=14, color="#FFC20A", markeredgecolor="black", linestyle="none"
    )
    fig.suptitle("Decode throughput and speedup vs draft length γ")
    legend_below(fig, handles)
    return fig


def figure_nested(data: PlotData) -> Figure:
    """Nested vs sequential: tokens/s (top row) and the nested hit rate (bottom row) vs γ per scenario."""
    table = strategy_table(data.records)
    if table.empty:
        raise FigureSkipped("no nested-speculation records (sweep key strategy: {name: nested, prepared: P})")
    panels = scenarios(table)
    fig, (upper, lower) = new_panels(len(panels), nrows_per=2, size=(5.4, 3.4), sharex=True)
    handles: dict[str, object] = {}
    for ax_tps, ax_hit, scenario in zip(upper, lower, panels):
        part = select(table, scenario)
        for (label, _drafter, prepared), rows in part.groupby(["drafter_label", "drafter", "prepared"], sort=True):
            rows = rows.sort_values("gamma")
            style = dict(data.palette.style(label, CHAIN), linestyle="--" if prepared else "-")
            measured_points(ax_tps, rows["gamma"], rows["tokens_per_s"], style=style)
            if prepared:
                measured_points(ax_hit, rows["gamma"], rows["hit_rate"], style=style)
            handles[str(label)] = series_handle(str(label), style)
        ax_tps.set_ylabel("decode tokens/s")
        ax_hit.set_ylabel("hit rate (rounds on a prepared draft)")
        ax_hit.set_ylim(0, 1.02)
        ax_hit.set_xlabel("draft length γ")
        ax_hit.xaxis.set_major_locator(FixedLocator(sorted(part["gamma"].unique())))
        panel_title(ax_tps, scenario_title(scenario, panels))
    fig.suptitle("Nested speculation vs sequential drafting")
    legend_below(fig, handles)
    return fig


# ----------------------------------------------------------------------------- acceptance per position


def figure_positions(data: PlotData) -> Figure:
    """α_i per draft position with exact intervals, against the constant α̂ (line and band)."""
    pos = data.positions
    if pos.empty or int(pos["position"].max()) < 1:
        raise FigureSkipped(
            "only the first draft position was ever attempted (γ = 1 only, or every round "
            "rejected its first token): nothing to compare across positions"
        )
    panels = scenarios(pos)
    fig, (axes,) = new_panels(len(panels))
    handles: dict[str, object] = {}
    decaying = False
    for ax, scenario in zip(axes, panels):
        part, fits = select(pos, scenario), select(data.fits, scenario)
        named = list(series(part, data.palette))
        for i, (name, style, rows) in enumerate(named):
            rows = rows.sort_values("position")
            fit = select(fits, dict(zip(SERIES_KEYS, rows[SERIES_KEYS].iloc[0]))).iloc[0]
            span = np.array([-0.3, rows["position"].max() + 0.3])
            model_band(
                ax, span, [fit["alpha"]] * 2, [fit["alpha_lo"]] * 2, [fit["alpha_hi"]] * 2, colour=style["color"]
            )
            if fit["model"] == "decaying":
                decaying = True
                ax.plot(rows["position"], rows["predicted"], color=style["color"], linestyle=":", linewidth=1.4)
            measured_points(
                ax,
                rows["position"],
                rows["alpha_i"],
                rows["lo"],
                rows["hi"],
                style=style,
                offset=dodge(i, len(named)),
                connect=False,
            )
            handles[name] = series_handle(name, dict(style, linestyle="none"))
        top = int(part["position"].max())
        ax.set_xlim(-0.5, top + 0.5)
        ax.set_xticks(range(0, top + 1, 1 if top <= 10 else 2))
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("draft position i (0 = first drafted token)")
        ax.set_ylabel("P(i accepted | all before accepted)")
        panel_title(ax, scenario_title(scenario, panels))
    handles[f"measured α_i, {CI} (exact binomial)"] = Line2D([], [], color="0.3", marker="o", linestyle="none")
    handles[f"constant α̂ (all positions), {CI}"] = Line2D([], [], color="0.3", linestyle="--")
    if decaying:
        handles["decaying fit α̂·d^i (preferred)"] = Line2D([], [], color="0.3", linestyle=":")
    fig.suptitle("Acceptance per draft position vs the constant-α model")
    legend_below(fig, handles)
    return fig


# ----------------------------------------------------------------------------- α by workload / category


def grouped_bars(ax, frame: pd.DataFrame, x_col: str, palette: Palette, handles: dict) -> None:
    """Bars of α̂ with its interval per (drafter, tree) at each ``x_col`` value, α observed as ◆."""
    xs = sorted(frame[x_col].astype(str).unique())
    named = list(series(frame, palette))
    width = 0.8 / max(len(named), 1)
    for j, (name, style, rows) in enumerate(named):
        rows = rows.assign(_x=rows[x_col].astype(str)).set_index("_x").reindex(xs)
        at = np.arange(len(xs)) + (j - (len(named) - 1) / 2) * width
        err = np.vstack(
            [
                np.clip(rows["alpha"] - rows["alpha_lo"], 0, None).fillna(0),
                np.clip(rows["alpha_hi"] - rows["alpha"], 0, None).fillna(0),
            ]
        )
        hatch = None if style["linestyle"] == "-" else "//"
        ax.bar(
            at,
            rows["alpha"],
            width * 0.92,
            yerr=err,
            color=style["color"],
            hatch=hatch,
            edgecolor="white",
            capsize=3,
            error_kw={"elinewidth": 1.1, "ecolor": "0.15"},
            zorder=2,
        )
        ax.plot(at, rows["alpha_observed"], marker="D", markersize=5, color="black", linestyle="none", zorder=4)
        handles[name] = Patch(facecolor=style["color"], hatch=hatch, edgecolor="white")
    ax.set_xticks(range(len(xs)), xs, rotation=25 if len(xs) > 4 else 0, ha="right" if len(xs) > 4 else "center")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("acceptance rate α")


def alpha_handles(handles: dict) -> None:
    handles[f"α̂ (fitted, geometric model) with {CI}"] = Patch(facecolor="0.6")
    handles["α observed = accepted ÷ drafted"] = Line2D([], [], marker="D", color="black", linestyle="none")


def figure_alpha_workload(data: PlotData) -> Figure:
    """α̂ per workload (× target, sampling where several), bars per drafter."""
    if data.fits.empty:
        raise FigureSkipped("no speculative records (γ ≥ 1): no α to show")
    everything = scenarios(data.fits)
    frame = data.fits.assign(
        scenario=[
            scenario_title(dict(zip(SCENARIO_KEYS, row)), everything)
            for row in data.fits[SCENARIO_KEYS].itertuples(index=False)
        ]
    )
    n = frame["scenario"].nunique()
    fig = Figure(
        figsize=(max(6.5, 1.6 * n * max(1, frame.groupby(SERIES_KEYS).ngroups) ** 0.5 + 2), 4.8), layout="constrained"
    )
    ax = fig.subplots()
    handles: dict[str, object] = {}
    grouped_bars(ax, frame, "scenario", data.palette, handles)
    ax.set_xlabel("workload")
    alpha_handles(handles)
    fig.suptitle("Acceptance α by workload")
    legend_below(fig, handles, ncols=2)
    return fig


def figure_alpha_category(data: PlotData) -> Figure:
    """α̂ per category (MT-Bench's eight), one panel per workload that has categories."""
    if data.category_fits.empty:
        raise FigureSkipped("no workload with categories (e.g. MT-Bench) among the speculative records")
    panels = scenarios(data.category_fits)
    fig, (axes,) = new_panels(len(panels), ncols=2, size=(7.0, 4.2))
    handles: dict[str, object] = {}
    for ax, scenario in zip(axes, panels):
        grouped_bars(ax, select(data.category_fits, scenario), "category", data.palette, handles)
        ax.set_xlabel("prompt category")
        panel_title(ax, scenario_title(scenario, panels))
    alpha_handles(handles)
    fig.suptitle("Acceptance α by prompt category")
    legend_below(fig, handles, ncols=2)
    return fig


# ----------------------------------------------------------------------------- α vs context length

GAMMA_MARKERS = ("o", "s", "^", "D", "v", "P")


def figure_context(data: PlotData) -> Figure:
    """α̂ with its interval vs mean prompt length (log axis, one tick per bin) per drafter configuration."""
    table = data.context_bins
    if table.empty:
        raise FigureSkipped(
            "the records span fewer than two context-length bins (a long-context workload with two "
            "or more bins, e.g. long-context or long-context:bin=1k,7k)"
        )
    panels = scenarios(table)
    fig, (axes,) = new_panels(len(panels), ncols=2, size=(6.4, 4.4))
    handles: dict[str, object] = {}
    gammas = sorted(table["gamma"].unique())
    for ax, scenario in zip(axes, panels):
        part = select(table, scenario)
        lines = [
            (name, style, gamma, rows.sort_values("prompt_tokens"))
            for name, style, by_drafter in series(part, data.palette)
            for gamma, rows in by_drafter.groupby("gamma")
        ]
        for i, (name, style, gamma, rows) in enumerate(lines):
            label = f"{name} γ={gamma}"
            if len(gammas) > 1:  # one colour per drafter, one marker per γ
                style = dict(style, marker=GAMMA_MARKERS[gammas.index(gamma) % len(GAMMA_MARKERS)])
            x = np.log2(rows["prompt_tokens"].astype(float))
            measured_points(
                ax,
                x,
                rows["alpha"],
                rows["alpha_lo"],
                rows["alpha_hi"],
                style=style,
                offset=dodge(i, len(lines), width=0.12),
            )
            handles[label] = series_handle(label, style)
        ticks = part.groupby("context_bin")["prompt_tokens"].mean().sort_values()
        ax.set_xticks(np.log2(ticks.to_numpy(dtype=float)), [f"{b}\n{t:,.0f}" for b, t in ticks.items()])
        ax.set_xlim(np.log2(float(ticks.min())) - 0.4, np.log2(float(ticks.max())) + 0.4)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("context-length bin, mean prompt tokens (log scale)")
        ax.set_ylabel("acceptance α̂")
        panel_title(ax, scenario_title(scenario, panels))
    handles[f"α̂ (fitted, geometric model), {CI} (prompt bootstrap)"] = Line2D(
        [], [], color="0.3", marker="o", linestyle="none"
    )
    fig.suptitle("Acceptance α vs context length")
    legend_below(fig, handles)
    return fig


# ----------------------------------------------------------------------------- time split of a round


def round_split(configs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration: mean ms per round in drafting, verification and overhead, from
    `configuration_table` (round time = τ ÷ tokens/s; parts = its time shares)."""
    frame = configs.copy()
    round_ms = 1e3 * frame["tau"] / frame["tokens_per_s"]
    frame["draft"] = frame["draft_share"] * round_ms
    frame["verify"] = frame["verify_share"] * round_ms
    frame["overhead"] = (round_ms - frame["draft"] - frame["verify"]).clip(lower=0)
    frame["round_ms"] = round_ms
    frame["ms_per_token"] = 1e3 / frame["tokens_per_s"]
    return frame


def config_tick(row: pd.Series) -> str:
    """Short name of a configuration next to a bar; its colour names the drafter."""
    if row["drafter_label"] == BASELINE_LABEL:
        return "target only"
    schedule = row.get("schedule")
    if isinstance(schedule, str) and schedule != "fixed":
        return f"{schedule} γ≤{row['gamma']}"
    return f"γ={row['gamma']}" if row["tree"] == CHAIN else f"tree {row['tree']} γ={row['gamma']}"


def figure_time_split(data: PlotData) -> Figure:
    """Stacked bars: ms per round drafting / verifying / overhead for every configuration."""
    timed = data.configs[np.isfinite(data.configs["tokens_per_s"])] if len(data.configs) else data.configs
    if timed.empty:
        raise FigureSkipped("no live timings in the records")
    # a serving engine reports no draft / verify split (NaN): such rows are not drawn, never as all "overhead"
    split_known = timed["draft_share"].notna() & timed["verify_share"].notna()
    speculative = timed["gamma"] > 0
    if not (split_known & speculative).any():
        raise FigureSkipped(
            f"no per-round draft and verify times: {not_measured_by(data)} does not report them "
            "(docs/backends.md); the split is never invented"
        )
    left_out = timed[~split_known]
    split = round_split(timed[split_known])
    panels = scenarios(split)
    largest = split.groupby(SCENARIO_KEYS).size().max()
    fig, (axes,) = new_panels(len(panels), ncols=2, size=(6.0, 0.42 * largest + 1.4))
    order = {label: i for i, label in enumerate([BASELINE_LABEL, *data.palette.labels])}
    for ax, scenario in zip(axes, panels):
        part = select(split, scenario)
        part = part.assign(_o=part["drafter_label"].map(order)).sort_values(["_o", "tree", "gamma"], ascending=False)
        y = np.arange(len(part))
        left = np.zeros(len(part))
        for column, _, colour in COMPONENTS:
            ax.barh(y, part[column], left=left, color=colour, edgecolor="white", height=0.7, zorder=2)
            left += part[column].to_numpy()
        for yi, (_, row) in zip(y, part.iterrows()):
            ax.annotate(
                f"τ {row['tau']:.2f} → {row['ms_per_token']:.1f} ms/token",
                (row["round_ms"], yi),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=9,
            )
        ax.set_yticks(y, [config_tick(r) for _, r in part.iterrows()])
        for tick, label in zip(ax.get_yticklabels(), part["drafter_label"]):
            tick.set_color(data.palette.colour(label))
        ax.set_xlim(0, float(part["round_ms"].max()) * 1.6)
        ax.set_xlabel("mean time per round (ms)")
        panel_title(ax, scenario_title(scenario, panels))
        ax.grid(axis="y", visible=False)
    handles = {f"{name}": Patch(color=colour) for _, name, colour in COMPONENTS}
    for label in data.palette.labels:
        if (split["drafter_label"] == label).any():
            handles[f"{label} (tick colour)"] = Line2D(
                [], [], marker="s", markersize=9, linestyle="none", color=data.palette.colour(label)
            )
    fig.suptitle("Where a round's time goes: drafting, verification, overhead")
    if len(left_out):
        fig.text(
            0.5,
            0.0,
            f"not drawn: {len(left_out)} configuration(s) whose backend reports no per-round draft/verify times",
            ha="center",
            va="top",
            fontsize=9,
            color="0.35",
        )
    legend_below(fig, handles)
    return fig


def not_measured_by(data: PlotData) -> str:
    """The backends of the records, for a caption: 'backend vllm'."""
    backends = sorted(data.records["backend"].fillna("own").unique()) if "backend" in data.records else ["own"]
    return "backend " + ", ".join(map(str, backends))


# ----------------------------------------------------------------------------- predicted-speedup heat map

ALPHA_EDGES = np.linspace(0.0, 1.0, 51)


def speedup_norm(grids) -> LogNorm:
    """A log colour scale symmetric about 1× (2× faster and 2× slower equally strong), 1.25× to 8×."""
    values = np.concatenate([np.ravel(g) for g in grids])
    values = values[np.isfinite(values) & (values > 0)]
    reach = float(np.max(np.abs(np.log(values)))) if len(values) else 0.0
    limit = float(np.clip(np.exp(reach), 1.25, 8.0))
    return LogNorm(vmin=1 / limit, vmax=limit, clip=True)


def predicted_speedup_grid(fit, gammas: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """[alphas, gammas] speedup the measured cost model predicts at constant α (ρ as measured)."""

    rows = [
        predict_arrays(
            AcceptanceModel(float(a)), fit.cost, gammas, propose_rate=fit.propose_rate, tree_nodes=fit.tree_nodes
        )["tokens_per_s"]
        for a in alphas
    ]
    return np.asarray(rows) / fit.baseline_tokens_per_s


def label_offset(alpha: float, index: int) -> float:
    """Vertical offset (points) of the index-th measured label: alternately above and below the
    marker so neighbours do not collide, both on the inner side near the panel's top or bottom."""
    near, far = 11, 23
    if alpha < 0.12:
        return near if index % 2 == 0 else far
    if alpha > 0.88:
        return -near if index % 2 == 0 else -far
    return near if index % 2 else -near


def heatmap_panels(data: PlotData) -> list[tuple[dict, object, pd.Series]]:
    """(keys, CostFit, α̂ row) of every chain group with a cost fit, a baseline and an α fit."""
    out = []
    for keys, fit in data.cost_fits:
        if fit is None or keys["tree"] != CHAIN or fit.baseline_tokens_per_s <= 0:
            continue
        alpha = select(data.fits, keys)
        if len(alpha):
            out.append((keys, fit, alpha.iloc[0]))
    return out


def figure_heatmap(data: PlotData) -> Figure:
    """Predicted speedup over (γ, α) from each drafter's measured costs; measured configurations on top."""
    panels = heatmap_panels(data)
    if not panels:
        live = data.records[data.records["mode"] == "live"]
        if len(live) and not has_round_timings(live[live["gamma"] > 0]):
            raise FigureSkipped(
                f"no cost model to map: {not_measured_by(data)} reports no per-round draft and "
                "verify times, and a cost (c, verify time) is never invented"
            )
        raise FigureSkipped("no chain drafter with live timings and a target-only baseline: no cost model to map")
    gammas = np.arange(1, data.max_gamma + 1)
    alphas = (ALPHA_EDGES[:-1] + ALPHA_EDGES[1:]) / 2
    grids = [predicted_speedup_grid(fit, gammas, alphas) for _, fit, _ in panels]
    norm = speedup_norm(grids)
    fig, (axes,) = new_panels(len(panels), ncols=3, size=(5.0, 4.0))
    everything = scenarios(pd.DataFrame([k for k, _, _ in panels]))
    mesh = None
    for ax, (keys, fit, alpha), grid in zip(axes, panels, grids):
        mesh = ax.pcolormesh(
            np.arange(0.5, data.max_gamma + 1),
            ALPHA_EDGES,
            grid,
            cmap="RdBu",
            norm=norm,
            shading="flat",
            rasterized=True,
        )
        if np.nanmin(grid) < 1 < np.nanmax(grid):
            ax.contour(gammas, alphas, grid, levels=[1.0], colors="black", linewidths=1.2)
        measured = select(data.configs, keys)
        measured = measured[measured["gamma"] > 0]
        colour = data.palette.colour(keys["drafter_label"])
        ax.plot(
            measured["gamma"],
            [alpha["alpha"]] * len(measured),
            marker="o",
            markersize=8,
            linestyle="none",
            markerfacecolor="white",
            markeredgecolor=colour,
            markeredgewidth=2.2,
            zorder=4,
            clip_on=False,
        )
        for k, (_, row) in enumerate(measured.sort_values("gamma").iterrows()):
            ax.annotate(
                f"{row['speedup']:.2f}×",
                (row["gamma"], alpha["alpha"]),
                xytext=(0, label_offset(alpha["alpha"], k)),
                textcoords="offset points",
                ha="center",
                va="center",
                fontsize=9,
                zorder=5,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.8, "linewidth": 0},
            )
        ax.set_xlim(0.5, data.max_gamma + 0.5)
        ax.set_ylim(0, 1)
        ax.set_xticks(gammas if data.max_gamma <= 10 else gammas[::2])
        ax.set_xlabel("draft length γ")
        ax.set_ylabel("acceptance α")
        panel_title(
            ax,
            f"{scenario_title(keys, everything)} · {keys['drafter_label']}",
            f"c = {fit.c:.2f}, ρ = {fit.propose_rate:.2f}",
            color=colour,
            fontsize=11,
        )
        ax.grid(False)
    bar = fig.colorbar(mesh, ax=axes, label="predicted throughput speedup (×, log scale)", shrink=0.9)
    ticks = [t for t in (0.125, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8) if norm.vmin <= t <= norm.vmax]
    bar.ax.yaxis.set_major_locator(FixedLocator(ticks))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    handles = {
        "measured configuration at its α̂ (label: measured speedup)": Line2D(
            [], [], marker="o", markerfacecolor="white", markeredgecolor="0.3", markeredgewidth=2, linestyle="none"
        ),
        "break-even: predicted speedup 1×": Line2D([], [], color="black", linewidth=1.2),
    }
    fig.suptitle("Predicted speedup over (γ, α) from each drafter's measured costs")
    legend_below(fig, handles, ncols=2)
    return fig


# ----------------------------------------------------------------------------- MoE targets


def figure_moe_experts(data: PlotData) -> Figure:
    """τ and the expert-aware model's predicted speedup against distinct experts per verify, per configuration
    (`specbench.analysis.cost.moe.expert_aware_table`): the trade an MoE target's drafting makes."""
    if not is_moe(data.records):
        raise FigureSkipped("not an MoE target (no expert counts in the records)")
    try:
        table = expert_aware_table(data.records)
    except SpecbenchError as exc:
        raise FigureSkipped(str(exc)) from None
    table = table.rename(columns={"drafter": "drafter_label"})
    fig, (axes,) = new_panels(2, ncols=2)
    handles: dict[str, object] = {}
    for name, style, rows in series(table, data.palette):
        for ax, column in zip(axes, ("tau", "predicted_speedup")):
            ax.plot(rows["experts_per_verify"], rows[column], **{**style, "linestyle": "none"})
            for _, r in rows.iterrows():
                ax.annotate(
                    f"γ={r['gamma']}",
                    (r["experts_per_verify"], r[column]),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=8,
                )
        handles[name] = series_handle(name, style)
    experts, top_k = int(data.records["moe_experts"].dropna().iloc[0]), int(data.records["moe_top_k"].dropna().iloc[0])
    panel_title(axes[0], "τ vs experts touched per verify", f"{experts} experts per layer, top-{top_k}")
    panel_title(axes[1], "predicted speedup when experts are streamed", "expert-aware cost model")
    axes[0].set_ylabel("τ (tokens per target forward)")
    axes[1].set_ylabel("speedup over target-only")
    axes[1].axhline(1.0, color="0.35", linestyle=":", linewidth=1.0)
    for ax in axes:
        ax.set_xlabel("distinct experts per layer per verify")
    legend_below(fig, handles)
    return fig


# ----------------------------------------------------------------------------- registry and rendering


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


def figures_for(data: PlotData) -> tuple[FigureSpec, ...]:
    """The report's figures for ``data``: every one of `FIGURES`, then the strategy figures its sweep calls for."""
    return FIGURES + tuple(spec for spec, applies in LOAD_FIGURES + STRATEGY_FIGURES if applies(data))


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

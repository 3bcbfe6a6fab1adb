"""Figures over the draft length γ: tokens per target forward τ (measured, and the fitted α̂'s model), throughput
and speedup with the recommendation marked, and nested speculation beside the plain chain.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator

from specbench.analysis.acceptance_model import AcceptanceModel, expected_tokens
from specbench.analysis.strategies import strategy_table
from specbench.analysis.verdicts.decision import gamma_span
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
from specbench.figures.palette import BASELINE_LABEL, CHAIN
from specbench.figures.plot_data import (
    CI,
    SERIES_KEYS,
    PlotData,
    find_recommendation,
    gamma_axis,
    require_baseline,
    require_gammas,
    scenarios,
    series,
    spec_taus,
)
from specbench.figures.skipped import FigureSkipped  # re-exported: the figures' one skip type


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

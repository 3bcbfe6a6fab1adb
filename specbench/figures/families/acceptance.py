"""Figures of acceptance: the rate at each draft position, α̂ by workload and by category (grouped bars with
intervals), and α̂ against context length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

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
from specbench.figures.palette import Palette
from specbench.figures.plot_data import CI, SCENARIO_KEYS, SERIES_KEYS, PlotData, scenarios, series
from specbench.figures.skipped import FigureSkipped  # re-exported: the figures' one skip type


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

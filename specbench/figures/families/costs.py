"""Figures of what a round costs: its time split into drafting, verification and overhead; the predicted-speedup
heat map over (γ, α); and the experts an MoE target reads per verify.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from specbench.analysis.acceptance_model import AcceptanceModel
from specbench.analysis.cost.moe import expert_aware_table, is_moe
from specbench.analysis.cost.round_cost import predict_arrays
from specbench.errors import SpecbenchError
from specbench.figures.drawing import (
    legend_below,
    new_panels,
    panel_title,
    scenario_title,
    select,
    series_handle,
)
from specbench.figures.palette import BASELINE_LABEL, CHAIN
from specbench.figures.plot_data import SCENARIO_KEYS, PlotData, scenarios, series
from specbench.figures.skipped import FigureSkipped  # re-exported: the figures' one skip type
from specbench.records.timing import has_round_timings

COMPONENTS = (
    ("draft", "drafting", "#3A3A3A"),
    ("verify", "verification", "#9A9A9A"),
    ("overhead", "overhead", "#DADADA"),
)


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

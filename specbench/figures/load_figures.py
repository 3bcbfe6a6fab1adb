"""Figures against load: speedup vs load (per request and for the system), latency vs load.

Both read `specbench.analysis.load.verdicts.summary` (``data.load``): the per-load table of
`specbench.analysis.load.table.serving_table` and the crossovers of `specbench.analysis.load.crossover`. One column
of panels per workload scenario; the x axis is the load — requests in flight (closed loop) or requests
per second (open loop) — on a log scale, ticked at the measured levels; nothing is pooled across loads.

* ``speedup_vs_load``: top, the per-request decode speedup; bottom, the system output tokens/s speedup;
  one line per configuration (colour: drafter, line style: γ) with its 95 % interval, the 1× line, each
  configuration's crossover as a ▼ on the 1× line, and the crossover range of the configuration the
  verdict at the lowest load names (the crossover line's) shaded; each column's title gives the verdict
  at every load, in the verdict table's words. A quantity the backend did not measure (system tokens/s of records measured
  one request at a time) is not drawn: the panel says so.
* ``latency_vs_load``: TTFT (top) and ITL (bottom) at p50 (dotted), p90 (solid, with its interval) and p99
  (dashed), for the target-only run, the verdict's configuration and the configurations fastest at the
  lowest load (three in all).
* ``cost_vs_load`` (reads ``data.operating``, `specbench.analysis.load.operating`): cost per million output tokens
  (with a price) and joules per output token above idle (with an energy counter) against load, target only in
  black and every configuration, each with its 95 % prompt-bootstrap interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specbench.analysis.load.table import AXES as AXES_LABELS
from specbench.figures.drawing import (
    dodge,
    legend_below,
    measured_points,
    new_panels,
    panel_title,
    scenario_title,
    select,
)
from specbench.figures.skipped import FigureSkipped

GROUP_KEYS = ["target", "temperature", "top_p", "top_k", "workload", "backend"]
GAMMA_STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)))
GAMMA_MARKERS = ("o", "s", "^", "D", "v")  # latency_vs_load: the line styles name the percentiles there
BASELINE = "none"
SHOWN_CONFIGURATIONS = 3  # latency_vs_load: the target-only run and this many configurations


def _table(data) -> pd.DataFrame:
    load = getattr(data, "load", None)
    if not load or not load.get("table"):
        raise FigureSkipped(
            "the records hold one load level only (sweep with --concurrency 1,4,16 or "
            "--request-rate 1,2,4 on a serving backend)"
        )
    table = pd.DataFrame(load["table"])
    if table[load["axis"]].nunique() < 2:
        raise FigureSkipped("the records hold one load level only: nothing to draw against load")
    return table


def _scenarios(table: pd.DataFrame) -> list[dict]:
    keys = [k for k in GROUP_KEYS if k in table]
    unique = table[keys].drop_duplicates().sort_values(["workload"])
    return [dict(zip(keys, row)) for row in unique.itertuples(index=False)]


def _configurations(part: pd.DataFrame, axis: str, first: tuple | None = None) -> list[tuple[str, str, int]]:
    """(drafter_label, tree, γ) of the scenario's speculative rows: ``first`` (the configuration the crossover line
    and the verdict at the lowest load name) first, then the rest fastest at the lowest load first."""
    spec = part[part["gamma"] > 0]
    if spec.empty:
        return []
    lowest = spec[spec[axis] == spec[axis].min()].sort_values("speedup", ascending=False, na_position="last")
    order = [tuple(r) for r in lowest[["drafter_label", "tree", "gamma"]].itertuples(index=False)]
    rest = [tuple(r) for r in spec[["drafter_label", "tree", "gamma"]].drop_duplicates().itertuples(index=False)]
    named = [first] if first is not None and first in order + rest else []
    return list(dict.fromkeys(named + order + rest))


def _named(data, scenario: dict) -> tuple | None:
    """The configuration the workload's crossover line follows (the verdict's at the lowest load)."""
    for line in data.load.get("lines", []):
        if all(line.get(k) == v for k, v in scenario.items() if k in line):
            return line["drafter_label"], line.get("tree", "chain"), int(line["gamma"])
    return None


def verdict_caption(data, scenario: dict) -> list[str]:
    """The verdict at each load of a workload, one line each, in the words of the verdict table ('1: confident
    yes: ngram γ=2', '4: cannot tell (best so far ngram γ=2)')."""
    rows = [
        v
        for v in (v.as_dict() for v in data.load.get("verdicts", []))
        if all(v.get(k) == val for k, val in scenario.items() if k in v)
    ]
    return [f"{v['load']:g}: {v['headline']}" for v in sorted(rows, key=lambda v: v["load"])]


def _style(data, part: pd.DataFrame, label: str, tree: str, gamma: int) -> dict:
    """Colour: the drafter; line style (and, for the latency figure, marker): its γ."""
    gammas = sorted(part[part["drafter_label"] == label]["gamma"].unique())
    index = gammas.index(gamma) if gamma in gammas else 0
    style = data.palette.style(label, tree)
    style["linestyle"] = GAMMA_STYLES[index % len(GAMMA_STYLES)]
    style["marker"] = GAMMA_MARKERS[index % len(GAMMA_MARKERS)]
    return style


def _suptitle(fig, table: pd.DataFrame, text: str) -> None:
    """The figure's title, with a warning when its timings ran beside other busy processes."""
    if "timing_disturbed" in table and table["timing_disturbed"].fillna(False).astype(bool).any():
        text += "\n(timing disturbed: batches ran beside other busy processes — rerun on a quiet machine)"
    fig.suptitle(text)


def _crossover(data, scenario: dict, label: str, tree: str, gamma: int, which: str) -> dict | None:
    for c in data.load.get("crossovers", []):
        if all(c.get(k) == v for k, v in scenario.items()) and (c["drafter_label"], c["tree"], int(c["gamma"])) == (
            label,
            tree,
            gamma,
        ):
            return c[which]
    return None


def _speedup_panel(ax, data, part: pd.DataFrame, scenario: dict, axis: str, which: str, handles: dict) -> None:
    column = "speedup" if which == "per_request" else "system_speedup"
    ax.axhline(1.0, color="0.35", linestyle="--", linewidth=1.1, zorder=1)
    configs = _configurations(part, axis, _named(data, scenario))
    measured = part[part["gamma"] > 0][column].notna().any() if len(part) else False
    if not measured:
        ax.text(
            0.5,
            0.5,
            "not measured by this backend\n(no batch wall time in the records)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="0.4",
        )
    values = [1.0]
    for i, (label, tree, gamma) in enumerate(configs if measured else []):
        rows = select(part, {"drafter_label": label, "tree": tree, "gamma": gamma}).sort_values(axis)
        rows = rows[rows[column].notna()]
        if rows.empty:
            continue
        style = _style(data, part, label, tree, gamma)
        offset = np.exp(dodge(i, len(configs), 0.12))  # a log axis: dodge multiplicatively
        x = rows[axis].to_numpy(float) * offset
        measured_points(ax, np.log(x), rows[column], rows[f"{column}_lo"], rows[f"{column}_hi"], style=style)
        values.extend(v for v in rows[[f"{column}_lo", f"{column}_hi"]].to_numpy(float).ravel() if np.isfinite(v))
        handles[f"{label} γ={gamma}"] = Line2D([], [], **style, linewidth=1.8, markersize=6)
        found = _crossover(data, scenario, label, tree, gamma, which)
        if found and found.get("point") and not found.get("below_all"):
            ax.plot(
                [np.log(found["point"])],
                [1.0],
                marker="v",
                markersize=10,
                color=style["color"],
                markeredgecolor="black",
                linestyle="none",
                zorder=5,
            )
            if i == 0:  # the configuration the verdict at the lowest load names: its crossover range
                lo = found["lo"] if found.get("lo") else part[axis].min()
                hi = found["hi"] if found.get("hi") else part[axis].max() * 1.25
                ax.axvspan(np.log(lo), np.log(hi), color=style["color"], alpha=0.10, zorder=0)
    finite = [v for v in values if np.isfinite(v)]
    ax.set_ylim(min(0.5, min(finite) * 0.9), max(finite) * 1.1)
    ax.set_ylabel("per-request decode speedup (×)" if which == "per_request" else "system output tokens/s speedup (×)")


def _log_axis(ax, loads, label: str) -> None:
    """A load axis for x values already drawn as log(load) (so error bars and dodging stay simple)."""
    ticks = sorted(set(float(v) for v in loads))
    ax.set_xticks([np.log(v) for v in ticks], [f"{v:g}" for v in ticks])
    ax.set_xlim(np.log(ticks[0]) - 0.25, np.log(ticks[-1]) + 0.25)
    ax.set_xlabel(label)


def figure_speedup_vs_load(data) -> Figure:
    """Per-request (top) and system (bottom) speedup against load, one column per workload."""
    table = _table(data)
    axis, label = data.load["axis"], data.load["axis_label"]
    if not (table["gamma"] > 0).any() or "speedup" not in table:
        raise FigureSkipped("no speculative configuration paired with a target-only run at the same load")
    panels = _scenarios(table)
    fig, (upper, lower) = new_panels(len(panels), nrows_per=2, size=(5.6, 3.6), sharex=False)
    handles: dict[str, object] = {}
    for ax_req, ax_sys, scenario in zip(upper, lower, panels):
        part = select(table, scenario)
        _speedup_panel(ax_req, data, part, scenario, axis, "per_request", handles)
        _speedup_panel(ax_sys, data, part, scenario, axis, "system", handles)
        for ax in (ax_req, ax_sys):
            _log_axis(ax, part[axis], label)
        panel_title(ax_req, scenario_title(scenario, panels), *verdict_caption(data, scenario), fontsize=10)
    handles["target only (1×)"] = Line2D([], [], color="0.35", linestyle="--")
    handles["crossover: where the speedup crosses 1 (interpolated)"] = Line2D(
        [], [], marker="v", color="0.3", markeredgecolor="black", linestyle="none", markersize=9
    )
    handles["95% range of the crossover (the verdict's configuration at the lowest load)"] = Patch(
        color="0.3", alpha=0.15
    )
    _suptitle(fig, table, "Speedup against load: per request (top) and for the system (bottom)")
    legend_below(fig, handles)
    return fig


def figure_latency_vs_load(data) -> Figure:
    """TTFT (top) and ITL (bottom) percentiles against load, one column per workload."""
    table = _table(data)
    axis, label = data.load["axis"], data.load["axis_label"]
    panels = _scenarios(table)
    fig, (upper, lower) = new_panels(len(panels), nrows_per=2, size=(5.6, 3.6), sharex=False)
    handles: dict[str, object] = {}
    drawn = False
    for ax_ttft, ax_itl, scenario in zip(upper, lower, panels):
        part = select(table, scenario)
        shown = [(BASELINE, "chain", 0)] + _configurations(part, axis, _named(data, scenario))[:SHOWN_CONFIGURATIONS]
        for ax, metric in ((ax_ttft, "ttft"), (ax_itl, "itl")):
            for i, (name, tree, gamma) in enumerate(shown):
                rows = select(part, {"drafter_label": name, "tree": tree, "gamma": gamma}).sort_values(axis)
                if rows.empty or rows[f"{metric}_p90_s"].isna().all():
                    continue
                drawn = True
                style = (
                    _style(data, part, name, tree, gamma)
                    if gamma
                    else {"color": "0.35", "linestyle": "-", "marker": "o"}
                )
                x = np.log(rows[axis].to_numpy(float)) + dodge(i, len(shown), 0.12)
                ms = 1e3
                measured_points(
                    ax,
                    x,
                    rows[f"{metric}_p90_s"] * ms,
                    rows[f"{metric}_p90_lo_s"] * ms,
                    rows[f"{metric}_p90_hi_s"] * ms,
                    style={**style, "linestyle": "-"},
                )
                ax.plot(x, rows[f"{metric}_p50_s"] * ms, color=style["color"], linestyle=":", linewidth=1.2)
                ax.plot(x, rows[f"{metric}_p99_s"] * ms, color=style["color"], linestyle="--", linewidth=1.2)
                handles["target only" if not gamma else f"{name} γ={gamma}"] = Line2D(
                    [], [], color=style["color"], marker=style["marker"], linestyle="-"
                )
            ax.set_ylabel(f"{'TTFT' if metric == 'ttft' else 'ITL (per-request mean)'} (ms)")
            ax.set_ylim(bottom=0)
            _log_axis(ax, part[axis], label)
        panel_title(ax_ttft, scenario_title(scenario, panels))
    if not drawn:
        raise FigureSkipped("no request of these records has a TTFT or an ITL")
    handles["p90 with its 95% interval"] = Line2D([], [], color="0.3", linestyle="-", marker="o")
    handles["p50"] = Line2D([], [], color="0.3", linestyle=":")
    handles["p99"] = Line2D([], [], color="0.3", linestyle="--")
    _suptitle(fig, table, "Latency against load: time to first token (top), inter-token latency (bottom)")
    legend_below(fig, handles)
    return fig


# (quantity column, y label, what the panel needs) of the cost figure's rows
COST_ROWS = (
    ("cost_per_mtok", "cost per M output tokens", "a price: --price-per-hour or the sweep key price_per_hour"),
    ("joules_per_token", "J per output token (above idle)", "an energy counter on the machine"),
)


def _operating_table(data) -> pd.DataFrame:
    operating = getattr(data, "operating", None)
    if not operating or not operating.get("table"):
        raise FigureSkipped("no live records to price")
    table = pd.DataFrame(operating["table"])
    axis = "request_rate" if (table["request_rate"].fillna(0) > 0).any() else "concurrency"
    if table[axis].nunique() < 2:
        raise FigureSkipped("the records hold one load level only: nothing to draw against load")
    return table


def figure_cost_vs_load(data) -> Figure:
    """Cost per million output tokens (and, where measured, joules per token) against load: target only and every
    configuration, with 95% intervals; one column per workload."""
    table = _operating_table(data)
    axis = "request_rate" if (table["request_rate"].fillna(0) > 0).any() else "concurrency"
    rows = [r for r in COST_ROWS if r[0] in table and table[r[0]].notna().any()]
    if not rows:
        raise FigureSkipped("nothing to draw: cost needs " + COST_ROWS[0][2] + "; energy needs " + COST_ROWS[1][2])
    panels = _scenarios(table)
    fig, grid = new_panels(len(panels), nrows_per=len(rows), size=(5.6, 3.6), sharex=False)
    handles: dict[str, object] = {}
    for column, scenario in enumerate(panels):
        part = select(table, scenario)
        spec = (
            part[part["gamma"] > 0][["drafter_label", "tree", "gamma"]]
            .drop_duplicates()
            .sort_values(["drafter_label", "tree", "gamma"])
        )
        shown = [(BASELINE, "chain", 0)] + [tuple(r) for r in spec.itertuples(index=False)]
        for row, (quantity, ylabel, _) in enumerate(rows):
            ax = grid[row][column]
            for i, (name, tree, gamma) in enumerate(shown):
                points = select(part, {"drafter_label": name, "tree": tree, "gamma": gamma}).sort_values(axis)
                points = points[points[quantity].notna()]
                if points.empty:
                    continue
                style = (
                    _style(data, part, name, tree, gamma)
                    if gamma
                    else {"color": "0.2", "linestyle": "-", "marker": "o"}
                )
                x = np.log(points[axis].to_numpy(float)) + dodge(i, len(shown), 0.12)
                measured_points(
                    ax, x, points[quantity], points[f"{quantity}_lo"], points[f"{quantity}_hi"], style=style
                )
                handles["target only" if not gamma else f"{name} γ={gamma}"] = Line2D(
                    [], [], color=style["color"], marker=style["marker"], linestyle=style["linestyle"]
                )
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            _log_axis(ax, part[axis], AXES_LABELS[axis])
        panel_title(grid[0][column], scenario_title(scenario, panels))
    missing = [r for r in COST_ROWS if r not in rows]
    price = (data.operating or {}).get("price_per_hour")
    title = (
        "What a million output tokens cost against load"
        + (f" at {price:g} per hour" if price else "")
        + "".join(f"\n({r[0].replace('_', ' ')} not drawn: it needs {r[2]})" for r in missing)
    )
    _suptitle(fig, table, title)
    legend_below(fig, handles)
    return fig

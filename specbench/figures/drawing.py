"""Drawing helpers every figure module shares: panels, points with intervals, bands, the legend below.

Figures are built on `matplotlib.figure.Figure` objects with the Agg canvas — pyplot is never imported —
under the style `specbench.figures.plot.STYLE` applies.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from specbench.analysis.load.table import LOAD_KEYS, load_label

MIN_WIDTH = 8.0  # inches: room for the legend below a single panel
TITLE_WIDTH = 50  # characters per line of a panel title


def new_panels(
    n: int, *, ncols: int = 3, size: tuple[float, float] = (5.2, 3.8), nrows_per: int = 1, sharex: bool = False
):
    """A constrained-layout Figure with ``n`` panels (× ``nrows_per`` rows each); returns (fig, axes[row][i])."""
    ncols = max(1, min(n, ncols))
    blocks = math.ceil(n / ncols)
    width = max(MIN_WIDTH, size[0] * ncols)
    fig = Figure(figsize=(width, size[1] * blocks * nrows_per + 1.0), layout="constrained")
    grid = fig.subplots(blocks * nrows_per, ncols, squeeze=False, sharex="col" if sharex else False)
    rows = [[grid[(i // ncols) * nrows_per + r, i % ncols] for i in range(n)] for r in range(nrows_per)]
    used = {id(ax) for row in rows for ax in row}
    for ax in grid.ravel():
        if id(ax) not in used:
            ax.set_visible(False)
    return fig, rows


def dodge(index: int, count: int, width: float = 0.2) -> float:
    """Horizontal offset of series ``index`` of ``count`` so error bars at one x do not overlap."""
    return 0.0 if count < 2 else (index / (count - 1) - 0.5) * width


def measured_points(ax, x, y, lo=None, hi=None, *, style: dict, offset: float = 0.0, connect: bool = True) -> None:
    """Measured values with error bars [lo, hi] (none when lo/hi are absent), joined by a line."""
    x, y = np.asarray(x, dtype=float) + offset, np.asarray(y, dtype=float)
    yerr = None
    if lo is not None and hi is not None:
        below = np.clip(np.nan_to_num(y - np.asarray(lo, dtype=float)), 0, None)
        above = np.clip(np.nan_to_num(np.asarray(hi, dtype=float) - y), 0, None)
        yerr = np.vstack([below, above])
    kwargs = dict(style, linestyle=style["linestyle"] if connect else "none")
    ax.errorbar(x, y, yerr=yerr, capsize=3, linewidth=1.8, markersize=6, elinewidth=1.2, zorder=3, **kwargs)


def model_band(ax, x, y, lo=None, hi=None, *, colour: str, linestyle="--", linewidth: float = 1.4) -> None:
    """A model curve with its confidence band (a light fill between lo and hi)."""
    ax.plot(x, y, color=colour, linestyle=linestyle, linewidth=linewidth, zorder=2)
    if lo is not None and hi is not None:
        ax.fill_between(x, lo, hi, color=colour, alpha=0.13, linewidth=0, zorder=1)


def series_handle(name: str, style: dict) -> Line2D:
    return Line2D([], [], label=name, linewidth=1.8, markersize=6, **style)


def legend_below(fig: Figure, handles: dict[str, object], *, ncols: int = 3) -> None:
    """One legend for the whole figure, outside the panels below them (it never covers data);
    as many columns as the figure's width holds (about 4 inches per entry)."""
    if handles:
        fits = max(1, int(fig.get_figwidth() // 4.0))
        fig.legend(
            list(handles.values()),
            list(handles.keys()),
            loc="outside lower center",
            ncols=min(ncols, fits, len(handles)),
            frameon=False,
        )


def panel_title(ax, *lines: str, **kwargs) -> None:
    """A panel title, each line wrapped to `TITLE_WIDTH` characters."""
    ax.set_title("\n".join(textwrap.fill(line, TITLE_WIDTH) for line in lines if line), **kwargs)


def select(frame: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """Rows of ``frame`` matching every key in ``keys`` (keys the frame lacks are ignored)."""
    if frame.empty:
        return frame
    mask = np.ones(len(frame), dtype=bool)
    for key, value in keys.items():
        if key in frame.columns:
            mask &= (frame[key] == value).to_numpy()
    return frame[mask]


def scenario_title(scenario: dict, everything: list[dict]) -> str:
    """The workload, plus the target, sampling and load level where the folder holds several."""
    parts = [str(scenario["workload"])]
    if len({s["target"] for s in everything}) > 1:
        parts.append(str(scenario["target"]))
    if len({(s["temperature"], s["top_p"], s["top_k"]) for s in everything}) > 1:
        parts.append(f"T={scenario['temperature']:g}")
    for key in LOAD_KEYS:
        if key in scenario and len({s.get(key) for s in everything}) > 1:
            parts.append(load_label(key, scenario[key]))
    return " · ".join(parts)

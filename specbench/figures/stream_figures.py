"""The online-adaptation figure: acceptance, τ and speedup against the position in a stream, per configuration.

One column per stream scenario (target, sampling, workload) that ran an online configuration; three rows:
α, τ and the speedup over the target alone. Each configuration keeps its colour (`Palette`); faint dots are
its prompts, the line its trailing window of `WINDOW` prompts (never across a shift point) with the
window's interval as a band (`specbench.analysis.stream_adaptation`). In the speedup row the solid line leaves the
training out (training on hardware of its own), the dotted one charges it (training on the serving
machine). Dashed vertical lines mark the shift points, labelled with the segment that starts there; the
panel title gives the verdict on whether online adaptation pays.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from specbench.analysis.stream_adaptation import (
    WINDOW,
    answer_label,
    has_online,
    online_verdict,
    per_prompt,
    shift_points,
    window_rows,
)
from specbench.figures.skipped import FigureSkipped
from specbench.records.summary import BASELINE_KEYS

ROWS = (
    ("alpha", "acceptance α (accepted ÷ drafted)"),
    ("tau", "τ (tokens per target forward)"),
    ("speedup", "speedup over the target alone (×)"),
)


def has_online_records(data) -> bool:
    """Whether the report draws the figure: the sweep ran an online configuration."""
    return has_online(data.records)


def figure_online(data) -> Figure:
    """α, τ and speedup vs stream position for static and online configurations, shift points marked."""
    prompts = per_prompt(data.records)
    if prompts.empty:
        raise FigureSkipped("no online-adaptation records (sweep key strategy: {name: online, ...})")
    windows = window_rows(prompts)
    scenarios = prompts[BASELINE_KEYS].drop_duplicates().to_dict("records")
    fig = Figure(figsize=(max(9.0, 7.5 * len(scenarios)), 10.5), layout="constrained")
    axes = fig.subplots(len(ROWS), len(scenarios), squeeze=False, sharex="col")
    handles: dict[str, object] = {}
    for col, scenario in enumerate(scenarios):
        mine = _select(prompts, scenario)
        rolled = _select(windows, scenario)
        for label, part in mine.groupby("drafter_label", sort=True):
            style = data.palette.style(label)
            line = rolled[rolled["drafter_label"] == label].sort_values("position")
            for row, (column, _) in enumerate(ROWS):
                ax = axes[row][col]
                ax.scatter(part["position"], part[column], color=style["color"], s=10, alpha=0.25, linewidths=0)
                ax.plot(line["position"], line[column], color=style["color"], linewidth=1.8)
                ax.fill_between(
                    line["position"],
                    line[f"{column}_lo"],
                    line[f"{column}_hi"],
                    color=style["color"],
                    alpha=0.12,
                    linewidth=0,
                )
                if column == "speedup" and (part["strategy"] == "online").any():
                    ax.plot(
                        line["position"],
                        line["speedup_with_training"],
                        color=style["color"],
                        linewidth=1.4,
                        linestyle=":",
                    )
            handles[label] = Line2D([], [], color=style["color"], linewidth=1.8, label=label)
        for row, (column, name) in enumerate(ROWS):
            ax = axes[row][col]
            _mark_shifts(ax, shift_points(mine), top=row == 0)
            ax.set_ylabel(name)
            if column == "speedup":
                ax.axhline(1.0, color="0.5", linewidth=0.8)
            if column == "alpha":
                ax.set_ylim(bottom=0)
        axes[-1][col].set_xlabel("position in the stream (prompt)")
        verdict = online_verdict(prompts, scenario)
        title = str(scenario["workload"])
        if verdict is not None:
            answers = {v["deployment"]: answer_label(v) for v in verdict["deployments"]}
            title += (
                f"\nonline vs static — training elsewhere: {answers['separate']}; training here: {answers['shared']}"
            )
        axes[0][col].set_title(title, fontsize=11, pad=18)
    handles["trailing window of each (training charged: dotted)"] = Line2D([], [], color="0.3", linestyle=":")
    fig.legend(
        list(handles.values()), list(handles), loc="outside lower center", ncols=min(2, len(handles)), frameon=False
    )
    fig.suptitle(f"Online adaptation over the stream (lines: trailing {WINDOW}-prompt windows; dashed: shift points)")
    return fig


def _select(frame: pd.DataFrame, scenario: dict) -> pd.DataFrame:
    mask = np.ones(len(frame), dtype=bool)
    for key, value in scenario.items():
        mask &= (frame[key] == value).to_numpy()
    return frame[mask]


def _mark_shifts(ax, shifts: list[tuple[int, str]], top: bool) -> None:
    for position, segment in shifts:
        ax.axvline(position - 0.5, color="0.35", linestyle="--", linewidth=1.0)
        if top:
            ax.annotate(
                segment,
                (position - 0.5, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(3, 2),
                textcoords="offset points",
                fontsize=9,
                color="0.25",
                va="bottom",
            )

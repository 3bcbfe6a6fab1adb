"""The verify-length schedule figure: every measured chain configuration of a scenario, fixed γ and
dynamic schedules (`specbench.engine.strategies.schedule`) side by side, as speedup over the target alone.

One panel per scenario (workload, sampling) that measured a dynamic schedule. Bars: measured
speedup with its interval (`Recommendation.options`), grey for fixed γ, a colour per schedule;
the label gives γ (a dynamic schedule's cap) and the mean draft length its rounds chose
(Σ drafted ÷ Σ rounds). The dashed line is the best fixed γ; the panel title carries the
recommendation's verdict on the best dynamic schedule against it
(`specbench.analysis.recommendation.schedule_comparison`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from specbench.analysis.recommendation.schedule_comparison import answer_word
from specbench.figures.skipped import FigureSkipped

FIXED_COLOUR = "#9A9A9A"
SCHEDULE_COLOURS = {"heuristic": "#1F77B4", "threshold": "#2CA02C", "dspark": "#D62728"}
OTHER_COLOUR = "#9467BD"
CHAIN = "chain"


def schedule_colour(schedule: str) -> str:
    if schedule == "fixed":
        return FIXED_COLOUR
    return SCHEDULE_COLOURS.get(schedule.split("(")[0], OTHER_COLOUR)


def mean_drafted(records: pd.DataFrame, keys: dict, option: pd.Series) -> float:
    """Σ drafted ÷ Σ rounds of one configuration's live records in a scenario: the mean chosen length."""
    rows = records[
        (records["mode"] == "live")
        & (records["drafter_label"] == option["drafter_label"])
        & (records["tree"] == option["tree"])
        & (records["gamma"] == option["gamma"])
        & (records["schedule"].fillna("fixed") == option["schedule"])
    ]
    for key, value in keys.items():
        if key in rows:
            rows = rows[rows[key] == value]
    rounds = rows["rounds"].sum()
    return float(rows["drafted"].sum() / rounds) if rounds else float("nan")


def schedule_panels(recommendations: list) -> list:
    """Recommendations whose scenario measured a dynamic schedule next to fixed γ."""
    return [r for r in recommendations if getattr(r, "schedules", None) is not None and not r.options.empty]


def figure_schedules(data) -> Figure:
    """Speedup of each chain configuration, fixed γ vs dynamic schedules, per scenario."""
    panels = schedule_panels(data.recommendations)
    if not panels:
        raise FigureSkipped(
            "no scenario measured a dynamic verify-length schedule next to fixed γ (sweep key schedules)"
        )
    largest = max(len(r.options) for r in panels)
    fig = Figure(
        figsize=(max(8.0, 6.5 * min(len(panels), 2)), (0.42 * largest + 1.8) * ((len(panels) + 1) // 2)),
        layout="constrained",
    )
    axes = fig.subplots((len(panels) + 1) // 2, min(len(panels), 2), squeeze=False).ravel()
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    used = set()
    for ax, rec in zip(axes, panels):
        options = rec.options[rec.options["tree"] == CHAIN].sort_values(["drafter_label", "schedule", "gamma"])
        y = np.arange(len(options))
        colours = [schedule_colour(s) for s in options["schedule"]]
        used.update(options["schedule"].map(lambda s: s.split("(")[0]))
        speed = options["speedup"].to_numpy(dtype=float)
        lo, hi = options["lo"].to_numpy(dtype=float), options["hi"].to_numpy(dtype=float)
        has = np.isfinite(lo) & np.isfinite(hi)
        ax.barh(y, speed, color=colours, height=0.7, zorder=2)
        ax.errorbar(
            speed[has],
            y[has],
            xerr=[speed[has] - lo[has], hi[has] - speed[has]],
            fmt="none",
            ecolor="black",
            capsize=3,
            zorder=3,
        )
        ticks = []
        for _, option in options.iterrows():
            cap = "γ" if option["schedule"] == "fixed" else "γ ≤ "
            mean = mean_drafted(data.records, rec.keys, option)
            name = "" if option["schedule"] == "fixed" else f"{option['schedule']} "
            ticks.append(f"{option['drafter_label']} {name}{cap}{option['gamma']} (mean {mean:.1f})")
        ax.set_yticks(y, ticks)
        fixed = options[options["schedule"] == "fixed"]
        if len(fixed):
            ax.axvline(float(fixed["speedup"].max()), color="black", linestyle="--", linewidth=1.2)
        ax.axvline(1.0, color="0.5", linewidth=0.8)
        ax.set_xlabel(f"{rec.objective} speedup over the target alone (×)")
        verdict = rec.schedules
        ratio = f"{verdict['ratio']:.2f}×" + (
            f" [{verdict['lo']:.2f}, {verdict['hi']:.2f}]" if np.isfinite(verdict["lo"]) else ""
        )
        ax.set_title(
            f"{rec.keys['workload']} · T={rec.keys['temperature']:g}\nbest dynamic vs best fixed γ: "
            f"{ratio} — {answer_word(verdict)}",
            fontsize=11,
        )
        ax.grid(axis="y", visible=False)
    handles = {"fixed γ": Patch(color=FIXED_COLOUR)}
    handles.update({name: Patch(color=schedule_colour(name)) for name in sorted(used) if name != "fixed"})
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=len(handles), frameon=False)
    fig.suptitle("Verify-length schedules vs fixed γ (dashed: the best fixed γ)")
    return fig

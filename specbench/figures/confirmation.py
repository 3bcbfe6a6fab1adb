"""Predicted against realized: one row per target of `specbench confirm` (`specbench.analysis.recommendation.confirmation`).

For the configuration the verdict named, the sweep's predicted speedup with its adjusted interval (grey) and the
speedup realized on fresh prompts with its look-adjusted interval (green: held, red: missed, orange: not settled
yet); below it, every contender's realized speedup over the target alone (open markers). The vertical line is 1×
(no speedup). The row's label says held or missed and, at a load, a cliff.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from specbench.analysis.recommendation.confirm_report import Report
from specbench.figures.skipped import FigureSkipped

COLOURS = {"held": "#2CA02C", "missed": "#D62728"}
OPEN_COLOUR = "#FF7F0E"
PREDICTED_COLOUR = "#9A9A9A"


def _errorbar(
    ax,
    y: float,
    point: float,
    lo: float,
    hi: float,
    colour: str,
    label: str | None,
    marker: str = "o",
    filled: bool = True,
) -> None:
    has = np.isfinite(lo) and np.isfinite(hi)
    xerr = [[point - lo], [hi - point]] if has else None
    ax.errorbar(
        [point],
        [y],
        xerr=xerr,
        fmt=marker,
        color=colour,
        ecolor=colour,
        capsize=4,
        markersize=7,
        markerfacecolor=colour if filled else "white",
        label=label,
        zorder=3,
    )


def figure_confirmation(confirmation: Report | None) -> Figure:
    if confirmation is None:
        raise FigureSkipped(
            "not confirmed: run `specbench confirm RESULTS` to check the recommendation on fresh prompts"
        )
    states = [s for s in confirmation.targets.values() if s.last is not None]
    if not states:
        raise FigureSkipped("the confirmation has no finished look yet")
    rows = sum(1 + len(s.last.regret.contenders) for s in states)
    fig = Figure(figsize=(10, 1.2 + 0.45 * rows + 0.5 * len(states)), layout="constrained")
    ax = fig.add_subplot()
    y, ticks, labels, seen = 0.0, [], [], set()
    for state in states:
        target, last = state.target, state.last
        prediction, check = target.prediction, last.check
        if prediction is not None and np.isfinite(prediction.speedup):
            label = "predicted by the sweep (adjusted interval)"
            _errorbar(
                ax,
                y + 0.18,
                prediction.speedup,
                prediction.lo,
                prediction.hi,
                PREDICTED_COLOUR,
                None if label in seen else label,
                "s",
            )
            seen.add(label)
        if check is not None:
            realized = check.realized
            outcome = str(check.outcome)
            label = f"realized on fresh prompts: {outcome}"
            _errorbar(
                ax,
                y - 0.18,
                realized.ratio,
                realized.lo,
                realized.hi,
                COLOURS.get(outcome, OPEN_COLOUR),
                None if label in seen else label,
            )
            seen.add(label)
            verdict = outcome
        else:
            verdict = "no prediction"
        ticks.append(y)
        labels.append(f"{target.name}: {target.chosen.name}\n{verdict}" + ("\n" + "cliff" if last.cliff else ""))
        versus = {c.arm: c for c in last.versus_baseline}
        for arm in target.contenders:
            y -= 1.0
            c = versus.get(arm.name)
            if c is None or not np.isfinite(c.ratio):
                continue
            label = "contender, realized (over the target alone)"
            _errorbar(ax, y, c.ratio, c.lo, c.hi, "0.35", None if label in seen else label, "D", filled=False)
            seen.add(label)
            ticks.append(y)
            labels.append(f"  {arm.name}" + (" (dropped)" if arm.name in state.dropped else ""))
        y -= 1.5
    ax.axvline(1.0, color="0.5", linewidth=0.8)
    ax.set_yticks(ticks, labels, fontsize=9)
    ax.set_xlabel("speedup over the target alone (tokens/s ratio, same fresh prompts)")
    ax.grid(axis="y", visible=False)
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    fig.suptitle("The recommendation on fresh prompts: predicted against realized")
    return fig

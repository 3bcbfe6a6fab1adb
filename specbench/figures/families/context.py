"""The figure against context length: speedup and α̂ per γ at each bin's mean prompt length, with the crossover
length marked (`specbench.analysis.context`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from specbench.figures.drawing import legend_below, measured_points, new_panels, panel_title, series_handle
from specbench.figures.plot_data import PlotData
from specbench.figures.skipped import FigureSkipped

MARKERS = ("o", "s", "^", "D", "v", "P")
GAMMA_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")  # Okabe–Ito: colour-blind safe


def context_series(entry: dict, fits: pd.DataFrame) -> list[dict]:
    """One series per measured (drafter, tree, γ) of a scenario's context summary ``entry``, shortest bin first:
    x (mean prompt tokens), its speedups with intervals, and α̂ with intervals from ``fits``
    (`specbench.analysis.context_bins.fit_by_context_bin`; NaN where a bin has no fit)."""
    frame = pd.DataFrame(entry["speedups"])
    if frame.empty:
        return []
    out = []
    for (label, tree, gamma), rows in frame.groupby(["drafter_label", "tree", "gamma"], sort=True):
        rows = rows.sort_values("prompt_tokens")
        alphas = []
        for b in rows["context_bin"]:
            mask = (
                (fits["context_bin"].astype(str) == b)
                & (fits["workload"] == entry["workload"])
                & (fits["temperature"] == entry["temperature"])
                & (fits["drafter_label"] == label)
                & (fits["tree"] == tree)
                & (fits["gamma"] == gamma)
                if len(fits)
                else pd.Series(dtype=bool)
            )
            hit = fits[mask] if len(fits) else fits
            alphas.append(
                tuple(float(hit[c].iloc[0]) for c in ("alpha", "alpha_lo", "alpha_hi")) if len(hit) else (math.nan,) * 3
            )
        out.append(
            {
                "drafter_label": label,
                "tree": tree,
                "gamma": int(gamma),
                "bins": list(rows["context_bin"]),
                "x": list(rows["prompt_tokens"]),
                "speedup": list(rows["speedup"]),
                "lo": list(rows["lo"]),
                "hi": list(rows["hi"]),
                "alpha": [a[0] for a in alphas],
                "alpha_lo": [a[1] for a in alphas],
                "alpha_hi": [a[2] for a in alphas],
            }
        )
    return out


def crossover_mark(entry: dict) -> dict | None:
    """Where the figure marks the crossover: the named configuration, its point and the [lo, hi] span (the ends
    clipped to the lengths measured); None when its speedup does not cross 1 within them."""
    line = entry.get("crossover")
    if not line or line["crossover"]["point"] is None:
        return None
    c = line["crossover"]
    loads = c["loads"]
    return {
        "drafter_label": line["drafter_label"],
        "gamma": line["gamma"],
        "point": c["point"],
        "lo": loads[0] if c["lo"] is None or c["lo_at_first"] else c["lo"],
        "hi": loads[-1] if c["hi"] is None else c["hi"],
    }


def no_crossing_title(entry: dict) -> str:
    """The panel's title when the named configuration's speedup does not cross 1 within the lengths measured:
    which side it stays on, and where its interval stops clearing 1 (the crossover rule's words, shortened)."""
    line = entry.get("crossover")
    if not line:
        return "no crossover: no configuration to follow across the bins"
    c = line["crossover"]
    name = f"{line['drafter_label']} γ={line['gamma']}"
    if c.get("below_all"):
        return f"{name} pays at no length measured"
    if c.get("lo") is not None and not c.get("lo_at_first"):
        return f"{name} pays at every length measured; confidently up to about {c['lo']:,.0f} tokens"
    return f"{name} pays at every length measured"


def figure_speedup_vs_context(data: PlotData) -> Figure:
    """Per workload: speedup (top) and α̂ (bottom) per γ against mean prompt tokens (log axis), crossover marked."""
    entries = data.context or []
    if not entries:
        raise FigureSkipped("the records span fewer than two context-length bins, or have no target-only baseline")
    fig, (tops, bottoms) = new_panels(len(entries), ncols=2, size=(6.4, 3.6), nrows_per=2, sharex=True)
    handles: dict[str, object] = {}
    for top, bottom, entry in zip(tops, bottoms, entries):
        lines = context_series(entry, data.context_bins)
        gammas = sorted({s["gamma"] for s in lines})
        one_drafter = len({(s["drafter_label"], s["tree"]) for s in lines}) == 1
        for s in lines:
            style = dict(data.palette.style(s["drafter_label"], s["tree"]))
            style["marker"] = MARKERS[gammas.index(s["gamma"]) % len(MARKERS)]
            if one_drafter:  # one drafter: γ is what the reader tells apart, so each γ gets its own colour
                style["color"] = GAMMA_COLOURS[gammas.index(s["gamma"]) % len(GAMMA_COLOURS)]
            x = np.log2(np.asarray(s["x"], dtype=float))
            measured_points(top, x, s["speedup"], s["lo"], s["hi"], style=style)
            measured_points(bottom, x, s["alpha"], s["alpha_lo"], s["alpha_hi"], style=style)
            name = f"{s['drafter_label']} γ={s['gamma']}"
            handles[name] = series_handle(name, style)
        top.axhline(1.0, color="0.3", linestyle=":", linewidth=1)
        mark = crossover_mark(entry)
        title = no_crossing_title(entry)
        if mark is not None:
            for ax in (top, bottom):
                ax.axvspan(np.log2(mark["lo"]), np.log2(mark["hi"]), color="0.85", zorder=0)
                ax.axvline(np.log2(mark["point"]), color="0.2", linestyle="--", linewidth=1.2)
            title = f"{mark['drafter_label']} γ={mark['gamma']} stops paying at about {mark['point']:,.0f} tokens"
        ticks = sorted({(b["prompt_tokens"], b["context_bin"]) for b in entry["bins"]})
        bottom.set_xticks([np.log2(t) for t, _ in ticks], [f"{b}\n{t:,.0f}" for t, b in ticks])
        bottom.set_xlabel("context-length bin, mean prompt tokens (log scale)")
        top.set_ylabel("speedup over target only")
        bottom.set_ylabel("acceptance α̂")
        bottom.set_ylim(0, 1.05)
        panel_title(top, str(entry["workload"]), title)
    if any(crossover_mark(e) is not None for e in entries):
        handles["crossover length (dashed) and its 95 % interval (shaded)"] = series_handle(
            "crossover", {"color": "0.2", "linestyle": "--", "marker": ""}
        )
    fig.suptitle("Speedup and acceptance α vs context length")
    legend_below(fig, handles)
    return fig

"""The goodput objective: which configuration serves the most requests per second within the latency targets.

``specbench recommend --objective goodput --itl-p90 50ms --latency-p90 4s``: goodput — requests per second
that meet every target — at each measured load, for the target-only baseline and every configuration, comes
from `specbench.analysis.load.operating` with its prompt-bootstrap interval. Per workload scenario:

* each configuration's **peak**: the load where its goodput estimate is highest, with its interval there;
* the **best configuration**: the highest peak; compared with target only *at the same load* (the goodput
  ratio, paired: the same prompt weights on both sides of every replicate). The comparison is *confident*
  when the ratio's interval lies wholly above 1 (speculation serves more good requests there) or wholly
  below 1 (it serves fewer), and *cannot tell* otherwise;
* where target only peaks higher than every configuration, the answer is not to speculate.

Goodput is a timing: where a load's batches ran beside other busy processes (``timing_disturbed``), no answer
resting on it is called confident (the line says so, as the SLO objective's does).

Peaks are maxima over the measured loads only: goodput between or beyond them is not measured, and the
highest measured load caps every peak (the line says when a peak lies at it: more load might serve more).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from specbench.analysis.load.operating import Operating
from specbench.analysis.load.table import load_label
from specbench.analysis.verdicts.verdict import UNSURE
from specbench.records.summary import BASELINE_KEYS

GROUP_KEYS = [*BASELINE_KEYS, "backend"]


def _name(row: dict) -> str:
    name = "target only" if int(row["gamma"]) == 0 else f"{row['drafter_label']} γ={int(row['gamma'])}"
    return name + ("" if row["tree"] == "chain" else f" tree {row['tree']}")


def _value(row: dict) -> str:
    lo, hi = row.get("goodput_lo"), row.get("goodput_hi")
    interval = "" if lo is None or not np.isfinite(lo) else f" [{lo:.3g}, {hi:.3g}]"
    return f"{row['goodput']:.3g} req/s{interval}"


def _peak(rows: pd.DataFrame, axis: str) -> dict:
    """The row of ``rows`` (one configuration over loads) with the highest goodput (the lower load on ties)."""
    ordered = rows.sort_values(axis)
    best = ordered.iloc[int(np.nanargmax(ordered["goodput"].to_numpy(float)))]
    return {**best.to_dict(), "at_largest_load": bool(best[axis] == ordered[axis].max())}


def _verdict(ratio: float, lo: float, hi: float, disturbed: bool) -> str:
    if not np.isfinite(lo) or not np.isfinite(hi):
        text = f"{UNSURE} (no interval)"
    elif lo > 1:
        text = "confident: more good requests with speculation"
    elif hi < 1:
        text = "confident: fewer good requests with speculation"
    else:
        text = str(UNSURE)
    if disturbed and text.startswith("confident"):
        return f"not decided (disturbed timing; on its numbers alone: {text})"
    return text


def goodput_answers(op: Operating, axis: str) -> list[dict]:
    """Per workload scenario: every configuration's peak goodput, the best one against target only (module
    docstring), and one line saying so."""
    table = op.table
    if table.empty or not op.slos or table["goodput"].isna().all():
        return []
    targets = ", ".join(s.describe() for s in op.slos)
    out = []
    for key, scenario in table.groupby(GROUP_KEYS, dropna=False, sort=True):
        peaks = [
            _peak(rows, axis)
            for _, rows in scenario.groupby(["drafter_label", "tree", "gamma"], sort=True)
            if rows["goodput"].notna().any()
        ]
        base = next((p for p in peaks if int(p["gamma"]) == 0), None)
        spec = [p for p in peaks if int(p["gamma"]) > 0]
        best = max(spec, key=lambda p: p["goodput"]) if spec else None
        parts = [f"goodput within {targets}: "]
        comparison = None
        if best is not None:
            parts.append(f"most with {_name(best)}, {_value(best)} at {load_label(axis, best[axis])}")
        if base is not None:
            parts.append(f"; target only {_value(base)} at {load_label(axis, base[axis])}")
        if best is not None and base is not None:
            same = scenario[
                (scenario["drafter_label"] == best["drafter_label"])
                & (scenario["tree"] == best["tree"])
                & (scenario["gamma"] == best["gamma"])
                & (scenario[axis] == best[axis])
            ].iloc[0]
            ratio, lo, hi = (
                float(same.get(k, math.nan)) for k in ("goodput_ratio", "goodput_ratio_lo", "goodput_ratio_hi")
            )
            disturbed = bool(same.get("timing_disturbed")) or bool(base.get("timing_disturbed"))
            comparison = {
                "load": best[axis],
                "ratio": ratio,
                "lo": lo,
                "hi": hi,
                "verdict": _verdict(ratio, lo, hi, disturbed),
            }
            if np.isfinite(ratio):
                interval = f" [{lo:.2f}, {hi:.2f}]" if np.isfinite(lo) else ""
                parts.append(
                    f"; at {load_label(axis, best[axis])} speculation serves {ratio:.2f}×{interval} target "
                    f"only's good requests — {comparison['verdict']}"
                )
            if base["goodput"] > best["goodput"]:
                parts.append("; target only peaks higher: do not speculate for goodput")
        capped = [p for p in (best, base) if p is not None and p["at_largest_load"] and p["goodput"] > 0]
        if capped:
            parts.append(
                f" (peaks at the largest load measured, {load_label(axis, capped[0][axis])}: measure higher "
                "loads to find the real peak)"
            )
        disturbed = bool(scenario["timing_disturbed"].fillna(False).astype(bool).any())
        if disturbed:
            parts.append(
                " (timing disturbed: some loads have only batches that ran beside other busy processes — "
                "rerun on a quiet machine before acting on it)"
            )
        out.append(
            {
                **dict(zip(GROUP_KEYS, key)),
                "slos": [s.as_dict() for s in op.slos],
                "timing_disturbed": disturbed,
                "peaks": [_plain(p) for p in peaks],
                "best": None if best is None else _plain(best),
                "baseline": None if base is None else _plain(base),
                "comparison": comparison,
                "text": "".join(parts),
            }
        )
    return out


def _plain(row: dict) -> dict:
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in row.items()}

"""The SLO objective: the highest load whose latency percentile stays under a target, with and without
speculation — how much more traffic speculation lets a server carry at the same latency promise.

``specbench recommend --objective slo --itl-p90 50ms`` (or ``--ttft-p90``, ``--latency-p99``, ...): for
every configuration, the target-only baseline included, the latency percentile at each measured load
comes from `specbench.analysis.load.table.serving_table` with its prompt-bootstrap interval. The ratio
target ÷ percentile crosses 1 where the promise breaks; `specbench.analysis.load.crossover` finds that load
on log–log axes: the *point* where the estimated percentile reaches the target, and the range from
where its interval's upper end reaches it (below: kept with confidence) to where its lower end does
(above: broken with confidence). The answer per workload compares the baseline with the
configuration that keeps the promise to the highest load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.load.crossover import Crossover, crossover, describe
from specbench.durations import parse_duration
from specbench.errors import SpecbenchError
from specbench.records.summary import BASELINE_KEYS, PERCENTILES

METRICS = {"ttft": "TTFT", "itl": "ITL", "latency": "request latency"}
GROUP_KEYS = [*BASELINE_KEYS, "backend"]
CONFIG = ["drafter", "drafter_label", "tree", "gamma"]
UNITS = {"concurrency": "requests in flight", "request_rate": "requests/s"}
LATENCY_UNITS = ("us", "µs", "ms", "s")  # a latency target's units (`specbench.durations`): no bare number


@dataclass(frozen=True)
class Slo:
    """A latency promise: ``metric`` (ttft, itl, latency) at ``percentile`` (50, 90, 99) ≤ ``limit_s``."""

    metric: str
    percentile: int
    limit_s: float

    @property
    def column(self) -> str:
        return f"{self.metric}_p{self.percentile}_s"

    def describe(self) -> str:
        return f"{METRICS[self.metric]} p{self.percentile} ≤ {self.limit_s * 1e3:g} ms"

    def as_dict(self) -> dict:
        return {"metric": self.metric, "percentile": self.percentile, "limit_s": self.limit_s}


def parse_latency(text: str, flag: str) -> float:
    """'50ms', '0.2s', '500us' → seconds (`specbench.durations.parse_duration`); a bare number or another unit is a
    one-line error."""
    seconds = parse_duration(text, LATENCY_UNITS)
    if seconds is None:
        raise SpecbenchError(f"{flag} takes a duration with its unit, e.g. 50ms or 0.2s, got '{text}'")
    if not seconds > 0:
        raise SpecbenchError(f"{flag} must be above 0, got '{text}'")
    return seconds


def make_slo(metric: str, percentile: int, text: str) -> Slo:
    if metric not in METRICS or percentile not in PERCENTILES:
        raise SpecbenchError(
            f"no SLO on {metric} p{percentile} (metrics: {', '.join(METRICS)}; percentiles: "
            f"{', '.join(map(str, PERCENTILES))})"
        )
    return Slo(metric, percentile, parse_latency(text, f"--{metric}-p{percentile}"))


def slos_from_flags(
    itl_p90: str | None, ttft_p90: str | None, generic: list[str], latency_p90: str | None = None
) -> list[Slo]:
    """The latency targets of ``--itl-p90``, ``--ttft-p90``, ``--latency-p90`` (end to end: arrival to last token)
    and ``--slo METRIC-pNN=DURATION`` (recommend, plot)."""
    out = []
    if itl_p90 is not None:
        out.append(make_slo("itl", 90, itl_p90))
    if ttft_p90 is not None:
        out.append(make_slo("ttft", 90, ttft_p90))
    if latency_p90 is not None:
        out.append(make_slo("latency", 90, latency_p90))
    for item in generic:
        name, _, duration = item.partition("=")
        metric, _, percentile = name.strip().lower().partition("-p")
        if not duration or not percentile.isdigit():
            raise SpecbenchError(f"--slo takes METRIC-pNN=DURATION, e.g. itl-p99=80ms; got '{item}'")
        out.append(make_slo(metric, int(percentile), duration))
    return out


def _curve(rows: pd.DataFrame, slo: Slo, axis: str) -> Crossover:
    """Where target ÷ percentile crosses 1 over load (lo / hi from the percentile's interval)."""
    col = slo.column
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = slo.limit_s / rows[col].astype(float)
        lo = slo.limit_s / rows[col[:-2] + "_hi_s"].astype(float)  # the percentile's upper end: ratio's lower
        hi = slo.limit_s / rows[col[:-2] + "_lo_s"].astype(float)
    return crossover(rows[axis], ratio, lo, hi)


def _reach(c: Crossover) -> float:
    """How far a configuration keeps the promise, for ranking: its crossing, or beyond the largest load."""
    if c.below_all:
        return 0.0
    return c.point if c.point is not None else 2 * c.largest


def _crossing_load(entry: dict | None) -> float | None:
    """The load where an entry's promise breaks, when it breaks inside the measured range."""
    crossing = (entry or {}).get("crossing") or {}
    return None if crossing.get("below_all") else crossing.get("point")


def slo_answers(table: pd.DataFrame, slo: Slo, axis: str) -> list[dict]:
    """Per workload scenario: where the baseline and each configuration keep ``slo`` (with intervals), the
    configuration that keeps it furthest, and one line comparing it with the baseline."""
    if table.empty or slo.column not in table:
        return []
    unit = UNITS[axis]
    out = []
    for key, scenario in table.groupby(GROUP_KEYS, dropna=False, sort=True):
        entries = []
        for config, rows in scenario.groupby(CONFIG, dropna=False, sort=True):
            rows = rows.sort_values(axis)
            if rows[slo.column].notna().sum() == 0:
                continue
            c = _curve(rows, slo, axis)
            met = rows[rows[slo.column] <= slo.limit_s][axis]
            entries.append(
                {
                    **dict(zip(CONFIG, config)),
                    "crossing": c.as_dict(),
                    "reach": _reach(c),
                    "highest_measured_kept": float(met.max()) if len(met) else None,
                    "text": describe(c, unit, "kept", "over the target"),
                }
            )
        if not entries:
            continue
        base = next((e for e in entries if e["gamma"] == 0), None)
        spec = [e for e in entries if e["gamma"] > 0]
        best = max(spec, key=lambda e: e["reach"]) if spec else None
        parts = [f"{slo.describe()}:"]
        if base is not None:
            parts.append(f"target only {base['text']};")
        if best is not None:
            parts.append(f"with {best['drafter_label']} γ={int(best['gamma'])} {best['text']}")
            without, with_ = _crossing_load(base), _crossing_load(best)
            if without and with_:
                parts.append(f"— about {with_ / without:.2f}× the load")
        disturbed = (
            bool(scenario["timing_disturbed"].fillna(False).astype(bool).any())
            if "timing_disturbed" in scenario
            else False
        )
        if disturbed:  # the percentiles are timings: say what they rest on
            parts.append(
                "(timing disturbed: some loads have only batches that ran beside other busy processes — "
                "rerun on a quiet machine before acting on it)"
            )
        out.append(
            {
                **dict(zip(GROUP_KEYS, key)),
                "slo": slo.as_dict(),
                "configurations": entries,
                "baseline": base,
                "best": best,
                "timing_disturbed": disturbed,
                "text": " ".join(parts),
            }
        )
    return out

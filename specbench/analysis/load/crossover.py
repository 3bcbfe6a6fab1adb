"""Where a quantity measured at several loads crosses a line: the load where speculation stops paying,
and the highest load that keeps a latency target.

Input: loads L_1 < … < L_n (requests in flight, or requests per second), a ratio R_i at each (a
speedup: configuration over target-only at the same load; or target ÷ latency percentile for an SLO)
with its 95 % interval [lo_i, hi_i]. The crossing of R = 1 is found on log–log axes — log R linear in
log L between neighbouring levels, the shape of throughput against batch size on a memory-bound engine —
at the first level where a curve falls below 1:

    point:  where log R̂ first crosses 0 (interpolated between the two levels around it)
    lo:     where log(lo) first crosses 0 — below this load R > 1 with confidence
    hi:     where log(hi) first crosses 0 — from this load on R < 1 with confidence

so the crossover is "about point, between lo and hi". The intervals are pointwise 95 % intervals at
the measured levels, joined by the same interpolation: [lo, hi] is the range of loads where the data
cannot tell on which side of 1 the ratio lies, not a simultaneous band. A curve that stays above 1
crosses beyond the largest load measured (``None`` with ``above`` set); one below 1 at the smallest
load crosses below it. A curve that rises above 1 again after crossing is reported as such: the
first crossing stands, with a note.

The words (`describe`) follow the intervals, not the point estimates: "pays at every load measured" only
when every interval lies above 1; where every interval includes 1 they say the data cannot tell; where
some do, they name the loads that are sure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Crossover:
    """Where a ratio crosses 1 over load; None: not within the measured loads (see ``below_all``)."""

    point: float | None  # load where the point estimate crosses 1
    lo: float | None  # up to this load the ratio lies above 1 with confidence
    hi: float | None  # from this load on it lies below 1 with confidence
    loads: list[float]  # the measured loads, increasing
    ratios: list[float]  # the point estimate at each
    below_all: bool = False  # the point estimate is below 1 already at the smallest load
    lo_at_first: bool = False  # the lower end is below 1 already at the smallest load
    again: list[float] = field(default_factory=list)  # loads past the first crossing where it is ≥ 1 again
    intervals: bool = True  # whether any level had an interval (none without a bootstrap)
    notes: list[str] = field(default_factory=list)
    lows: list[float] = field(default_factory=list)  # the interval's lower end at each load (NaN: none)
    highs: list[float] = field(default_factory=list)

    @property
    def largest(self) -> float:
        return self.loads[-1] if self.loads else math.nan

    def as_dict(self) -> dict:
        return {
            "point": self.point,
            "lo": self.lo,
            "hi": self.hi,
            "loads": self.loads,
            "ratios": self.ratios,
            "below_all": self.below_all,
            "lo_at_first": self.lo_at_first,
            "again": list(self.again),
            "intervals": self.intervals,
            "lows": self.lows,
            "highs": self.highs,
            "notes": list(self.notes),
        }

    def sure(self) -> tuple[list[float], list[float], list[float]]:
        """(loads whose interval lies above 1, loads whose interval includes 1, loads whose interval lies below 1);
        loads without an interval are in none."""
        above: list[float] = []
        unsure: list[float] = []
        below: list[float] = []
        for load, lo, hi in zip(self.loads, self.lows, self.highs):
            if not (math.isfinite(lo) and math.isfinite(hi)):
                continue
            (above if lo > 1 else below if hi < 1 else unsure).append(load)
        return above, unsure, below


def _first_crossing(x: np.ndarray, y: np.ndarray) -> tuple[float | None, bool]:
    """(x where y first goes from ≥ 0 to < 0, interpolated linearly; whether y < 0 at the first x).
    Non-finite points are skipped; None when y never falls below 0."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if not len(x):
        return None, False
    if y[0] < 0:
        return float(x[0]), True
    for i in range(1, len(x)):
        if y[i] < 0:
            t = y[i - 1] / (y[i - 1] - y[i])  # y[i-1] ≥ 0 > y[i]
            return float(x[i - 1] + t * (x[i] - x[i - 1])), False
    return None, False


def crossover(loads, ratios, lo, hi) -> Crossover:
    """Where ``ratios`` (with intervals ``lo``, ``hi``) measured at ``loads`` cross 1 (module docstring)."""
    order = np.argsort(np.asarray(loads, dtype=float))
    x = np.asarray(loads, dtype=float)[order]
    r, lo_, hi_ = (np.asarray(v, dtype=float)[order] for v in (ratios, lo, hi))
    with np.errstate(divide="ignore", invalid="ignore"):
        logx, logr, loglo, loghi = np.log(x), np.log(r), np.log(lo_), np.log(hi_)
    point, below = _first_crossing(logx, logr)
    at_lo, lo_first = _first_crossing(logx, loglo)
    at_hi, _ = _first_crossing(logx, loghi)
    out = Crossover(
        point=None if point is None else float(np.exp(point)),
        lo=None if at_lo is None else float(np.exp(at_lo)),
        hi=None if at_hi is None else float(np.exp(at_hi)),
        loads=[float(v) for v in x],
        ratios=[float(v) for v in r],
        below_all=below,
        lo_at_first=lo_first,
        intervals=bool(np.isfinite(loglo).any() or np.isfinite(loghi).any()),
        lows=[float(v) for v in lo_],
        highs=[float(v) for v in hi_],
    )
    if point is not None:
        crossed = np.isfinite(logr) & (logx > point)
        out.again = [float(v) for v, y in zip(x[crossed], logr[crossed]) if y >= 0]
        if out.again:
            out.notes.append(f"above 1 again at {_loads(out.again)}: the first crossing is reported")
    return out


def _num(value: float) -> str:
    """A level in words: three significant digits, whole numbers with thousands separators from 1,000 on
    (5,630 prompt tokens, not 5.63e+03)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _loads(values: list[float]) -> str:
    return ", ".join(f"{_num(v)}" for v in values)


def describe(c: Crossover, unit: str, what: str = "pays", fails: str = "below 1", level: str = "load") -> str:
    """'pays up to about 5.8 requests in flight [95 %: 3.1–8]' and its variants (``unit``: 'requests in
    flight', 'requests/s' or 'prompt tokens'; ``what``: the verb phrase for "above 1", ``fails`` the words for
    "below 1"; ``level``: what the axis' values are, 'load' or 'length', as in "pays at every length measured"),
    with '(pays again at 4, 8: the first crossing is reported)' where the curve comes back above 1."""
    if not c.loads:
        return "nothing measured"
    again = f" ({what} again at {_loads(c.again)} {unit}: the first crossing is reported)" if c.again else ""
    return _describe(c, unit, what, fails, level) + again


def _describe(c: Crossover, unit: str, what: str, fails: str, level: str) -> str:
    above, unsure, below = c.sure()
    if c.below_all:
        sure = (
            "with confidence"
            if c.loads[0] in below
            else "its interval includes 1 there"
            if c.loads[0] in unsure
            else "no interval"
        )
        return f"{what} at no {level} measured ({fails} already at {_num(c.loads[0])} {unit}; {sure})"
    if not c.intervals:
        return (
            f"{what} at every {level} measured on its point estimates (up to {_num(c.largest)} {unit}; no interval)"
            if c.point is None
            else f"{what} up to about {_num(c.point)} {unit} on its point estimates (no interval)"
        )
    if c.point is None:
        if not unsure and not below and len(above) == len(c.loads):
            return f"{what} at every {level} measured (up to {_num(c.largest)} {unit}; with confidence at every one)"
        if not above:
            return (
                f"cannot tell whether it {_verb(what)} at any {level} measured (up to {_num(c.largest)} {unit}): every "
                "interval includes 1, though every point estimate is above 1"
            )
        if c.lo is not None and not c.lo_at_first:
            return (
                f"{what} with confidence up to about {_num(c.lo)} {unit}; its interval includes 1 from about "
                f"{_num(c.lo)} {unit} on (point estimates above 1 up to {_num(c.largest)})"
            )
        return (
            f"{what} with confidence at {_loads(above)} {unit} only; its interval includes 1 at "
            f"{_loads(unsure)} (point estimates above 1 at every {level})"
        )
    high = f">{_num(c.largest)}" if c.hi is None else f"{_num(c.hi)}"
    if c.lo_at_first or c.lo is not None:
        low = f"≤{_num(c.loads[0])}" if c.lo_at_first or c.lo is None else _num(c.lo)
        bracket = f"[95 %: {low}–{high}]"
    else:  # no lower end crosses 1 (missing there): only the upper end is known
        bracket = f"[95 %: up to {high}; no lower end]"
    if not above:
        return (
            f"cannot tell where it stops: no interval lies above 1, its point estimate crosses 1 at about "
            f"{_num(c.point)} {unit} {bracket}"
        )
    return f"{what} up to about {_num(c.point)} {unit} {bracket}"


def _verb(what: str) -> str:
    """'pays' → 'pays', 'kept' → 'is kept' (the verb phrase after 'whether it')."""
    return what if what.endswith("s") else f"is {what}"

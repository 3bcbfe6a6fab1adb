"""Two options compared with each other, paired on the same prompts: the ratio of their tokens/s with its
log-scale standard error.

For options a and b on the prompts both ran, R = (Σ_p t_ap ÷ Σ_p s_ap) ÷ (Σ_p t_bp ÷ Σ_p s_bp); its log-scale
t standard error is `specbench.analysis.statistics.speedup_interval`'s with b as the reference (per-prompt log-ratio
contributions, P − 1 degrees of freedom). With predicted evidence (acceptance × a cost model) the cost part is
added: the spread of log R when the cost model is refitted on each calibration prompt alone (se = sd ÷ √Q, Q − 1
df), the two parts combined by Welch–Satterthwaite (`combine_log_se`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.statistics.speedup_interval import combine_log_se, speedup_interval

NAN = float("nan")


@dataclass(frozen=True)
class PerPrompt:
    """One option's evidence for paired comparisons.

    ``tokens`` and ``seconds`` are indexed by prompt (a prompt's turns summed; modelled seconds for predicted
    evidence, measured ones otherwise); ``refits`` (predicted evidence) is indexed by calibration prompt: the
    option's log tokens/s over all prompts when the cost model is fitted on that calibration prompt alone."""

    tokens: pd.Series  # [P]
    seconds: pd.Series  # [P]
    refits: pd.Series | None = None  # [Q]


@dataclass(frozen=True)
class Ratio:
    """Option i's tokens/s ÷ option j's on the prompts both ran: the point and its log-scale standard error."""

    point: float
    log_se: float
    dof: float
    n_prompts: int

    @property
    def usable(self) -> bool:
        return _finite(self.point) and self.point > 0 and _finite(self.log_se) and self.dof > 0

    def lower(self, quantile) -> float:
        """The lower end of log R at ``quantile(dof)`` (−inf without an interval)."""
        if not self.usable:
            return -math.inf
        return math.log(self.point) - quantile(self.dof) * self.log_se


def paired_ratio(a: PerPrompt, b: PerPrompt) -> Ratio:
    """``a``'s tokens/s ÷ ``b``'s, paired on the prompts both ran (module docstring)."""
    aligned = Aligned.of([a, b])
    return aligned.ratio(0, 1)


@dataclass(frozen=True)
class Aligned:
    """K options' evidence on one prompt index (NaN where an option did not run a prompt), so that every pair is
    compared without realigning: tokens and seconds [K, P], refits [K, Q] (None: no option has refits)."""

    tokens: np.ndarray  # [K, P]
    seconds: np.ndarray  # [K, P]
    refits: np.ndarray | None  # [K, Q]

    @classmethod
    def of(cls, options: list[PerPrompt]) -> Aligned:
        index = sorted(set().union(*(set(o.tokens.index) for o in options))) if options else []
        tokens = np.vstack([o.tokens.reindex(index).to_numpy(dtype=float) for o in options])
        seconds = np.vstack([o.seconds.reindex(index).to_numpy(dtype=float) for o in options])
        with_refits = [o.refits for o in options if o.refits is not None]
        refits = None
        if with_refits:
            cal = sorted(set().union(*(set(r.index) for r in with_refits)))
            refits = np.vstack(
                [
                    np.full(len(cal), np.nan) if o.refits is None else o.refits.reindex(cal).to_numpy(dtype=float)
                    for o in options
                ]
            )
        return cls(tokens, seconds, refits)

    def ratio(self, i: int, j: int) -> Ratio:
        """Option i's tokens/s ÷ option j's on the prompts both ran."""
        t_i, s_i, t_j, s_j = self.tokens[i], self.seconds[i], self.tokens[j], self.seconds[j]
        both = np.isfinite(t_i) & np.isfinite(t_j) & (s_i > 0) & (s_j > 0)
        iv = speedup_interval(t_i[both], s_i[both], t_j[both], s_j[both])
        if not iv.has_interval:
            return Ratio(iv.point, NAN, 0.0, iv.n_prompts)
        parts = [(iv.log_se, iv.dof)]
        if self.refits is not None:
            logs = self.refits[i] - self.refits[j]
            logs = logs[np.isfinite(logs)]
            if len(logs) >= 2:
                parts.append((float(np.std(logs, ddof=1) / np.sqrt(len(logs))), len(logs) - 1))
        se, dof = combine_log_se(parts)
        return Ratio(iv.point, se, dof, iv.n_prompts)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

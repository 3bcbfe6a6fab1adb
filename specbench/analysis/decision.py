"""The per-workload answer: confident yes, confident no, or cannot tell — and on what evidence.

Evidence, in order of preference:

1. the **predicted** speedups (`specbench.analysis.predicted_speedup`: acceptance over every prompt
   × costs timed interleaved with the baseline), when the scenario has them;
2. otherwise the **measured** speedups (live units paired with the baseline, t-interval of
   `specbench.analysis.speedup_interval`).

Answer: *confident yes* when some option's interval lies above 1 (the one with the highest
point estimate among those is recommended); *confident no* when every option's interval lies
below 1; *too few prompts to tell (P = n)* when no option has an interval; *cannot tell*
otherwise, with the prompts that would settle the best option at its observed per-prompt
spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.analysis.intervals import LEVEL
from specbench.analysis.options import Option
from specbench.analysis.predicted_speedup import predicted_table
from specbench.analysis.speedup_interval import (
    MIN_PROMPTS,
    NO,
    TOO_FEW,
    UNSURE,
    YES,
    SpeedupInterval,
    prompts_to_settle,
    t_quantile,
)
from specbench.records.timing import DISTURBED


@dataclass
class Decision:
    answer: str  # YES, NO, UNSURE or TOO_FEW
    evidence: str  # 'predicted' or 'measured'
    option: object | None  # the recommended Option (confident yes only)
    best: dict | None  # the best point estimate: label, gamma, speedup, lo, hi
    prompts_needed: int | None
    n_prompts: int
    text: str
    timing_disturbed: bool = False  # every timed unit ran under interference (the text says so too)

    def as_dict(self) -> dict:
        return {"answer": self.answer, "evidence": self.evidence, "best": self.best,
                "prompts_needed": self.prompts_needed, "n_prompts": self.n_prompts, "text": self.text,
                "timing_disturbed": self.timing_disturbed}


def _candidates_predicted(predicted: pd.DataFrame) -> list[dict]:
    return [{"drafter": r["drafter"], "drafter_label": r["drafter_label"], "tree": r["tree"], "gamma": int(r["gamma"]),
             "schedule": r.get("schedule", "fixed"),
             "speedup": float(r["predicted"]), "lo": float(r["lo"]), "hi": float(r["hi"]),
             "log_se": float(np.hypot(r["acceptance_log_se"], r["cost_log_se"] if r["cost_log_se"] == r["cost_log_se"]
                                      else 0.0)),
             "n": int(r["n_prompts"]), "dof": float(r["dof"])} for _, r in predicted.iterrows()]


def _candidates_measured(options: list) -> list[dict]:
    out = []
    for o in options:
        se = (np.log(o.hi) - np.log(o.speedup)) if np.isfinite(o.hi) and o.speedup > 0 else float("nan")
        out.append({"drafter": o.drafter, "drafter_label": o.drafter_label, "tree": o.tree, "gamma": o.gamma,
                    "schedule": o.schedule, "speedup": o.speedup, "lo": o.lo, "hi": o.hi, "log_se_half": se,
                    "option": o})
    return out


def _describe(c: dict) -> str:
    tree = "" if c["tree"] == "chain" else f" tree {c['tree']}"
    schedule = c.get("schedule", "fixed")
    schedule = "" if not isinstance(schedule, str) or schedule == "fixed" else f" schedule {schedule}"
    return f"{c['drafter_label']}{tree} γ={c['gamma']}{schedule}"


def _ci(c: dict) -> str:
    return f"{c['speedup']:.2f}× [{c['lo']:.2f}, {c['hi']:.2f}]"


def _option_for(c: dict, options: list, scenario: pd.DataFrame):
    """An `Option` (recommend's) for a candidate: the measured one when it exists, else a new one."""

    schedule = c.get("schedule", "fixed") if isinstance(c.get("schedule", "fixed"), str) else "fixed"
    for o in options:
        if (o.drafter_label, o.tree, o.gamma, o.schedule) == (c["drafter_label"], c["tree"], c["gamma"], schedule):
            return Option(o.drafter, o.drafter_label, o.drafter_params, o.tree, o.gamma, c["speedup"], c["lo"], c["hi"],
                          o.tokens_per_s, True, schedule)
    rows = scenario[(scenario["drafter_label"] == c["drafter_label"]) & (scenario["tree"] == c["tree"])]
    params = str(rows["drafter_params"].iloc[0]) if len(rows) else "{}"
    return Option(c["drafter"], c["drafter_label"], params, c["tree"], c["gamma"], c["speedup"], c["lo"], c["hi"],
                  float("nan"), False, schedule)


def decide_scenario(scenario: pd.DataFrame, measured_options: list, n_prompts: int, level: float = LEVEL,
                    notes: list[str] | None = None) -> tuple[Decision, pd.DataFrame]:

    predicted, more = predicted_table(scenario, level)
    if notes is not None:
        notes.extend(more)
    decision = _decide(scenario, predicted, measured_options, n_prompts, level)
    if any(n.startswith(DISTURBED) for n in more):  # every timed unit ran under interference: say so up front
        decision.timing_disturbed = True
        decision.text += (" — but the timing was disturbed (every timed unit ran beside other busy processes): "
                          "rerun on a quieter machine before acting on it")
    return decision, predicted


def _decide(scenario: pd.DataFrame, predicted: pd.DataFrame, measured_options: list, n_prompts: int,
            level: float) -> Decision:
    if not predicted.empty:
        evidence, candidates = "predicted", _candidates_predicted(predicted)
        count = int(predicted["n_prompts"].max())
        source = (f"predicted: acceptance on {count} prompts × costs timed on "
                  f"{int(predicted['n_calibration'].max())}")
    else:
        evidence, candidates = "measured", _candidates_measured(measured_options)
        count = n_prompts
        source = f"measured on {count} prompts"
    if not candidates:
        return Decision(TOO_FEW, evidence, None, None, None, count, "cannot tell: nothing to compare")
    with_interval = [c for c in candidates if np.isfinite(c["lo"]) and np.isfinite(c["hi"])]
    best = max(candidates, key=lambda c: c["speedup"] if np.isfinite(c["speedup"]) else -np.inf)
    best_dict = {k: best[k] for k in ("drafter_label", "tree", "gamma", "schedule", "speedup", "lo", "hi")}
    if not with_interval or count < MIN_PROMPTS:
        text = (f"too few prompts to tell (P = {count}); best point estimate {_describe(best)} at "
                f"{best['speedup']:.2f}× — measure ≥ {MIN_PROMPTS} prompts (≥ 10 for a useful interval)")
        return Decision(TOO_FEW, evidence, None, best_dict, None, count, text)
    above = [c for c in with_interval if c["lo"] > 1.0]
    if above:
        pick = max(above, key=lambda c: c["speedup"])
        option = _option_for(pick, measured_options, scenario)
        text = (f"confident yes: speculate with {_describe(pick)}, {_ci(pick)} ({source}; the best of "
                f"{len(above)} option(s) whose interval lies above 1)")
        return Decision(YES, evidence, option, {**best_dict, **{k: pick[k] for k in best_dict}}, None, count,
                        text)
    if all(c["hi"] < 1.0 for c in with_interval):
        text = (f"confident no: no option's interval lies above 1, every one lies below 1 ({source}); best "
                f"{_describe(best)} at {_ci(best)}")
        return Decision(NO, evidence, None, best_dict, None, count, text)
    ref = max(with_interval, key=lambda c: c["speedup"])
    interval = SpeedupInterval(ref["speedup"], ref["lo"], ref["hi"],
                               (np.log(ref["hi"]) - np.log(ref["lo"])) / 2 / _t(ref, count, level), count - 1, count)
    needed = prompts_to_settle(interval, level)
    settle = (f"about {needed} prompts would settle it at the observed per-prompt spread" if needed
              else "no practical number of prompts would settle it: the speedup is too close to 1")
    text = (f"cannot tell: best {_describe(ref)} at {_ci(ref)} ({source}); its interval contains 1 — {settle}")
    return Decision(UNSURE, evidence, None, {k: ref[k] for k in best_dict}, needed, count, text)


def _t(c: dict, count: int, level: float) -> float:

    return t_quantile(c.get("dof", count - 1), level)

"""The per-workload answer: confident yes, confident no, or cannot tell — and on what evidence.

Evidence, in order of preference:

1. the **predicted** speedups (`specbench.analysis.predicted_speedup`: acceptance over every prompt
   × costs timed interleaved with the baseline), when the scenario has them;
2. otherwise the **measured** speedups (live units paired with the baseline, t-interval of
   `specbench.analysis.speedup_interval`).

Answer (`specbench.analysis.sequential.VerdictRule`: the ends below are adjusted for picking the
best of the K options and, in an adaptive sweep, for its planned looks): *confident yes* when
some option's selection-adjusted lower end lies above 1 (the one with the highest point estimate
among those is recommended, and its interval is the adjusted one); *confident no* when every
option's look-adjusted upper end lies below 1; *too few prompts to tell (P = n)* when no option
has an interval; *cannot tell* otherwise, with the prompts that would settle the best option at
its observed per-prompt spread under the same rule.

Each candidate keeps its adjusted ends (``Decision.candidates``), so an adaptive sweep can also
drop the options that are confidently below the best (`dominated`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specbench.analysis.intervals import LEVEL
from specbench.analysis.options import Option
from specbench.analysis.predicted_speedup import predicted_table
from specbench.analysis.sequential import FIXED, LookPlan, VerdictRule, prompts_to_settle
from specbench.analysis.speedup_interval import MIN_PROMPTS, NO, TOO_FEW, UNSURE, YES, speedup_words
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.records.timing import DISTURBED, timing_usable

CANDIDATE_KEYS = ("drafter_label", "tree", "gamma", "schedule")  # one option of a scenario


@dataclass
class Decision:
    answer: str  # YES, NO, UNSURE or TOO_FEW
    evidence: str  # 'predicted' or 'measured'
    option: object | None  # the recommended Option (confident yes only)
    best: dict | None  # the best point estimate: label, gamma, speedup, lo, hi (adjusted ends: lo_adj, hi_adj)
    prompts_needed: int | None
    n_prompts: int
    text: str
    timing_disturbed: bool = False  # every timed unit ran under interference (the text says so too)
    rule: dict = field(default_factory=dict)  # the VerdictRule the answer used (sequential.VerdictRule.as_dict)
    candidates: list[dict] = field(default_factory=list)  # every option with its adjusted ends

    def as_dict(self) -> dict:
        return {"answer": self.answer, "evidence": self.evidence, "best": self.best,
                "prompts_needed": self.prompts_needed, "n_prompts": self.n_prompts, "text": self.text,
                "timing_disturbed": self.timing_disturbed, "rule": self.rule,
                "candidates": [{k: v for k, v in c.items() if k != "option"} for c in self.candidates]}

    @property
    def confident(self) -> bool:
        return self.answer in (YES, NO) and not self.timing_disturbed


def _candidates_predicted(predicted: pd.DataFrame) -> list[dict]:
    return [{"drafter": r["drafter"], "drafter_label": r["drafter_label"], "tree": r["tree"], "gamma": int(r["gamma"]),
             "schedule": r.get("schedule", "fixed"),
             "speedup": float(r["predicted"]), "lo": float(r["lo"]), "hi": float(r["hi"]),
             "log_se": float(np.hypot(r["acceptance_log_se"], r["cost_log_se"] if r["cost_log_se"] == r["cost_log_se"]
                                      else 0.0)),
             "n": int(r["n_prompts"]), "dof": float(r["dof"])} for _, r in predicted.iterrows()]


def _candidates_measured(options: list) -> list[dict]:
    return [{"drafter": o.drafter, "drafter_label": o.drafter_label, "tree": o.tree, "gamma": o.gamma,
             "schedule": o.schedule, "speedup": o.speedup, "lo": o.lo, "hi": o.hi, "log_se": o.log_se,
             "dof": o.dof, "option": o} for o in options]


def _adjust(candidates: list[dict], rule: VerdictRule) -> None:
    """Each candidate's ends under ``rule``: lo_adj / hi_sim at the yes level (simultaneous over the K
    options), hi_adj at the no level."""
    for c in candidates:
        args = (c["speedup"], c.get("log_se", float("nan")), c.get("dof", float("nan")))
        c["lo_adj"], c["hi_adj"] = rule.lower(*args), rule.upper(*args)
        c["hi_sim"] = c["speedup"] ** 2 / c["lo_adj"] if c["lo_adj"] > 0 else float("nan")


def _describe(c: dict) -> str:
    tree = "" if c["tree"] == "chain" else f" tree {c['tree']}"
    schedule = c.get("schedule", "fixed")
    schedule = "" if not isinstance(schedule, str) or schedule == "fixed" else f" schedule {schedule}"
    return f"{c['drafter_label']}{tree} γ={c['gamma']}{schedule}"


def _ci(c: dict, side: str = "yes") -> str:
    """The point and the adjusted interval used for ``side`` (symmetric on the log scale)."""
    point = c["speedup"]
    lo, hi = (c["lo_adj"], point ** 2 / c["lo_adj"]) if side == "yes" else (point ** 2 / c["hi_adj"], c["hi_adj"])
    return speedup_words(point, lo, hi)


def _option_for(c: dict, options: list, scenario: pd.DataFrame):
    """An `Option` (recommend's) for a candidate: the measured one when it exists, else a new one."""

    schedule = c.get("schedule", "fixed") if isinstance(c.get("schedule", "fixed"), str) else "fixed"
    for o in options:
        if (o.drafter_label, o.tree, o.gamma, o.schedule) == (c["drafter_label"], c["tree"], c["gamma"], schedule):
            return Option(o.drafter, o.drafter_label, o.drafter_params, o.tree, o.gamma, c["speedup"], c["lo_adj"],
                          c["hi_sim"], o.tokens_per_s, True, schedule, c.get("log_se", np.nan), c.get("dof", np.nan))
    rows = scenario[(scenario["drafter_label"] == c["drafter_label"]) & (scenario["tree"] == c["tree"])]
    params = str(rows["drafter_params"].iloc[0]) if len(rows) else "{}"
    return Option(c["drafter"], c["drafter_label"], params, c["tree"], c["gamma"], c["speedup"], c["lo_adj"],
                  c["hi_sim"], float("nan"), False, schedule, c.get("log_se", np.nan), c.get("dof", np.nan))


def decide_scenario(scenario: pd.DataFrame, measured_options: list, n_prompts: int, level: float = LEVEL,
                    notes: list[str] | None = None, plan: LookPlan = FIXED) -> tuple[Decision, pd.DataFrame]:
    """The answer for one scenario; ``plan``: the looks an adaptive sweep planned for it (one: a fixed grid)."""

    predicted, more = predicted_table(scenario, level)
    if predicted.empty:  # measured evidence: were its live timings all taken under interference?
        more = more + [n for n in [timing_usable(scenario[scenario["mode"] == "live"])[1]] if n]
    if notes is not None:
        notes.extend(more)
    if plan.alpha != 1 - level:
        plan = LookPlan(plan.prompts, 1 - level)
    decision = _decide(scenario, predicted, measured_options, n_prompts, plan)
    if any(n.startswith(DISTURBED) for n in more) or _rests_on_disturbed(decision, scenario):
        decision.timing_disturbed = True
        decision.text += (" — but the timing was disturbed (every timed unit ran beside other busy processes): "
                          "rerun on a quieter machine before acting on it")
    return decision, predicted


def _rests_on_disturbed(decision: Decision, scenario: pd.DataFrame) -> bool:
    """Measured evidence whose baseline, or whose chosen (or best) configuration, has no undisturbed unit: its
    speedup was timed under interference (a serving batch is flagged as a whole, so this happens per load)."""
    if decision.evidence != "measured" or decision.best is None or "timing_ok" not in scenario:
        return False
    live = scenario[scenario["mode"] == "live"]
    ok = live["timing_ok"].fillna(True).astype(bool)
    best = decision.best
    chosen = ((live["drafter_label"] == best.get("drafter_label")) & (live["tree"] == best.get("tree"))
              & (live["gamma"] == best.get("gamma")))
    base = (live["gamma"] == 0) & (live["drafter"] == TARGET_ONLY)
    return any(part.any() and not ok[part].any() for part in (chosen, base))


def _decide(scenario: pd.DataFrame, predicted: pd.DataFrame, measured_options: list, n_prompts: int,
            plan: LookPlan) -> Decision:
    if not predicted.empty:
        evidence, candidates = "predicted", _candidates_predicted(predicted)
        count = int(predicted["n_prompts"].max())
        source = (f"predicted: acceptance on {count} prompts × costs timed on "
                  f"{int(predicted['n_calibration'].max())}")
    else:
        evidence, candidates = "measured", _candidates_measured(measured_options)
        count = n_prompts
        source = f"measured on {count} prompts"
    # an option whose speedup is unknown (its acceptance or timing was not measured) is no candidate: it is
    # neither best nor worst, and its NaN would reach the verdict as "nan×"
    candidates = [c for c in candidates if np.isfinite(c["speedup"])]
    if not candidates:
        return Decision(TOO_FEW, evidence, None, None, None, count,
                        "cannot tell: nothing to compare (no option's speedup is known)")
    with_interval = [c for c in candidates if np.isfinite(c["lo"]) and np.isfinite(c["hi"])]
    rule = VerdictRule(plan, max(len(with_interval), 1))
    _adjust(candidates, rule)
    best = max(candidates, key=lambda c: c["speedup"])
    best_dict = _summary(best)
    kept = [{k: v for k, v in c.items() if k != "option"} for c in candidates]
    if not with_interval or count < MIN_PROMPTS:
        text = (f"too few prompts to tell (P = {count}); best point estimate {_describe(best)} at "
                f"{best['speedup']:.2f}× — measure ≥ {MIN_PROMPTS} prompts (≥ 10 for a useful interval)")
        return Decision(TOO_FEW, evidence, None, best_dict, None, count, text, rule=rule.as_dict(), candidates=kept)
    how = f"{source}; {rule.describe()}"
    above = [c for c in with_interval if c["lo_adj"] > 1.0]
    if above:
        pick = max(above, key=lambda c: c["speedup"])
        option = _option_for(pick, measured_options, scenario)
        text = (f"confident yes: speculate with {_describe(pick)}, {_ci(pick)} ({how}; the best of "
                f"{len(above)} option(s) whose adjusted interval lies above 1)")
        return Decision(YES, evidence, option, _summary(pick), None, count, text, rule=rule.as_dict(),
                        candidates=kept)
    if all(c["hi_adj"] < 1.0 for c in with_interval):
        text = (f"confident no: no option's interval lies above 1, every one lies below 1 ({how}); best "
                f"{_describe(best)} at {_ci(best, 'no')}")
        return Decision(NO, evidence, None, best_dict, None, count, text, rule=rule.as_dict(), candidates=kept)
    ref = max(with_interval, key=lambda c: c["speedup"])
    side = "yes" if ref["speedup"] > 1 else "no"
    needed = prompts_to_settle(ref["speedup"], ref["log_se"], count, lambda dof: rule.quantile(dof, side))
    settle = (f"about {needed} prompts would settle it at the observed per-prompt spread" if needed
              else "no practical number of prompts would settle it: the speedup is too close to 1")
    text = f"cannot tell: best {_describe(ref)} at {_ci(ref, side)} ({how}); its interval contains 1 — {settle}"
    return Decision(UNSURE, evidence, None, _summary(ref), needed, count, text, rule=rule.as_dict(), candidates=kept)


def _summary(c: dict) -> dict:
    return {k: c.get(k) for k in ("drafter_label", "tree", "gamma", "schedule", "speedup", "lo", "hi", "lo_adj",
                                  "hi_adj", "hi_sim")}


def dominated(decision: Decision) -> list[tuple]:
    """Options confidently below the best (racing): their simultaneous upper end lies under the best
    simultaneous lower end. Keys are `CANDIDATE_KEYS` tuples."""
    usable = [c for c in decision.candidates if np.isfinite(c.get("lo_adj", np.nan))]
    if len(usable) < 2:
        return []
    floor = max(c["lo_adj"] for c in usable)
    return [tuple(c[k] for k in CANDIDATE_KEYS) for c in usable if c["hi_sim"] < floor]

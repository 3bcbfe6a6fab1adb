"""The recommender's one result type, `Recommendation`, and its one JSON form.

One `Recommendation` per scenario (target, workload, sampling), whatever the cost source
(`specbench.analysis.cost.source`):

* with the sweep's own costs (`MeasuredCosts`, batch 1): the decision (the one configuration to deploy,
  `final`, and how flat the optimum is around it, `flat_range`), the measured and the model path's own
  bests (`Pick`: supporting detail, never a second recommendation), the options, the model curves, the
  fitted costs and the engine settings;
* with a hardware profile's costs (`ProfiledCosts`): ``per_batch`` — γ (or none) per batch size,
  one `DrafterPlan` per drafter, and vLLM's per-batch-size schedule.

The fields of the other path stay empty (None, an empty frame), so one printer and one JSON form
(`recommendation_dict`: the same keys in every object) serve both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specbench.analysis.options import Option
from specbench.analysis.recommendation.confirm_report import Report
from specbench.analysis.recommendation.confirmed import deployment
from specbench.analysis.settings.engine_settings import EngineSetting
from specbench.analysis.statistics.speedup_interval import speedup_words
from specbench.analysis.verdicts.decision import describe_best
from specbench.analysis.verdicts.stopping_history import History
from specbench.analysis.verdicts.verdict import UNSURE, Decision
from specbench.catalogue import engines as catalogue_engines
from specbench.safe_files import json_ready


@dataclass
class Pick:
    """The outcome of one path (measured or model) for one scenario."""

    source: str  # 'measured' or 'model'
    choice: Option | None  # None: no speculation
    best: Option | None  # the best point estimate, whatever its interval
    gamma_lo: int | None = None
    gamma_hi: int | None = None
    win_share: float | None = None
    reason: str = ""


@dataclass
class DrafterPlan:
    """One drafter of one scenario priced by a profile: predicted speedups over (batch, γ) and the γ
    chosen per batch size (see `specbench.analysis.recommendation.profiled`)."""

    drafter: str
    drafter_label: str
    drafter_params: str
    profile_drafter: str
    alpha: float
    acceptance_model: str
    propose_rate: float
    batches: np.ndarray  # [nB] every integer batch size 1..max
    gammas: np.ndarray  # [G] 0..max_gamma
    speedup: np.ndarray  # [nB, G] point estimates (γ = 0: 1)
    lo: np.ndarray  # [nB, G]
    hi: np.ndarray  # [nB, G]
    round_s: np.ndarray  # [nB, G] predicted seconds per round
    tokens: np.ndarray  # [G] tokens per sequence and round
    chosen: np.ndarray  # [nB] γ chosen (0: no speculation)

    def at(self, batch: int) -> dict:
        i = int(batch) - 1
        g = int(self.chosen[i])
        return {
            "drafter_label": self.drafter_label,
            "batch": int(batch),
            "gamma": g,
            "speedup": float(self.speedup[i, g]),
            "lo": float(self.lo[i, g]),
            "hi": float(self.hi[i, g]),
            "best_gamma": int(np.argmax(self.speedup[i])),
            "tokens_per_s": float(batch * self.tokens[g] / self.round_s[i, g]),
            "baseline_tokens_per_s": float(batch / self.round_s[i, 0]),
        }


@dataclass
class BatchPlan:
    """γ per batch size for one scenario (a profile's costs)."""

    context: int  # tokens in the KV cache while decoding, the costs were read at
    batches: list[int]  # the batch sizes asked
    plans: list[DrafterPlan]
    table: pd.DataFrame  # per asked batch: the best drafter's choice (or none)
    vllm: dict | None  # {"drafter_label", "config", "snippet", "supported", "notes"}; None: no batch speculates

    @property
    def speculates(self) -> bool:
        return bool(len(self.table)) and bool((self.table["gamma"] > 0).any())


@dataclass
class Recommendation:
    keys: dict  # the scenario
    cost_source: str  # where the round costs came from (`CostSource.describe`)
    objective: str
    n_prompts: int
    max_new_tokens: int
    verdict: str
    notes: list[str] = field(default_factory=list)
    settings: dict[str, EngineSetting] = field(default_factory=dict)
    # the sweep's own costs (batch 1)
    baseline_tokens_per_s: float | None = None
    measured: Pick | None = None
    model: Pick | None = None
    options: pd.DataFrame = field(default_factory=pd.DataFrame)  # measured configurations, speedups with intervals
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)  # model predictions per (drafter, tree, γ)
    costs: pd.DataFrame = field(default_factory=pd.DataFrame)  # per (drafter, tree): the cost fit's coefficients
    predicted: pd.DataFrame = field(default_factory=pd.DataFrame)  # acceptance × cost (predicted_speedup)
    decision: Decision | None = None  # confident yes / confident no / cannot tell
    # best dynamic verify-length schedule vs best fixed γ (`specbench.analysis.recommendation.schedule_comparison`); None: not swept
    schedules: dict | None = None
    # online adaptation vs the static drafter over a stream, without and with its training cost
    # (`specbench.analysis.stream_adaptation.online_verdict`); None: no online configuration
    online: dict | None = None
    # a profile's costs
    per_batch: BatchPlan | None = None

    @property
    def final(self) -> Option | None:
        """What to deploy at the sweep's load: the decision's option when its yes is confident (undisturbed
        timing), else nothing — the engine settings, the ★ and the figures' star all follow it; without a
        decision the measured choice (the model only proposes what to measure next). None with a profile's
        costs: the answer is ``per_batch``."""
        if self.decision is not None:
            return self.decision.option if self.decision.confident else None
        return None if self.measured is None else self.measured.choice

    @property
    def flat_range(self) -> dict | None:
        """How flat the optimum is around the recommended configuration (`specbench.analysis.verdicts.decision.flat_range`:
        the configurations not confidently below it); None when nothing is recommended."""
        if self.final is None or self.decision is None:
            return None
        return self.decision.flat

    def headline(self) -> str:
        """What to deploy, in a few words, the same in every panel and figure title: the verdict's configuration,
        or why there is none ('cannot tell (best so far …)', 'confident no: no speculation', …)."""
        if self.decision is not None:
            return self.decision.headline()
        if self.per_batch is not None:
            return "γ per batch size" if self.per_batch.speculates else "no speculation at any batch size"
        final = self.final
        return f"recommended: {final.describe()}" if final is not None else "no speculation"

    @property
    def speculates(self) -> bool:
        """Whether the answer is to speculate anywhere (at batch 1 of the sweep, or at some batch size)."""
        return self.final is not None or (self.per_batch is not None and self.per_batch.speculates)


# ----------------------------------------------------------------------------- words


def recommendation_lines(rec: Recommendation) -> list[str]:
    """The printed recommendation, the same in `recommend`, `results show` and the HTML report: one line naming
    the one configuration to deploy (or why there is none), and one saying how flat the optimum is."""
    decision = rec.decision
    final = rec.final
    if decision is None:  # a profile's costs: the answer is per batch size
        return [f"recommended: {rec.headline()}"]
    if final is not None:
        rule = (
            decision.rule.get("configurations")
            if isinstance(decision.rule, dict)
            else getattr(decision.rule, "configurations", None)
        )
        among = (
            f" and for picking among {rule} configurations"
            if rule and rule > 1
            else ""
            if rule == 1
            else " and for picking among the configurations"
        )
        lines = [
            f"recommended: {final.describe()} at {speedup_words(final.speedup, final.lo, final.hi)} (interval "
            f"adjusted for the looks{among})"
        ]
        if rec.flat_range:
            lines.append(f"how flat: {rec.flat_range['text']}")
        return lines
    best = decision.best
    name = describe_best(best)
    if decision.timing_disturbed and decision.answer.decided:
        return [f"recommended: nothing yet — {decision.headline()}; rerun on a quieter machine"]
    if decision.says_no:
        return ["recommended: no speculation — confident no"]
    if not name or best is None:  # describe_best names no missing best
        return [f"recommended: no speculation — {decision.headline()}"]
    point, lo = best.speedup, best.lo_adj
    hi = point**2 / lo if lo > 0 else float("nan")
    words = speedup_words(point, lo, hi)
    unsure = decision.answer == UNSURE
    what = str(UNSURE) if unsure else decision.headline()
    lines = [f"recommended: no speculation until it is settled — {what}; best so far {name} at {words}"]
    if decision.flat and unsure:
        lines.append(f"how flat, around the best so far: {decision.flat['text']}")
    return lines


# ----------------------------------------------------------------------------- JSON


def _option_dict(option: Option | None) -> dict | None:
    return None if option is None else {k: getattr(option, k) for k in option.__dataclass_fields__}


def _pick_dict(pick: Pick | None) -> dict | None:
    if pick is None:
        return None
    return {
        "source": pick.source,
        "best_above_1": _option_dict(pick.choice),
        "best": _option_dict(pick.best),
        "gamma_interval": [pick.gamma_lo, pick.gamma_hi],
        "win_share": pick.win_share,
        "reason": pick.reason,
    }


def _batch_dict(plan: BatchPlan | None) -> dict | None:
    if plan is None:
        return None
    drafters = [
        {
            "drafter": p.drafter,
            "drafter_label": p.drafter_label,
            "profile_drafter": p.profile_drafter,
            "alpha": p.alpha,
            "acceptance_model": p.acceptance_model,
            "propose_rate": p.propose_rate,
            "per_batch": [p.at(b) for b in plan.batches],
            "schedule": ranges(p.chosen),
        }
        for p in plan.plans
    ]
    return {
        "context": plan.context,
        "batches": plan.batches,
        "choices": plan.table.to_dict("records"),
        "drafters": drafters,
        catalogue_engines.schedule_engine(): plan.vllm,  # the engine the per-batch-size schedule is written for
    }


def ranges(chosen: np.ndarray) -> list[list[int]]:
    """[[first batch, last batch, γ], ...] runs of equal γ over batch sizes 1..len(chosen)."""
    out: list[list[int]] = []
    for i, g in enumerate(np.asarray(chosen, dtype=int), start=1):
        if out and out[-1][2] == g:
            out[-1][1] = i
        else:
            out.append([i, i, int(g)])
    return out


def recommendation_dict(rec: Recommendation) -> dict:
    """Plain data (JSON-ready: non-finite numbers become null) for one recommendation; the same keys
    whatever the cost source (the other path's are null or empty)."""
    return json_ready(
        {
            **rec.keys,
            "cost_source": rec.cost_source,
            "objective": rec.objective,
            "n_prompts": rec.n_prompts,
            "max_new_tokens": rec.max_new_tokens,
            "baseline_tokens_per_s": rec.baseline_tokens_per_s,
            "verdict": rec.verdict,
            "headline": rec.headline(),
            # the one configuration to deploy (the decision's option on a confident yes; the ★ everywhere) and how flat
            # the optimum is around it; each path's own best is supporting detail, never a second recommendation
            "recommended": _option_dict(rec.final),
            "flat_range": rec.flat_range,
            "supporting": {"measured": _pick_dict(rec.measured), "model": _pick_dict(rec.model)},
            "options": rec.options.to_dict("records"),
            "predictions": rec.curves.to_dict("records"),
            "costs": rec.costs.to_dict("records"),
            "engine_settings": {name: s.as_dict() for name, s in rec.settings.items()},
            "notes": rec.notes,
            "decision": None if rec.decision is None else rec.decision.as_dict(),
            "predicted": rec.predicted.to_dict("records"),
            "per_batch": _batch_dict(rec.per_batch),
            "schedules": rec.schedules,
            "online": rec.online,
        }
    )


def to_json(
    recs: list[Recommendation],
    load: list[dict] | None = None,
    history: History | None = None,
    operating: list[dict] | None = None,
    confirmation: Report | None = None,
    context: list[dict | None] | None = None,
    quantization: list | None = None,
) -> str:
    """The recommendations as a JSON list; ``load`` (one per recommendation, from a serving sweep with a load
    axis — `specbench.analysis.load.verdicts.for_scenario`: the per-load table, the verdicts, the crossovers,
    vLLM's per-batch-size schedules) goes under each one's ``load`` key (null otherwise); ``history`` (an
    adaptive sweep's stopping history) gives each its workload's looks under ``stopping_history`` (null for a
    fixed grid); ``operating`` (one per recommendation: `specbench.analysis.load.operating.for_scenario`: goodput, cost
    and energy per load, the energy- and throughput-optimal γ) under ``operating`` (null otherwise);
    ``confirmation`` (`specbench confirm`'s report) gives each its workload's targets — predicted against
    realized, held or missed, the regret — under ``confirmation`` (null when not confirmed); ``context`` (one per
    recommendation, records spanning two or more context-length bins: `specbench.analysis.context.summary.context_for`:
    the verdicts per bin, the crossover length, the length-aware setting) under ``context`` (null otherwise);
    ``quantization`` (one per recommendation: `specbench.analysis.recommendation.quantization.for_recommendation`)
    under ``quantization`` (null where no draft model names a GGUF type)."""
    dicts = [recommendation_dict(r) for r in recs]
    looks = history.workloads if history is not None else {}
    none_each: list[dict | None] = [None] * len(dicts)
    for d, c, r, o, x in zip(dicts, load or none_each, recs, operating or none_each, context or none_each):
        d["load"] = None if c is None else json_ready(c)
        d["context"] = None if x is None else json_ready(x)
        d["operating"] = None if o is None else json_ready(o)
        entry = looks.get(str(r.keys.get("workload")))
        d["stopping_history"] = (json_ready(entry.as_dict()) if entry is not None else None) if looks else None
        if confirmation is not None:
            mine = confirmation.for_workload(str(r.keys.get("workload")))
            d["confirmation"] = json_ready(
                {
                    "targets": [t.as_dict() for t in mine],
                    "lines": [t.line() for t in mine],
                    "deploy": [deployment(t).as_dict() for t in mine],
                    "absent": confirmation.absent,
                    "notes": confirmation.notes,
                }
            )
        else:
            d["confirmation"] = None
    for d, q in zip(dicts, quantization or none_each):
        d["quantization"] = None if q is None else json_ready(q.as_dict())
    return json.dumps(dicts, indent=2)

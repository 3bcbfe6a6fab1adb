"""The per-workload answer: confident yes, confident no, or cannot tell — and on what evidence.

Evidence, in order of preference:

1. the **predicted** speedups (`specbench.analysis.cost.predicted_speedup`: acceptance over every prompt
   × costs timed interleaved with the baseline), when the scenario has them and the cost model passes its
   check (no configuration's realized ÷ predicted on the calibration prompts lies confidently outside
   [1/(1 + ε), 1 + ε], `specbench.analysis.cost.predicted_speedup.model_misses`);
2. otherwise the **measured** speedups (live units paired with the baseline, t-interval of
   `specbench.analysis.statistics.speedup_interval`).

Answer (`specbench.analysis.statistics.sequential.VerdictRule`: the ends below are adjusted for picking the
best of the K options and, in an adaptive sweep, for its planned looks): *confident yes* when
some option's selection-adjusted lower end lies above 1 (the one with the highest point estimate
among those is recommended, and its interval is the adjusted one); *confident no* when every
option's look-adjusted upper end lies below 1; *too few prompts to tell (P = n)* when no option
has an interval; *cannot tell* otherwise, with the prompts that would settle the best option at
its observed per-prompt spread under the same rule.

Measured evidence reads each configuration's units by rule 6 of the timing protocol for a paired
comparison (`specbench.records.timing.paired_timing`, the rule every panel uses): a configuration none of
whose pairs with the baseline ran undisturbed is *timed under interference*. Such configurations are
listed but left out of the answer while any other configuration was timed undisturbed (the text names
them); when every one was disturbed they are the answer's evidence, and the answer is not confident.

Each candidate keeps its adjusted ends (``Decision.candidates``, `specbench.analysis.verdicts.verdict.Candidate`), so an
adaptive sweep can also drop the options that are confidently below the best (`dominated`), and the answer says
how flat the optimum is (`flat_range`): the configurations *within* the chosen one's interval are those not
confidently below it by the same rule — their simultaneous upper end is not under its simultaneous lower end
(docs/fit.md, "How flat the optimum is"). The verdict's types (`Answer`, `Candidate`, `Decision`) are in
`specbench.analysis.verdicts.verdict`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specbench.analysis.cost.predicted_speedup import model_misses, predicted_evidence
from specbench.analysis.options import Option
from specbench.analysis.statistics.intervals import LEVEL
from specbench.analysis.statistics.paired_ratio import PerPrompt
from specbench.analysis.statistics.sequential import FIXED, LookPlan, VerdictRule, prompts_to_settle
from specbench.analysis.statistics.speedup_interval import MIN_PROMPTS, speedup_words
from specbench.analysis.verdicts.choice import TOLERANCE, Choice, choose, gamma_span
from specbench.analysis.verdicts.verdict import NO, TOO_FEW, UNSURE, YES, Candidate, Decision, three_way
from specbench.records.rounds import prompt_clusters
from specbench.records.timing import DISTURBED, paired_note

__all__ = [
    "Candidate",
    "Decision",
    "decide_options",
    "decide_scenario",
    "describe_best",
    "dominated",
    "flat_range",
    "gamma_span",
    "measured_samples",
]


def _candidates_predicted(predicted: pd.DataFrame) -> list[Candidate]:
    return [
        Candidate(
            r["drafter"],
            r["drafter_label"],
            r["tree"],
            int(r["gamma"]),
            r.get("schedule", "fixed"),
            float(r["predicted"]),
            float(r["lo"]),
            float(r["hi"]),
            float(np.hypot(r["acceptance_log_se"], r["cost_log_se"] if r["cost_log_se"] == r["cost_log_se"] else 0.0)),
            float(r["dof"]),
            int(r["n_prompts"]),
        )
        for _, r in predicted.iterrows()
    ]


def _candidates_measured(options: list) -> list[Candidate]:
    return [
        Candidate(
            o.drafter,
            o.drafter_label,
            o.tree,
            o.gamma,
            o.schedule,
            o.speedup,
            o.lo,
            o.hi,
            o.log_se,
            o.dof,
            option=o,
            timing_disturbed=bool(o.timing_disturbed),
        )
        for o in options
    ]


def describe_best(best: Candidate | None) -> str:
    """A decision's best (or chosen) configuration by name — '' when there is none or it lacks a name."""
    if best is None or best.drafter_label is None or best.gamma is None:
        return ""
    return best.describe()


def _ci(c: Candidate, side: str = "yes") -> str:
    """The point and the adjusted interval used for ``side`` (symmetric on the log scale)."""
    point = c.speedup
    lo, hi = (c.lo_adj, point**2 / c.lo_adj) if side == "yes" else (point**2 / c.hi_adj, c.hi_adj)
    return speedup_words(point, lo, hi)


def _option_for(c: Candidate, options: list, scenario: pd.DataFrame):
    """An `Option` (recommend's) for a candidate: the measured one when it exists, else a new one."""

    schedule = c.schedule if isinstance(c.schedule, str) else "fixed"
    for o in options:
        if (o.drafter_label, o.tree, o.gamma, o.schedule) == (c.drafter_label, c.tree, c.gamma, schedule):
            return Option(
                o.drafter,
                o.drafter_label,
                o.drafter_params,
                o.tree,
                o.gamma,
                c.speedup,
                c.lo_adj,
                c.hi_sim,
                o.tokens_per_s,
                True,
                schedule,
                c.log_se,
                c.dof,
                timing_disturbed=o.timing_disturbed,
            )
    rows = scenario[(scenario["drafter_label"] == c.drafter_label) & (scenario["tree"] == c.tree)]
    params = str(rows["drafter_params"].iloc[0]) if len(rows) else "{}"
    return Option(
        str(c.drafter),
        str(c.drafter_label),
        params,
        str(c.tree),
        int(c.gamma or 0),
        c.speedup,
        c.lo_adj,
        c.hi_sim,
        float("nan"),
        False,
        schedule,
        c.log_se,
        c.dof,
    )


def decide_scenario(
    scenario: pd.DataFrame,
    measured_options: list,
    n_prompts: int,
    level: float = LEVEL,
    notes: list[str] | None = None,
    plan: LookPlan = FIXED,
    tolerance: float = TOLERANCE,
    out_of_race: set[tuple] | None = None,
) -> tuple[Decision, pd.DataFrame]:
    """The answer for one scenario; ``plan``: the looks an adaptive sweep planned for it (one: a fixed grid);
    ``tolerance``: ε of the choice; ``out_of_race``: options an earlier look took out of the race."""

    predicted, more, samples = predicted_evidence(scenario, level)
    evidence = predicted
    misses = model_misses(predicted, level, tolerance)
    if not misses.empty and measured_options:  # the model failed its check: choose by what was measured
        more.append(model_miss_note(misses))
        evidence = predicted.iloc[0:0]
    if evidence.empty:  # measured evidence: were its live timings all taken under interference?
        more = more + [n for n in [paired_note(scenario[scenario["mode"] == "live"])] if n]
        samples = measured_samples(scenario)
    if notes is not None:
        notes.extend(more)
    if plan.alpha != 1 - level:
        plan = LookPlan(plan.prompts, 1 - level)
    decision = decide_options(scenario, evidence, measured_options, n_prompts, plan, tolerance, samples, out_of_race)
    rests_on_disturbed = decision.best is not None and decision.best.timing_disturbed
    if any(n.startswith(DISTURBED) for n in more) or rests_on_disturbed:
        decision.timing_disturbed = True
        decision.text += (
            " — but the timing was disturbed (no configuration was timed undisturbed beside its "
            "baseline: every comparison ran beside other busy processes): rerun on a quieter machine "
            "before acting on it"
        )
    return decision, predicted


def model_miss_note(misses: pd.DataFrame) -> str:
    """One line naming the configurations the cost model mispriced (`model_misses`) and what the verdict rests on."""
    worst = misses.iloc[int(np.argmax(np.abs(np.log(misses["realized_over_predicted"]))))]
    others = "" if len(misses) == 1 else f" (and {len(misses) - 1} more)"
    return (
        f"the cost model failed its check: {worst['drafter_label']} γ={int(worst['gamma'])} ran at "
        f"{worst['realized_over_predicted']:.2f}× its predicted speed [{worst['realized_lo']:.2f}, "
        f"{worst['realized_hi']:.2f}] on its {int(worst['n_measured'])} calibration prompts{others}, more than the "
        "choice's tolerance: the verdict rests on the measured speedups"
    )


def decide_options(
    scenario: pd.DataFrame,
    predicted: pd.DataFrame,
    measured_options: list,
    n_prompts: int,
    plan: LookPlan,
    tolerance: float = TOLERANCE,
    samples: dict[tuple, PerPrompt] | None = None,
    out_of_race: set[tuple] | None = None,
) -> Decision:
    """The verdict over the candidates: the predicted speedups when the sweep has a cost model (``predicted``),
    else the measured options; each interval adjusted for ``plan``'s looks and the number of candidates
    (`VerdictRule`). The direction is `three_way`'s; the choice among the options is settled by paired
    comparisons of ``samples`` (`specbench.analysis.verdicts.choice`, tolerance ε = ``tolerance``) — without
    samples, the best point estimate among those whose adjusted interval lies above 1, unsettled.
    `decide_scenario` adds the notes; the stopping simulation calls this directly."""
    if not predicted.empty:
        evidence, candidates = "predicted", _candidates_predicted(predicted)
        count = int(predicted["n_prompts"].max())
        source = f"predicted: acceptance on {count} prompts × costs timed on {int(predicted['n_calibration'].max())}"
    else:
        evidence, candidates = "measured", _candidates_measured(measured_options)
        count = n_prompts
        source = f"measured on {count} prompts"
    # an option whose speedup is unknown (its acceptance or timing was not measured) is no candidate: it is
    # neither best nor worst, and its NaN would reach the verdict as "nan×"
    candidates = [c for c in candidates if c.has_point]
    if not candidates:
        return Decision(
            TOO_FEW,
            evidence,
            None,
            None,
            None,
            count,
            "too few prompts to tell: no configuration has a unit paired with the baseline and a known "
            "speedup (nothing to compare)",
        )
    clean = [c for c in candidates if not c.timing_disturbed]
    left_out = [c for c in candidates if c.timing_disturbed] if clean else []
    candidates = clean or candidates  # disturbed ones answer only when nothing else can (then not confidently)
    with_interval = [c for c in candidates if c.has_interval]
    rule = VerdictRule(plan, max(len(with_interval), 1))
    for c in candidates + left_out:
        c.adjust(rule)
    kept = candidates + left_out
    best = max(candidates, key=lambda c: c.speedup if c.has_point else -np.inf)
    aside = (
        ""
        if not left_out
        else "; left out, no pair with the baseline timed undisturbed: " + ", ".join(c.describe() for c in left_out)
    )
    if not with_interval or count < MIN_PROMPTS:
        point = f"{best.speedup:.2f}×" if best.has_point else "no finite speedup"
        text = (
            f"too few prompts to tell (P = {count}); best point estimate {best.describe()} at "
            f"{point} — measure ≥ {MIN_PROMPTS} prompts (≥ 10 for a useful interval){aside}"
        )
        return Decision(TOO_FEW, evidence, None, best, None, count, text, rule=rule, candidates=kept)
    how = f"{source}; {rule.describe()}{aside}"
    answer, pick = three_way(candidates)
    assert pick is not None  # some candidate has an interval here, so the answer names one
    choice = choose(with_interval, samples or {}, plan, tolerance, out_of_race) if answer != NO else None
    if answer == YES:
        return _yes(pick, choice, with_interval, how, evidence, count, rule, kept, measured_options, scenario)
    if answer == NO:
        text = (
            f"confident no: no option's interval lies above 1, every one lies below 1 ({how}); best "
            f"{best.describe()} at {_ci(best, 'no')}"
        )
        return Decision(NO, evidence, None, best, None, count, text, rule=rule, candidates=kept)
    ref = pick
    side = "yes" if ref.speedup > 1 else "no"
    needed = prompts_to_settle(ref.speedup, ref.log_se, count, lambda dof: rule.quantile(dof, side))
    settle = (
        f"about {needed} prompts would settle it at the observed per-prompt spread"
        if needed
        else "no practical number of prompts would settle it: the speedup is too close to 1"
    )
    text = f"cannot tell: best {ref.describe()} at {_ci(ref, side)} ({how}); {_open_because(ref, with_interval)} — {settle}"
    return Decision(
        UNSURE,
        evidence,
        None,
        ref,
        needed,
        count,
        text,
        rule=rule,
        candidates=kept,
        flat=flat_range(ref, with_interval, choice),
        choice=choice,
    )


def _yes(pick, choice, with_interval, how, evidence, count, rule, kept, measured_options, scenario) -> Decision:
    """A confident yes: the direction from the options whose adjusted interval lies above 1, the option from the
    choice (the certified pick; while the choice is open, the best estimate still in the race)."""
    above = [c for c in with_interval if c.lo_adj > 1.0]
    by_key = {c.key: c for c in with_interval}
    if choice is not None:
        pick = by_key.get(choice.chosen if choice.settled else choice.leader, pick)
    option = _option_for(pick, measured_options, scenario)
    direction = f"the adjusted interval of {len(above)} option(s) lies above 1"
    surest = None
    if pick.lo_adj <= 1.0:
        surest = max(above, key=lambda c: c.lo_adj)
        direction += f"; surest {surest.describe()} at {_ci(surest)}"
    if choice is None:
        chosen = "the best of the options above 1 (no paired comparison of the options)"
    else:
        chosen = choice.text
    text = f"confident yes: speculate with {pick.describe()}, {_ci(pick)} ({how}; {direction}); {chosen}"
    needed = None if choice is None or choice.settled else choice.prompts_needed
    return Decision(
        YES,
        evidence,
        option,
        pick,
        needed,
        count,
        text,
        rule=rule,
        candidates=kept,
        flat=flat_range(pick, with_interval, choice),
        choice=choice,
        surest=surest,
    )


def _open_because(ref: Candidate, with_interval: list[Candidate]) -> str:
    """Which interval keeps a "cannot tell" open: the best estimate's when it contains 1, else the option whose
    adjusted interval still reaches 1 (the best estimate's lies wholly on one side)."""
    if ref.lo_adj <= 1.0 <= ref.hi_adj or not np.isfinite(ref.hi_adj):
        return "its interval contains 1"
    reaching = [c for c in with_interval if c.hi_adj >= 1.0 and c.key != ref.key]
    if not reaching:
        return "its interval contains 1"
    other = max(reaching, key=lambda c: c.hi_adj)
    where = "above" if ref.lo_adj > 1.0 else "below"
    return f"its interval lies {where} 1, but {other.describe()}'s, {_ci(other, 'no')}, reaches 1"


def measured_samples(scenario: pd.DataFrame) -> dict[tuple, PerPrompt]:
    """Per configuration of a scenario's live units (keyed (drafter label, tree, γ, schedule)): Σ decode tokens and
    Σ decode seconds per prompt, its turns summed — the evidence for paired comparisons when the sweep has no cost
    model. Units timed under interference are left out while a configuration has others."""
    live = scenario[(scenario["mode"] == "live") & (scenario["gamma"] > 0)] if len(scenario) else scenario
    if live.empty:
        return {}
    if "schedule" not in live:
        live = live.assign(schedule="fixed")
    if "timing_ok" in live:
        ok = live["timing_ok"].fillna(True).astype(bool)
        live = live[ok] if ok.any() else live
    clusters = prompt_clusters(live)
    out = {}
    for key, group in live.groupby(["drafter_label", "tree", "gamma", "schedule"], dropna=False, sort=True):
        sums = group.groupby(group["prompt_id"].astype(str))[["decode_tokens", "decode_s"]].sum()
        sums = sums.reindex(clusters).dropna()
        out[(key[0], key[1], int(key[2]), key[3])] = PerPrompt(sums["decode_tokens"], sums["decode_s"])
    return out


def _confidently_below(c: Candidate, floor: float) -> bool:
    """The one rule for "confidently below": ``c``'s simultaneous upper end lies under ``floor`` (another option's
    simultaneous lower end)."""
    return bool(np.isfinite(c.hi_sim) and c.hi_sim < floor)


def dominated(decision: Decision) -> list[tuple]:
    """Options that leave the race: confidently more than ε behind another option by the paired comparisons of
    the choice (`specbench.analysis.verdicts.choice`); without a choice, those whose simultaneous upper end lies
    under the best simultaneous lower end. Keys are `Candidate.key` tuples (drafter label, tree, γ, schedule)."""
    if decision.choice is not None:
        return list(decision.choice.behind)
    usable = [c for c in decision.candidates if np.isfinite(c.lo_adj)]
    if len(usable) < 2:
        return []
    floor = max(c.lo_adj for c in usable)
    return [c.key for c in usable if _confidently_below(c, floor)]


def _same_group(a: Candidate, b: Candidate) -> bool:
    return (a.drafter_label, a.tree, a.schedule) == (b.drafter_label, b.tree, b.schedule)


def flat_range(chosen: Candidate, candidates: list[Candidate], choice: Choice | None = None) -> dict:
    """How flat the optimum is around ``chosen``, as data and in words. With a choice (paired comparisons): the
    ε-equivalent set once settled, the options still in the race while open. Without one: the candidates (with an
    interval) *within* its interval — not confidently below it by their simultaneous ends. ``gammas``: those of
    the chosen's own drafter, tree and schedule (the chosen γ among them); ``others``: other drafters' within."""
    if choice is not None:
        return _flat_from_choice(chosen, candidates, choice)
    floor = chosen.lo_adj
    within = [c for c in candidates if not _confidently_below(c, floor)] if np.isfinite(floor) else [chosen]
    gammas = sorted({int(c.gamma or 0) for c in within if _same_group(c, chosen)} | {int(chosen.gamma or 0)})
    others = [c.describe() for c in within if not _same_group(c, chosen)]
    group = [c for c in candidates if _same_group(c, chosen)]
    if len(gammas) > 1:
        text = f"{gamma_span(gammas)} within the interval (none of them confidently below γ={chosen.gamma})"
    elif len(group) > 1:
        text = f"a sharp optimum: every other γ measured is confidently below γ={chosen.gamma}"
    else:
        text = f"only γ={chosen.gamma} was compared for this drafter"
    if others:
        text += "; also within: " + ", ".join(others)
    return {"gammas": gammas, "others": others, "configurations": [c.summary_dict() for c in within], "text": text}


def _flat_from_choice(chosen: Candidate, candidates: list[Candidate], choice: Choice) -> dict:
    keys = set(choice.equivalent if choice.settled else choice.race) | {chosen.key}
    within = [c for c in candidates if c.key in keys]
    gammas = sorted({int(c.gamma or 0) for c in within if _same_group(c, chosen)})
    others = [c.describe() for c in within if not _same_group(c, chosen)]
    return {
        "gammas": gammas,
        "others": others,
        "configurations": [c.summary_dict() for c in within],
        "text": choice.text,
        "tolerance": choice.tolerance,
        "settled": choice.settled,
    }

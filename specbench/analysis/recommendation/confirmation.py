"""A recommendation checked on prompts the sweep never used: realized against predicted, held or missed, and the
regret of the choice against the engines' own adaptive mechanisms.

`specbench confirm RESULTS` (`specbench.measure.run.confirm`) runs, on fresh prompts of each decided workload, the
target alone (the baseline), the configuration the verdict named (the *recommendation*) and its *contenders*
— the adaptive mechanisms the backend ships (the own engine's verify-length schedules, vLLM's per-batch-size
schedule and acceptance-adaptive K) and the static γ the sweep's other panels named — all live, interleaved
under the sweep's timing protocol. Here the records are judged; nothing runs.

Every comparison is a paired ratio of tokens/s on the same fresh prompts (`speedup_interval`: Σ decode tokens ÷
Σ decode seconds per prompt, a t-interval on the per-prompt log-ratio contributions), measured in looks of
prompts planned before any data (`specbench.analysis.statistics.sequential.LookPlan`), so each interval below is adjusted
for the looks (a Pocock boundary) like the sweep's own.

**Held or missed** (the sweep's prediction P = [L_p, U_p]: its verdict's adjusted interval for the configuration
it named; the realized speedup Ŝ_r with its look-adjusted two-sided 95 % interval Q = [L_r, U_r]):

* a *yes* verdict **held** when Q lies above 1 (speculating pays on fresh prompts) and Q meets P (the size
  is what was predicted); a *no* verdict held when Q lies below 1 and meets P;
* **missed** when Q lies on the other side of 1 (a yes that does not pay, a no that would have), or when Q and
  P do not meet (slower, or faster, than predicted);
* otherwise **not settled yet**, with the prompts that would settle it at the observed per-prompt spread.

Why this rule: when the prediction is right (the true speedup S lies in P and on its side of 1), "missed"
needs Q to exclude S, which happens with probability ≤ α = 5 % over all the looks; a wrong *direction* is
called "held" only if Q clears 1 on the wrong side of S, probability ≤ α/2. A prediction biased upward by
the winner's curse — the best of K options picked on a lucky subset — is caught as soon as Q falls below
P. Overlap alone would be too lenient (two wide intervals always meet), and a point estimate on the right
side of 1 too noisy: the rule asks for the direction to be *confirmed* and the size to be *consistent*.
docs/fit.md ("Recommendations that prove themselves") shows the rates by simulation.

**Regret** is the best contender's tokens/s ÷ the recommendation's, paired per prompt, with the ends of
`specbench.analysis.statistics.sequential.VerdictRule` for the best of K contenders and the looks: *a contender beats
the recommendation* when some adjusted lower end lies above 1 (`three_way`'s yes), *none does* when every
adjusted upper end lies below 1, otherwise not settled. The regret in percent is 1 − 1 ÷ ratio when the
ratio is above 1 (the throughput the recommendation leaves behind), 0 otherwise.

**Loads** (a serving sweep's per-batch-size schedule, `specbench.analysis.load.verdicts`): at each load on
either side of every threshold of the schedule, its system throughput (Σ tokens ÷ the batch's wall time)
is compared with the best static γ and with the baseline; a *cliff* is a load where the schedule is
confidently below both (each ratio's look-adjusted upper end under 1), and it names the threshold.

Types: `Arm` (a configuration the confirmation runs), `Prediction`, `Target` (one workload, or one workload
at one load), `Comparison`, `Check`, `Regret`, `TargetResult`. This module is the one that writes (and reads
back) a confirmation's verdict keys (``confirm.json``, ``--json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from specbench.analysis.recommendation.confirm_compare import Comparison, cliff, compare, compare_system
from specbench.analysis.recommendation.confirm_targets import (
    BASELINE,
    NAN,
    Outcome,
    Prediction,
    Target,
    finite,
    number,
)
from specbench.analysis.statistics.sequential import FIXED, LookPlan, VerdictRule, prompts_to_settle
from specbench.analysis.statistics.speedup_interval import MIN_PROMPTS, speedup_words
from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.analysis.verdicts.verdict import NO, YES, Answer, Candidate, three_way

# ----------------------------------------------------------------------------- held or missed


@dataclass
class Check:
    """The prediction against what fresh prompts realized."""

    outcome: Outcome
    reason: str
    realized: Comparison
    prompts_needed: int | None = None

    def as_dict(self) -> dict:
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "realized": self.realized.as_dict(),
            "prompts_needed": self.prompts_needed,
        }

    @classmethod
    def from_dict(cls, data: dict | None) -> Check | None:
        if not isinstance(data, dict):
            return None
        return cls(
            Outcome(data.get("outcome", Outcome.OPEN.value)),
            str(data.get("reason") or ""),
            Comparison.from_dict(data.get("realized") or {}),
            data.get("prompts_needed"),
        )


def check_prediction(prediction: Prediction, realized: Comparison, rule: VerdictRule) -> Check:
    """Held, missed or not settled yet (the module docstring's rule)."""
    if not realized.has_interval:
        return Check(
            Outcome.OPEN, f"too few fresh prompts to tell (P = {realized.n_prompts}; ≥ {MIN_PROMPTS})", realized
        )
    if realized.disturbed:
        return Check(
            Outcome.OPEN,
            "the timing was disturbed (fewer than 3 prompts timed without interference): rerun on a quieter machine",
            realized,
        )
    says_yes = prediction.answer == YES
    above, below = realized.lo > 1.0, realized.hi < 1.0
    if (says_yes and below) or (not says_yes and above):
        why = "speculating does not pay on fresh prompts" if says_yes else "speculating pays on fresh prompts"
        return Check(Outcome.MISSED, f"{why}: the realized interval lies {'below' if below else 'above'} 1", realized)
    if finite(prediction.lo) and realized.hi < prediction.lo:
        return Check(
            Outcome.MISSED, "slower than predicted: the realized interval lies below the predicted one", realized
        )
    if finite(prediction.hi) and realized.lo > prediction.hi:
        return Check(
            Outcome.MISSED, "faster than predicted: the realized interval lies above the predicted one", realized
        )
    if (says_yes and above) or (not says_yes and below):
        return Check(
            Outcome.HELD,
            f"the realized interval lies {'above' if above else 'below'} 1 and meets the predicted one",
            realized,
        )
    side = "yes" if realized.ratio > 1 else "no"
    needed = prompts_to_settle(
        realized.ratio, realized.log_se, realized.n_prompts, lambda dof: rule.quantile(dof, side)
    )
    settle = (
        f"about {needed} fresh prompts would settle it"
        if needed
        else "no practical number of prompts would settle it: the realized speedup sits at 1"
    )
    return Check(Outcome.OPEN, f"the realized interval contains 1 — {settle}", realized, needed)


# ----------------------------------------------------------------------------- regret


@dataclass
class Regret:
    """The reference (the recommendation, or the baseline after a no) against its best contender."""

    answer: Answer  # YES: a contender beats it; NO: none does; UNSURE / TOO_FEW: not settled
    best: str | None  # the contender with the highest ratio
    ratio: float  # best contender ÷ reference (tokens/s)
    lo: float  # ends adjusted for the best of K contenders and the looks
    hi: float
    contenders: list[Comparison] = field(default_factory=list)  # every contender ÷ the reference
    prompts_needed: int | None = None
    tolerance: float = TOLERANCE  # ε: an advantage confidently under it settles the regret ("within")
    within: bool = False  # no contender is confidently more than ε ahead, and none can be (every upper end < 1/(1−ε))

    @property
    def settled(self) -> bool:
        return self.answer.decided or self.within or not self.contenders

    @property
    def beaten(self) -> bool:
        """A contender is confidently ahead of the reference by more than ε."""
        return self.answer == YES

    @property
    def percent(self) -> float:
        """Throughput the reference leaves behind: 1 − 1 ÷ ratio where a contender is faster, else 0."""
        return max(0.0, 1.0 - 1.0 / self.ratio) * 100 if finite(self.ratio) and self.ratio > 0 else NAN

    @property
    def ratio_text(self) -> str:
        if not finite(self.ratio):
            return "-"
        return speedup_words(self.ratio, self.lo, self.hi) if finite(self.lo) else f"{self.ratio:.2f}×"

    @property
    def text(self) -> str:
        if not self.contenders:
            return "no contender ran"
        ratio = self.ratio_text
        eps = f"{self.tolerance * 100:.0f} %"
        if self.answer == YES:
            return f"{self.best} beats it by more than {eps}: {ratio} its tokens/s (regret {self.percent:.0f} %)"
        if self.answer == NO:
            return f"no contender beats it (best {self.best} at {ratio} its tokens/s)"
        if self.within:
            return f"no contender is more than {eps} ahead: within tolerance (best {self.best} at {ratio} its tokens/s)"
        return f"not settled yet: best contender {self.best} at {ratio} its tokens/s"

    def as_dict(self) -> dict:
        return {
            "answer": self.answer,
            "best": self.best,
            "ratio": self.ratio,
            "lo": self.lo,
            "hi": self.hi,
            "percent": self.percent,
            "contenders": [c.as_dict() for c in self.contenders],
            "prompts_needed": self.prompts_needed,
            "tolerance": self.tolerance,
            "within": self.within,
        }

    @classmethod
    def from_dict(cls, data: dict | None) -> Regret | None:
        if not isinstance(data, dict):
            return None
        return cls(
            Answer.of(data.get("answer")),
            data.get("best"),
            number(data.get("ratio")),
            number(data.get("lo")),
            number(data.get("hi")),
            [Comparison.from_dict(c) for c in data.get("contenders") or []],
            data.get("prompts_needed"),
            float(data.get("tolerance") or TOLERANCE),
            bool(data.get("within")),
        )


def regret(records: pd.DataFrame, target: Target, plan: LookPlan, tolerance: float = TOLERANCE) -> Regret:
    """Every contender ÷ the reference; the answer over the best of them (K contenders, their ends adjusted by
    `VerdictRule`): *beats it by more than ε* when some adjusted lower end lies above 1 ÷ (1 − ε); *none beats
    it* when every adjusted upper end lies below 1; *within tolerance* when every adjusted upper end lies below
    1 ÷ (1 − ε) (the best contender's advantage is confidently under ε); otherwise not settled."""
    contenders = target.contenders
    if not contenders:
        return Regret(NO, None, NAN, NAN, NAN, tolerance=tolerance)
    base_rule = VerdictRule(plan, 1)
    ratios = [compare(records, arm, target.reference, base_rule) for arm in contenders]
    rule = VerdictRule(plan, max(sum(c.has_interval and not c.disturbed for c in ratios), 1))
    candidates = []
    for c in ratios:
        usable = c.has_interval and not c.disturbed
        cand = Candidate(
            None,
            c.arm,
            None,
            None,
            speedup=c.ratio,
            lo=c.lo if usable else NAN,
            hi=c.hi if usable else NAN,
            log_se=c.log_se,
            dof=c.dof,
        )
        cand.adjust(rule)
        candidates.append(cand)
    answer, pick = three_way(candidates)
    if pick is None:
        return Regret(answer, None, NAN, NAN, NAN, ratios, tolerance=tolerance)
    ahead = 1.0 / (1.0 - tolerance)
    with_interval = [c for c in candidates if c.has_interval]
    if answer == YES:  # ahead, but by more than ε? (the beats-it answer needs its lower end past 1/(1−ε))
        beyond = [c for c in with_interval if c.lo_adj > ahead]
        answer, pick = (YES, max(beyond, key=lambda c: c.speedup)) if beyond else (Answer.UNSURE, pick)
    within = answer != YES and bool(with_interval) and all(c.hi_adj < ahead for c in with_interval)
    ends = pick.adjusted_ends(answer if answer != YES else YES) or (NAN, NAN)
    needed = None
    if not answer.decided and not within and pick.has_interval:
        # the prompts at which the best contender's interval would clear 1/(1−ε) on one side or the other
        shifted = pick.speedup / ahead
        side = "yes" if shifted > 1 else "no"
        needed = prompts_to_settle(
            shifted, pick.log_se, max(c.n_prompts for c in ratios), lambda dof: rule.quantile(dof, side)
        )
    return Regret(answer, pick.drafter_label, pick.speedup, ends[0], ends[1], ratios, needed, tolerance, within)


# ----------------------------------------------------------------------------- a workload shift


@dataclass
class ShiftRegret:
    """Around one shift of a stream workload: each adaptive contender ÷ the static recommendation on the segment
    before the shift and on the segment after it (above 1: the static γ leaves that much behind there)."""

    position: int  # the stream position where the new segment starts
    before: str
    after: str
    ahead: list[Comparison] = field(default_factory=list)  # contender ÷ static, on the segment before
    behind: list[Comparison] = field(default_factory=list)  # contender ÷ static, on the segment after

    @property
    def text(self) -> str:
        pairs = [f"{a.arm} {a.text} → {b.text}" for a, b in zip(self.ahead, self.behind)]
        return (
            f"shift at {self.position} ({self.before} → {self.after}), each contender ÷ the static "
            f"recommendation before → after: " + "; ".join(pairs)
        )

    def as_dict(self) -> dict:
        return {
            "position": self.position,
            "before": self.before,
            "after": self.after,
            "ahead": [c.as_dict() for c in self.ahead],
            "behind": [c.as_dict() for c in self.behind],
        }

    @classmethod
    def from_dict(cls, data: dict) -> ShiftRegret:
        return cls(
            int(data.get("position") or 0),
            str(data.get("before")),
            str(data.get("after")),
            [Comparison.from_dict(c) for c in data.get("ahead") or []],
            [Comparison.from_dict(c) for c in data.get("behind") or []],
        )


def shift_regrets(records: pd.DataFrame, target: Target, plan: LookPlan) -> list[ShiftRegret]:
    """Per shift of a stream (where ``stream_segment`` changes along ``stream_position``): every contender ÷ the
    reference on the segment just before and the one just after (each with `compare`'s look-adjusted ends)."""
    if "stream_segment" not in records or records["stream_segment"].isna().all() or not target.contenders:
        return []
    order = records[["stream_position", "stream_segment", "prompt_id"]].dropna().drop_duplicates("prompt_id")
    order = order.sort_values("stream_position")
    runs: list[tuple[int, str, set]] = []  # contiguous segments: (first position, label, prompt ids)
    for position, segment, prompt in order.itertuples(index=False):
        if not runs or runs[-1][1] != segment:
            runs.append((int(position), str(segment), set()))
        runs[-1][2].add(prompt)
    rule = VerdictRule(plan, 1)
    out = []
    for (_, before, first), (position, after, second) in zip(runs, runs[1:]):
        shift = ShiftRegret(position, before, after)
        for arm in target.contenders:
            for prompts, into in ((first, shift.ahead), (second, shift.behind)):
                part = records[records["prompt_id"].isin(prompts)]
                into.append(compare(part, arm, target.reference, rule))
        out.append(shift)
    return out


# ----------------------------------------------------------------------------- a target's result


@dataclass
class TargetResult:
    """What the fresh prompts of one target say after a look."""

    target: str
    n_prompts: int
    check: Check | None  # None: the sweep made no confident prediction here
    regret: Regret
    versus_baseline: list[Comparison] = field(default_factory=list)  # every speculative arm ÷ the baseline
    system: list[Comparison] = field(default_factory=list)  # at a load: system tokens/s, arm ÷ baseline or static
    cliff: str | None = None  # at a load: the schedule confidently below both the static setting and the baseline
    lossless: str = ""  # greedy outputs of every arm against the target alone's
    shifts: list[ShiftRegret] = field(default_factory=list)  # a stream workload: around each shift

    @property
    def settled(self) -> bool:
        return (self.check is None or self.check.outcome.settled) and self.regret.settled

    @property
    def prompts_needed(self) -> int | None:
        needs = [n for n in ((self.check.prompts_needed if self.check else None), self.regret.prompts_needed) if n]
        return max(needs) if needs else None

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "n_prompts": self.n_prompts,
            "check": None if self.check is None else self.check.as_dict(),
            "regret": self.regret.as_dict(),
            "versus_baseline": [c.as_dict() for c in self.versus_baseline],
            "system": [c.as_dict() for c in self.system],
            "cliff": self.cliff,
            "lossless": self.lossless,
            "shifts": [x.as_dict() for x in self.shifts],
        }

    @classmethod
    def from_dict(cls, data: dict) -> TargetResult:
        return cls(
            str(data.get("target")),
            int(data.get("n_prompts") or 0),
            Check.from_dict(data.get("check")),
            Regret.from_dict(data.get("regret")) or Regret(Answer.UNSURE, None, NAN, NAN, NAN),
            [Comparison.from_dict(c) for c in data.get("versus_baseline") or []],
            [Comparison.from_dict(c) for c in data.get("system") or []],
            data.get("cliff"),
            str(data.get("lossless") or ""),
            [ShiftRegret.from_dict(x) for x in data.get("shifts") or []],
        )


def judge(records: pd.DataFrame, target: Target, plan: LookPlan = FIXED, tolerance: float = TOLERANCE) -> TargetResult:
    """The target's prediction checked and its regret, from the confirmation's records of this target so far; at
    a load of a schedule, the system throughput of every arm against the baseline and of the schedule against the
    best static setting, and a cliff if there is one."""
    mine = records[
        (records["workload"] == target.workload)
        & (_concurrency(records) == target.concurrency)
        & (records["temperature"] == target.temperature)
    ]
    rule = VerdictRule(plan, 1)
    baseline = target.baseline
    others = [arm for arm in target.arms if arm.role != BASELINE]
    versus = {arm.name: compare(mine, arm, baseline, rule) for arm in others}
    chosen = versus.get(target.chosen.name)
    check = None
    if target.prediction is not None and chosen is not None:
        check = check_prediction(target.prediction, chosen, rule)
    n = int(mine[baseline.mask(mine)]["prompt_id"].nunique()) if len(mine) else 0
    result = TargetResult(
        target.name,
        n,
        check,
        regret(mine, target, plan, tolerance),
        list(versus.values()),
        lossless=lossless_text(mine, target),
    )
    result.shifts = shift_regrets(mine, target, plan)
    if target.schedule_ranges and "batch_id" in mine and len(mine):
        system = [compare_system(mine, arm, baseline, rule) for arm in others]
        static = next((a for a in target.contenders if a.why == STATIC), None)
        schedule_vs = [compare_system(mine, target.reference, static, rule)] if static else []
        schedule_vs.append(next(c for c in system if c.arm == target.reference.name))
        result.system = system + schedule_vs[:-1]
        result.cliff = cliff(schedule_vs, target.schedule_ranges, target.concurrency)
    return result


STATIC = "the best static γ over the sweep's loads"


def lossless_text(records: pd.DataFrame, target: Target) -> str:
    """Greedy decoding is lossless: at temperature 0 every arm's output equals the target alone's, prompt turn by
    prompt turn (``output_sha1``); the words say on how many, or which arm differs where."""
    if target.temperature != 0 or records.empty or "output_sha1" not in records:
        return ""
    keys = ["prompt_id", "turn", "repeat"]
    base = records[target.baseline.mask(records)].set_index(keys)["output_sha1"]
    compared, differ = 0, []
    for arm in target.arms:
        if arm.role == BASELINE:
            continue
        mine = records[arm.mask(records)].set_index(keys)["output_sha1"]
        both = mine.to_frame("arm").join(base.to_frame("base"), how="inner")
        compared += len(both)
        wrong = both[both["arm"] != both["base"]]
        if len(wrong):
            where = wrong.index[0]
            differ.append(f"{arm.name} differs on {len(wrong)} of {len(both)} ({where[0]} turn {where[1]})")
    if differ:
        return "NOT lossless: " + "; ".join(differ)
    return f"lossless: every configuration's greedy output equals the target alone's ({compared} prompt turns)"


def _concurrency(records: pd.DataFrame) -> pd.Series:
    if "concurrency" not in records:
        return pd.Series(1, index=records.index)
    return records["concurrency"].fillna(1).astype(int)


# ----------------------------------------------------------------------------- words


def result_line(target: Target, result: TargetResult) -> str:
    """One line: predicted against realized, held or missed, and the regret."""
    parts = [f"{target.name}:"]
    check, prediction = result.check, target.prediction
    if check is not None and prediction is not None:
        parts.append(
            f"{check.outcome} — predicted {prediction.configuration} at {prediction.interval_text}, "
            f"realized {check.realized.text} on {check.realized.n_prompts} fresh prompts ({check.reason});"
        )
    else:
        parts.append(f"no confident prediction to check ({result.n_prompts} fresh prompts);")
    parts.append(f"against its contenders: {result.regret.text}")
    if result.cliff:
        parts.append(f"— {result.cliff}")
    parts.extend(f"— {shift.text}" for shift in result.shifts)
    return " ".join(parts)

"""A recommendation checked on prompts the sweep never used: realized against predicted, held or missed, and the
regret of the choice against the engines' own adaptive mechanisms.

`specbench confirm RESULTS` (`specbench.measure.execution.confirm`) runs, on fresh prompts of each decided workload, the
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

import hashlib
import json
import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import pandas as pd

from specbench.analysis.load.table import system_rate
from specbench.analysis.statistics.sequential import FIXED, LookPlan, VerdictRule, prompts_to_settle
from specbench.analysis.statistics.speedup_interval import MIN_PROMPTS, speedup_interval, speedup_words
from specbench.analysis.verdicts.choice import TOLERANCE
from specbench.analysis.verdicts.status import BUDGET, DECIDED, EXHAUSTED, OPEN
from specbench.analysis.verdicts.verdict import NO, YES, Answer, Candidate, Decision, three_way
from specbench.errors import SpecbenchError
from specbench.records.jsonable import json_ready
from specbench.records.store import atomic_write_json
from specbench.records.summary import is_baseline

NAN = float("nan")


class Outcome(str, Enum):
    """Whether a prediction held on fresh prompts."""

    HELD = "held"
    MISSED = "missed"
    OPEN = "not settled yet"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def settled(self) -> bool:
        return self is not Outcome.OPEN


BASELINE, RECOMMENDED, CONTENDER, PREDICTED = "baseline", "recommended", "contender", "predicted"


@dataclass(frozen=True)
class Arm:
    """One configuration a confirmation runs: its role and how its records are found (the record columns)."""

    name: str  # what the tables call it: "ngram γ=2", "heuristic γ≤2", "target only"
    role: str  # BASELINE, RECOMMENDED (the verdict's configuration), PREDICTED (a no's best), CONTENDER
    drafter: str = "none"
    drafter_params: str = "{}"
    drafter_label: str = "none"
    tree: str = "chain"
    gamma: int = 0
    schedule: str = "fixed"  # the record's ``schedule`` label
    why: str = ""  # a contender's origin: "own engine's schedule", "the sweep's measured path", ...

    def mask(self, records: pd.DataFrame) -> pd.Series:
        """The records of this configuration."""
        if self.role == BASELINE:
            return is_baseline(records)
        schedule = records["schedule"].fillna("fixed") if "schedule" in records else "fixed"
        return (
            (records["drafter_label"] == self.drafter_label)
            & (records["tree"] == self.tree)
            & (records["gamma"] == self.gamma)
            & (schedule == self.schedule)
        )

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> Arm:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Prediction:
    """What the sweep said about a target: its answer, the configuration it concerns and the adjusted interval."""

    answer: Answer
    configuration: str  # the configuration the interval is about (a yes: the recommendation; a no: its best)
    speedup: float
    lo: float
    hi: float
    text: str  # the sweep's verdict in its own words
    evidence: str = ""

    @classmethod
    def of(cls, decision: Decision) -> Prediction | None:
        """The prediction a confident decision makes (None: not confident, nothing to confirm)."""
        if not decision.confident or decision.best is None:
            return None
        ends = decision.best.adjusted_ends(decision.answer)
        lo, hi = ends if ends else (NAN, NAN)
        return cls(
            decision.answer, decision.best.describe(), decision.best.speedup, lo, hi, decision.text, decision.evidence
        )

    @property
    def interval_text(self) -> str:
        return speedup_words(self.speedup, self.lo, self.hi) if _finite(self.lo) else f"{self.speedup:.2f}×"

    def as_dict(self) -> dict:
        return {
            "answer": self.answer,
            "configuration": self.configuration,
            "speedup": self.speedup,
            "lo": self.lo,
            "hi": self.hi,
            "text": self.text,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, data: dict | None) -> Prediction | None:
        if not isinstance(data, dict):
            return None
        return cls(
            Answer.of(data.get("answer")),
            str(data.get("configuration")),
            _num(data.get("speedup")),
            _num(data.get("lo")),
            _num(data.get("hi")),
            str(data.get("text") or ""),
            str(data.get("evidence") or ""),
        )


@dataclass(frozen=True)
class Target:
    """One thing a confirmation checks: a workload (at one load) — its prediction and the arms it runs."""

    workload: str
    concurrency: int
    prediction: Prediction | None
    arms: tuple[Arm, ...]
    temperature: float = 0.0
    schedule_ranges: tuple[tuple[int, int, int], ...] = ()  # a load schedule's ranges (the cliffs name them)

    @property
    def name(self) -> str:
        name = self.workload if self.temperature == 0 else f"{self.workload} T={self.temperature:g}"
        return name if self.concurrency == 1 else f"{name} at {self.concurrency} in flight"

    @property
    def baseline(self) -> Arm:
        return next(a for a in self.arms if a.role == BASELINE)

    @property
    def chosen(self) -> Arm:
        """The arm the prediction is about: the recommendation, or a no's best (measured against the baseline)."""
        return next(a for a in self.arms if a.role in (RECOMMENDED, PREDICTED))

    @property
    def reference(self) -> Arm:
        """What the contenders are measured against: the recommendation (a no recommends the baseline)."""
        return next((a for a in self.arms if a.role == RECOMMENDED), self.baseline)

    @property
    def contenders(self) -> list[Arm]:
        return [a for a in self.arms if a.role == CONTENDER]

    def as_dict(self) -> dict:
        return {
            "workload": self.workload,
            "concurrency": self.concurrency,
            "prediction": None if self.prediction is None else self.prediction.as_dict(),
            "arms": [a.as_dict() for a in self.arms],
            "temperature": self.temperature,
            "schedule_ranges": [list(r) for r in self.schedule_ranges],
        }

    @classmethod
    def from_dict(cls, data: dict) -> Target:
        return cls(
            str(data["workload"]),
            int(data.get("concurrency") or 1),
            Prediction.from_dict(data.get("prediction")),
            tuple(Arm.from_dict(a) for a in data.get("arms") or []),
            float(data.get("temperature") or 0.0),
            tuple((int(r[0]), int(r[1]), int(r[2])) for r in data.get("schedule_ranges") or []),
        )


# ----------------------------------------------------------------------------- paired ratios


@dataclass
class Comparison:
    """One arm's tokens/s ÷ a reference's on the same fresh prompts, with its look-adjusted interval."""

    arm: str
    reference: str
    ratio: float
    lo: float  # look-adjusted two-sided ends (NaN below `MIN_PROMPTS` prompts)
    hi: float
    log_se: float
    dof: float
    n_prompts: int
    disturbed: bool = False  # fewer than MIN_PROMPTS prompts were timed without interference on both sides

    @property
    def has_interval(self) -> bool:
        return _finite(self.lo) and _finite(self.hi)

    @property
    def text(self) -> str:
        if not _finite(self.ratio):
            return "-"
        return speedup_words(self.ratio, self.lo, self.hi) if self.has_interval else f"{self.ratio:.2f}×"

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> Comparison:
        return cls(
            str(data.get("arm")),
            str(data.get("reference")),
            _num(data.get("ratio")),
            _num(data.get("lo")),
            _num(data.get("hi")),
            _num(data.get("log_se")),
            _num(data.get("dof")),
            int(data.get("n_prompts") or 0),
            bool(data.get("disturbed")),
        )


def per_prompt(records: pd.DataFrame, arm: Arm) -> pd.DataFrame:
    """Per fresh prompt (and repeat): Σ decode tokens, Σ decode seconds over its turns, and whether every turn
    was timed without interference; live records of ``arm`` only."""
    mine = records[arm.mask(records) & (records["mode"] == "live")]
    ok = mine["timing_ok"].fillna(True).astype(bool) if "timing_ok" in mine else pd.Series(True, index=mine.index)
    frame = mine.assign(ok=ok)
    return frame.groupby(["prompt_id", "repeat"], sort=True).agg(
        tokens=("decode_tokens", "sum"), seconds=("decode_s", "sum"), ok=("ok", "all")
    )


def compare(records: pd.DataFrame, arm: Arm, reference: Arm, rule: VerdictRule) -> Comparison:
    """``arm`` ÷ ``reference`` in tokens/s over the prompts both ran, ends at ``rule``'s two one-sided levels
    (one configuration, the planned looks). Prompts timed under interference on either side are left out,
    unless fewer than `MIN_PROMPTS` remain (then all count, and the comparison is marked disturbed)."""
    both = per_prompt(records, arm).join(per_prompt(records, reference), how="inner", lsuffix="_arm", rsuffix="_ref")
    both = both[(both["seconds_arm"] > 0) & (both["seconds_ref"] > 0)]
    clean = both[both["ok_arm"] & both["ok_ref"]]
    disturbed = len(clean) < MIN_PROMPTS and len(both) > len(clean)
    used = both if disturbed else clean
    iv = speedup_interval(used["tokens_arm"], used["seconds_arm"], used["tokens_ref"], used["seconds_ref"])
    lo = rule.lower(iv.point, iv.log_se, iv.dof) if iv.has_interval else NAN
    hi = rule.upper(iv.point, iv.log_se, iv.dof) if iv.has_interval else NAN
    return Comparison(arm.name, reference.name, iv.point, lo, hi, iv.log_se, iv.dof, iv.n_prompts, disturbed)


def compare_system(records: pd.DataFrame, arm: Arm, reference: Arm, rule: VerdictRule) -> Comparison:
    """``arm`` ÷ ``reference`` in system output tokens/s (Σ tokens ÷ Σ batch wall time) at one load; its ends carry
    the relative width of the paired per-request ratio Σ new tokens ÷ Σ request latency
    (`specbench.analysis.load.table`: the mean requests in flight held at their measured values)."""
    mine, theirs = (records[a.mask(records) & (records["mode"] == "live")] for a in (arm, reference))
    (rate, _), (base_rate, _) = system_rate(mine), system_rate(theirs)
    columns = ["new_tokens", "latency_s"]
    both = (
        mine.groupby(["prompt_id", "repeat"])[columns]
        .sum()
        .join(theirs.groupby(["prompt_id", "repeat"])[columns].sum(), how="inner", rsuffix="_ref")
    )
    both = both[(both["latency_s"] > 0) & (both["latency_s_ref"] > 0)]
    iv = speedup_interval(both["new_tokens"], both["latency_s"], both["new_tokens_ref"], both["latency_s_ref"])
    point = rate / base_rate if base_rate > 0 else NAN
    usable = iv.has_interval and _finite(point) and point > 0
    lo = rule.lower(point, iv.log_se, iv.dof) if usable else NAN
    hi = rule.upper(point, iv.log_se, iv.dof) if usable else NAN
    ok = pd.concat([mine, theirs])["timing_ok"] if "timing_ok" in records else pd.Series(dtype=object)
    disturbed = not bool(ok.fillna(True).astype(bool).all())
    return Comparison(arm.name, reference.name, point, lo, hi, iv.log_se, iv.dof, iv.n_prompts, disturbed)


def cliff(schedule_vs: list[Comparison], ranges, load: int) -> str | None:
    """A load where the schedule's system throughput lies confidently below both the best static setting and the
    baseline (each ratio's look-adjusted upper end under 1), named by the threshold it sits at; None otherwise."""
    if not schedule_vs or any(not c.has_interval or c.disturbed or c.hi >= 1.0 for c in schedule_vs):
        return None
    below = " and ".join(f"{c.text} {c.reference}'s" for c in schedule_vs)
    return f"cliff at {load} in flight, {threshold_at(ranges, load)}: the schedule's system tokens/s is {below}"


def threshold_at(ranges, load: int) -> str:
    """The schedule threshold a load sits at: 'just past the threshold at batch 4 (K 2 → 0)'."""
    ranges = sorted(tuple(r) for r in ranges)
    for i, (first, last, k) in enumerate(ranges):
        if first <= load <= last:
            if first == load and i > 0:
                return f"just past the threshold at batch {first} (K {ranges[i - 1][2]} → {k})"
            if last == load and i + 1 < len(ranges):
                return f"just below the threshold at batch {last + 1} (K {k} → {ranges[i + 1][2]})"
            return f"inside the range {first}–{last} (K {k})"
    return f"beyond the last range (its K {ranges[-1][2]} applies)" if ranges else "no schedule"


def threshold_loads(ranges) -> list[int]:
    """The loads that confirm a schedule on both sides of every threshold: each range's first and last batch size
    (``[[1,1,4],[2,3,2],[4,8,0]]`` → 1, 2, 3, 4, 8)."""
    return sorted({int(x) for first, last, _ in ranges for x in (first, last)})


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
    if _finite(prediction.lo) and realized.hi < prediction.lo:
        return Check(
            Outcome.MISSED, "slower than predicted: the realized interval lies below the predicted one", realized
        )
    if _finite(prediction.hi) and realized.lo > prediction.hi:
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
        return max(0.0, 1.0 - 1.0 / self.ratio) * 100 if _finite(self.ratio) and self.ratio > 0 else NAN

    @property
    def ratio_text(self) -> str:
        if not _finite(self.ratio):
            return "-"
        return speedup_words(self.ratio, self.lo, self.hi) if _finite(self.lo) else f"{self.ratio:.2f}×"

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
            _num(data.get("ratio")),
            _num(data.get("lo")),
            _num(data.get("hi")),
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
    usable = [c for c in candidates if c.has_interval]
    if answer == YES:  # ahead, but by more than ε? (the beats-it answer needs its lower end past 1/(1−ε))
        beyond = [c for c in usable if c.lo_adj > ahead]
        answer, pick = (YES, max(beyond, key=lambda c: c.speedup)) if beyond else (Answer.UNSURE, pick)
    within = answer != YES and bool(usable) and all(c.hi_adj < ahead for c in usable)
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


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _num(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else NAN


def plan_hash(targets: list[Target], prompts: dict[str, list[str]], settings: dict) -> str:
    """Identity of what a confirmation measures: its targets, its fresh prompts and its look plan."""
    data = {"targets": [t.as_dict() for t in targets], "prompts": prompts, "settings": settings}
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- the confirmation's state file

CONFIRM_DIR = "confirm"  # RESULTS/confirm/: the confirmation's own results folder (records, run.json, confirm.json)
STATE_FILE = "confirm.json"


@dataclass
class LookResult:
    """What one look of one target found."""

    look: int
    prompts: int
    seconds: float
    elapsed_s: float
    result: TargetResult

    def as_dict(self) -> dict:
        return {
            "look": self.look,
            "prompts": self.prompts,
            "seconds": round(self.seconds, 3),
            "elapsed_s": round(self.elapsed_s, 3),
            "result": self.result.as_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> LookResult:
        return cls(
            int(data.get("look") or 0),
            int(data.get("prompts") or 0),
            float(data.get("seconds") or 0.0),
            float(data.get("elapsed_s") or 0.0),
            TargetResult.from_dict(data.get("result") or {}),
        )


@dataclass
class TargetLooks:
    """One target's fresh prompts, planned looks and what each look found."""

    target: Target
    prompts: list[str]  # the fresh prompt ids, in the order the looks take them
    planned: tuple[int, ...]
    looks: list[LookResult] = field(default_factory=list)
    status: str = OPEN
    seconds: float = 0.0
    dropped: list[str] = field(default_factory=list)  # contenders confidently behind the reference, no longer run

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def look(self) -> int:
        return len(self.looks)

    @property
    def last(self) -> TargetResult | None:
        return self.looks[-1].result if self.looks else None

    @property
    def plan(self) -> LookPlan:
        return LookPlan(tuple(self.planned)) if self.planned else FIXED

    def seconds_per_prompt(self) -> float | None:
        measured = self.planned[self.look - 1] if self.look else 0
        return self.seconds / measured if measured and self.seconds > 0 else None

    def prompts_needed(self) -> int | None:
        return self.last.prompts_needed if self.last else None

    def line(self) -> str:
        if self.last is None:
            return f"{self.target.name}: no look finished yet ({len(self.prompts)} fresh prompts drawn)"
        ended = {
            DECIDED: "",
            OPEN: " (still open)",
            EXHAUSTED: " (its fresh prompts ran out)",
            BUDGET: " (the budget ran out)",
        }.get(self.status, f" ({self.status})")
        return result_line(self.target, self.last) + ended

    def as_dict(self) -> dict:
        return {
            "target": self.target.as_dict(),
            "prompts": list(self.prompts),
            "planned": list(self.planned),
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "dropped": list(self.dropped),
            "looks": [look.as_dict() for look in self.looks],
        }

    @classmethod
    def from_dict(cls, data: dict) -> TargetLooks:
        return cls(
            Target.from_dict(data["target"]),
            [str(p) for p in data.get("prompts") or []],
            tuple(int(n) for n in data.get("planned") or []),
            [LookResult.from_dict(x) for x in data.get("looks") or [] if isinstance(x, dict)],
            str(data.get("status") or OPEN),
            float(data.get("seconds") or 0.0),
            [str(d) for d in data.get("dropped") or []],
        )


@dataclass
class Report:
    """A confirmation as a whole (``confirm.json``): what it checked, how, and what each target found."""

    sweep: dict  # the results folder it confirms: its sweep name and spec hash
    settings: dict  # looks, budget, seed
    plan_hash: str
    targets: dict[str, TargetLooks]
    notes: list[str] = field(default_factory=list)  # workloads left out, and why (one line each)
    absent: list[str] = field(default_factory=list)  # engine mechanisms that could not run, and why
    elapsed_s: float = 0.0
    finished: bool = False

    def lines(self) -> list[str]:
        return [t.line() for t in self.targets.values()]

    def for_workload(self, workload: str) -> list[TargetLooks]:
        return [t for t in self.targets.values() if t.target.workload == workload]

    def as_dict(self) -> dict:
        return {
            "sweep": self.sweep,
            "settings": self.settings,
            "plan_hash": self.plan_hash,
            "elapsed_s": round(self.elapsed_s, 3),
            "finished": self.finished,
            "notes": list(self.notes),
            "absent": list(self.absent),
            "targets": {n: t.as_dict() for n, t in self.targets.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> Report:
        targets = data.get("targets") or {}
        return cls(
            dict(data.get("sweep") or {}),
            dict(data.get("settings") or {}),
            str(data.get("plan_hash") or ""),
            {str(n): TargetLooks.from_dict(t) for n, t in targets.items() if isinstance(t, dict)},
            [str(x) for x in data.get("notes") or []],
            [str(x) for x in data.get("absent") or []],
            float(data.get("elapsed_s") or 0.0),
            bool(data.get("finished")),
        )


def write_report(folder: str | Path, report: Report) -> None:
    """``FOLDER/confirm.json`` (``FOLDER``: the confirmation's own folder, RESULTS/confirm)."""
    atomic_write_json(Path(folder) / STATE_FILE, json_ready(report.as_dict()))


def load_report(results: str | Path) -> Report | None:
    """The confirmation of the results folder ``results`` (None: not confirmed); a broken file is one line."""
    path = Path(results) / CONFIRM_DIR / STATE_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("targets", {}), dict):
            raise ValueError("not a mapping with 'targets'")
        return Report.from_dict(data)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise SpecbenchError(f"broken confirmation {path}: {exc}") from None

"""A verdict as a value: its answer, the configuration it names, the interval it rests on, the prompts that
would settle it and every candidate it weighed.

`Answer` is the three-way answer of `specbench.analysis.verdicts.decision` (plus the two words an adaptive look and a
too-small sample need); `Candidate` one option with its ends adjusted by the verdict's rule
(`specbench.analysis.statistics.sequential.VerdictRule`); `Decision` the verdict of one scenario. They travel typed from
the decision through the adaptive sweep (`specbench.measure.run.adaptive`), the stopping rule
(`specbench.analysis.verdicts.stopping`), the per-load verdicts (`specbench.analysis.load.verdicts`) and the
confirmation (`specbench.analysis.recommendation.confirmation`) to the printers, and become plain data only where they are
written (``adaptive.json``, ``--json``: `as_dict`) and come back from a file (`from_dict`).

This module is the one place the answers' words and the verdict's keys are spelled
(tests/test_architecture.py checks that no other module compares an answer's words or reads a verdict key).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from enum import Enum

from specbench.analysis.options import Option
from specbench.analysis.statistics.speedup_interval import prompts_to_settle, speedup_words
from specbench.analysis.verdicts.choice import Choice


class Answer(str, Enum):
    """A verdict's answer; its value is the word every output prints (and ``adaptive.json`` holds)."""

    YES = "confident yes"
    NO = "confident no"
    UNSURE = "cannot tell"
    TOO_FEW = "too few prompts"
    MIXED = "mixed"  # an adaptive look whose scenarios answered differently

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def decided(self) -> bool:
        """Confident either way (yes or no)."""
        return self in (Answer.YES, Answer.NO)

    @property
    def word(self) -> str:
        """The short word of a two-sided comparison (yes / no / cannot tell)."""
        return {Answer.YES: "yes", Answer.NO: "no"}.get(self, Answer.UNSURE.value)

    @classmethod
    def of(cls, value) -> Answer:
        """The answer a stored word names (an unknown word reads as "cannot tell")."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNSURE


YES, NO, UNSURE, TOO_FEW, MIXED = Answer.YES, Answer.NO, Answer.UNSURE, Answer.TOO_FEW, Answer.MIXED
NAN = float("nan")


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class Candidate:
    """One option of a scenario and its ends: the plain interval (lo, hi) and, once a rule adjusted them
    (`adjust`), the selection-adjusted lower end ``lo_adj`` (and its mirror ``hi_sim`` on the log scale) and
    the look-adjusted upper end ``hi_adj``."""

    drafter: str | None
    drafter_label: str | None
    tree: str | None
    gamma: int | None
    schedule: object = "fixed"
    speedup: float = NAN
    lo: float = NAN
    hi: float = NAN
    log_se: float = NAN
    dof: float = NAN
    n: int | None = None  # prompts its acceptance came from (predicted evidence)
    lo_adj: float = NAN
    hi_adj: float = NAN
    hi_sim: float = NAN
    timing_disturbed: bool = False  # no pair with the baseline timed undisturbed (records.timing.paired_timing)
    option: Option | None = None  # the recommender's measured `Option` (measured evidence; never written out)

    SUMMARY = (
        "drafter_label",
        "tree",
        "gamma",
        "schedule",
        "speedup",
        "lo",
        "hi",
        "lo_adj",
        "hi_adj",
        "hi_sim",
        "timing_disturbed",
    )

    @property
    def key(self) -> tuple:
        """(drafter label, tree, γ, schedule): one option of a scenario (racing drops options by it)."""
        return self.drafter_label, self.tree, self.gamma, self.schedule

    @property
    def has_interval(self) -> bool:
        return _finite(self.lo) and _finite(self.hi)

    @property
    def has_point(self) -> bool:
        return _finite(self.speedup)

    def adjust(self, rule) -> None:
        """The ends under ``rule`` (`VerdictRule`): lo_adj / hi_sim at the yes level (simultaneous over the K
        options), hi_adj at the no level."""
        self.lo_adj, self.hi_adj = (
            rule.lower(self.speedup, self.log_se, self.dof),
            rule.upper(self.speedup, self.log_se, self.dof),
        )
        self.hi_sim = self.speedup**2 / self.lo_adj if self.lo_adj > 0 else NAN

    def describe(self, schedule: bool = True) -> str:
        """``ngram γ=3``, with its tree and (``schedule``) its schedule when not the plain ones."""
        tree = "" if self.tree in (None, "chain") else f" tree {self.tree}"
        sched = self.schedule
        shown = schedule and isinstance(sched, str) and sched != "fixed"
        return f"{self.drafter_label}{tree} γ={self.gamma}" + (f" schedule {sched}" if shown else "")

    def adjusted_ends(self, answer: Answer) -> tuple[float, float] | None:
        """The adjusted interval a verdict of ``answer`` reads (symmetric on the log scale): about the upper
        end for a "no", about the lower end otherwise; None when the rule gave none."""
        point = self.speedup
        if answer == NO and _finite(self.hi_adj):
            return point**2 / self.hi_adj, self.hi_adj
        if _finite(self.lo_adj) and self.lo_adj > 0:
            return self.lo_adj, point**2 / self.lo_adj
        return None

    def interval_text(self, answer: Answer) -> str:
        """``1.43× [1.004, 2.03]`` (the adjusted interval ``answer`` rests on), ``1.43× (no interval)`` without one,
        '' without a finite speedup (callers say what is missing)."""
        if not self.has_point:
            return ""
        ends = self.adjusted_ends(answer)
        return speedup_words(self.speedup, *ends) if ends else speedup_words(self.speedup, NAN, NAN)

    def as_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "option"}
        if self.n is None:
            del out["n"]
        return out

    def summary_dict(self) -> dict:
        """The best option as a verdict names it (``best`` in ``adaptive.json`` and ``--json``)."""
        return {k: getattr(self, k) for k in self.SUMMARY}

    @classmethod
    def from_dict(cls, data: dict | None) -> Candidate | None:
        if not isinstance(data, dict):
            return None
        known = {f.name for f in fields(cls)} - {"option"}
        values = {k: (NAN if v is None and k in _FLOATS else v) for k, v in data.items() if k in known}
        for k in ("drafter", "drafter_label", "tree", "gamma"):
            values.setdefault(k, None)
        values["timing_disturbed"] = bool(values.get("timing_disturbed"))
        return cls(**values)  # type: ignore[arg-type]  # the file's values, typed by the dataclass's reading


_FLOATS = ("speedup", "lo", "hi", "log_se", "dof", "lo_adj", "hi_adj", "hi_sim")


@dataclass
class Decision:
    """One scenario's verdict (`specbench.analysis.verdicts.decision`)."""

    answer: Answer
    evidence: str  # 'predicted' or 'measured'
    option: Option | None  # the recommended `Option` (confident yes only)
    best: Candidate | None  # the best point estimate (the pick of a yes), with its adjusted ends
    prompts_needed: int | None
    n_prompts: int
    text: str
    timing_disturbed: bool = False  # every timed unit ran under interference (the text says so too)
    rule: object | None = None  # the `VerdictRule` the answer used
    candidates: list[Candidate] = field(default_factory=list)  # every option with its adjusted ends
    flat: dict | None = None  # how flat the optimum is around ``best`` (`decision.flat_range`); None: no reference
    choice: Choice | None = None  # the choice among the options by paired comparisons (`choice.choose`)
    surest: Candidate | None = None  # a yes whose pick's own interval reaches 1: the option whose interval clears it

    def pays_words(self) -> str:
        """' (that speculation pays rests on ngram γ=1, 1.24× [1.002, 1.54], whose interval clears 1)' when the named
        option's own interval reaches 1 and another option's is what clears it: the direction's evidence, worded so
        that only the named option reads as the recommendation; '' otherwise."""
        s = self.surest
        if s is None or not s.has_point or s.drafter_label is None:
            return ""
        return (
            f" (that speculation pays rests on {s.describe(schedule=False)}, {s.interval_text(YES)}, "
            "whose interval clears 1)"
        )

    @property
    def settled(self) -> bool:
        """Both questions settled: the direction confidently, and for a yes the choice (the option within the
        tolerance of the best); a choice never compared (one option, or no paired evidence) counts as settled."""
        if not self.confident:
            return False
        return self.answer == NO or self.choice is None or self.choice.settled

    @property
    def confident(self) -> bool:
        return self.answer.decided and not self.timing_disturbed

    @property
    def named(self) -> dict | None:
        """The configuration this verdict names (its choice, or its best estimate) as record keys, or None."""
        best = self.best
        if best is None or best.gamma is None:
            return None
        return {"drafter_label": best.drafter_label, "tree": best.tree, "gamma": int(best.gamma)}

    @property
    def says_yes(self) -> bool:
        return self.answer == YES

    @property
    def says_no(self) -> bool:
        return self.answer == NO

    def short(self) -> str:
        """'cannot tell: best ngram γ=2 at 1.06× [0.95, 1.18]' (the answer and the adjusted interval of its best
        estimate); on disturbed timing 'not decided (disturbed timing; on its numbers alone: …)'."""
        text = self.answer.value
        best = self.best
        if best is not None and best.has_point and best.drafter_label is not None and best.gamma is not None:
            word = "speculate with" if self.answer == YES else "best"
            text += f": {word} {best.describe(schedule=False)} at {best.interval_text(self.answer)}"
        if self.answer == YES:
            text += self.pays_words()
        if self.timing_disturbed:  # the same words as the main verdict's: a disturbed yes is no verdict
            text = f"not decided (disturbed timing; on its numbers alone: {text})"
        return text

    def headline(self) -> str:
        """The answer in a few words, for a panel or a figure title: 'confident yes: ngram γ=2', 'confident no',
        'cannot tell (best so far ngram γ=3)', 'too few prompts (P = 2)'; 'not decided (disturbed timing)' when
        the numbers would say yes or no but the timing was disturbed."""
        best = self.best
        name = "" if best is None or best.drafter_label is None or best.gamma is None else best.describe()
        if self.timing_disturbed and self.answer == NO:
            return "not decided (disturbed timing): speculation looked not to pay"
        if self.timing_disturbed and self.answer.decided:
            return "not decided (disturbed timing)" + (f": {name} looked best" if name else "")
        if self.answer == YES:
            return f"confident yes: {name}" if name else "confident yes"
        if self.answer == NO:
            return "confident no: no speculation"
        if self.answer == TOO_FEW:
            return f"too few prompts to tell (P = {self.n_prompts})"
        return f"cannot tell (best so far {name})" if name else "cannot tell"

    def as_dict(self, candidates: bool = True) -> dict:
        rule = self.rule if isinstance(self.rule, dict) else ({} if self.rule is None else self.rule.as_dict())  # type: ignore[attr-defined]
        out = {
            "answer": self.answer,
            "evidence": self.evidence,
            "best": None if self.best is None else self.best.summary_dict(),
            "prompts_needed": self.prompts_needed,
            "n_prompts": self.n_prompts,
            "text": self.text,
            "timing_disturbed": self.timing_disturbed,
            "rule": rule,
            "flat_range": self.flat,
            "choice": None if self.choice is None else self.choice.as_dict(),
            "surest": None if self.surest is None else self.surest.summary_dict(),
        }
        if candidates:
            out["candidates"] = [c.as_dict() for c in self.candidates]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Decision:
        return cls(
            Answer.of(data.get("answer")),
            str(data.get("evidence") or ""),
            None,
            Candidate.from_dict(data.get("best")),
            data.get("prompts_needed"),
            int(data.get("n_prompts") or 0),
            str(data.get("text") or ""),
            bool(data.get("timing_disturbed")),
            data.get("rule") or {},
            [c for c in map(Candidate.from_dict, data.get("candidates") or []) if c is not None],
            data.get("flat_range"),
            Choice.from_dict(data.get("choice")),
            Candidate.from_dict(data.get("surest")),
        )


def decide(interval, level: float | None = None) -> tuple[Answer, int | None]:
    """(answer, prompts that would settle it) for one speedup interval (`SpeedupInterval`): yes when it lies
    above 1, no when below, too few prompts without one."""
    if not interval.has_interval:
        return TOO_FEW, None
    if interval.lo > 1.0:
        return YES, None
    if interval.hi < 1.0:
        return NO, None
    return UNSURE, prompts_to_settle(interval) if level is None else prompts_to_settle(interval, level)


def three_way(candidates: list[Candidate]) -> tuple[Answer, Candidate | None]:
    """The answer over candidates whose ends a rule adjusted (`Candidate.adjust`): *yes* with the best point
    estimate among those whose adjusted lower end lies above 1; *no* when every adjusted upper end lies below 1
    (with the best point estimate); *cannot tell* otherwise, with the best point estimate among those with an
    interval; *too few prompts* (with the best point, if any) when no candidate has an interval."""
    with_interval = [c for c in candidates if c.has_interval]
    if not with_interval:
        pointed = [c for c in candidates if c.has_point]
        return TOO_FEW, max(pointed, key=lambda c: c.speedup) if pointed else None
    above = [c for c in with_interval if c.lo_adj > 1.0]
    if above:
        return YES, max(above, key=lambda c: c.speedup)
    best = max(with_interval, key=lambda c: c.speedup)
    if all(c.hi_adj < 1.0 for c in with_interval):
        return NO, best
    return UNSURE, best

"""What a confirmation checks (`specbench.analysis.recommendation.confirmation` judges it): the arms it runs, the
sweep's prediction and the targets — a workload, or a workload at one load — with the identity of a plan.

Types: `Outcome` (held, missed, not settled yet), `Arm` (a configuration the confirmation runs, with its role:
baseline, recommended, predicted, contender), `Prediction`, `Target`; `plan_hash`.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from enum import Enum

import pandas as pd

from specbench.analysis.statistics.speedup_interval import speedup_words
from specbench.analysis.verdicts.verdict import Answer, Decision
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
        return speedup_words(self.speedup, self.lo, self.hi) if finite(self.lo) else f"{self.speedup:.2f}×"

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
            number(data.get("speedup")),
            number(data.get("lo")),
            number(data.get("hi")),
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


def plan_hash(targets: list[Target], prompts: dict[str, list[str]], settings: dict) -> str:
    """Identity of what a confirmation measures: its targets, its fresh prompts and its look plan."""
    data = {"targets": [t.as_dict() for t in targets], "prompts": prompts, "settings": settings}
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def finite(value) -> bool:
    """A real, finite number (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def number(value) -> float:
    """A stored number, NaN when it is not one."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else NAN

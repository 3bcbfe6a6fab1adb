"""An adaptive sweep's stopping history as values: per workload its planned looks, what each look found and how
it ended (``adaptive.json``, `specbench.records.adaptive_history`, is their written form).

`History` is what `specbench.measure.run.adaptive` writes after every look and what `sweep`, `results show`,
`recommend`, `plot` and the HTML report read back (`load_history`); each `Look` holds the verdict of every
scenario of its workload (`ScenarioVerdict`: `specbench.analysis.verdicts.verdict.Decision` without its candidates).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specbench.analysis.statistics.sequential import LookPlan
from specbench.analysis.verdicts.status import OPEN
from specbench.analysis.verdicts.verdict import MIXED, UNSURE, Answer, Candidate, Decision
from specbench.records.adaptive_history import read_history


@dataclass
class ScenarioVerdict:
    """The verdict of one scenario of a workload (its sampling, backend, load) at one adaptive look."""

    keys: dict
    decision: Decision

    def as_dict(self) -> dict:
        return {"keys": self.keys, **self.decision.as_dict(candidates=False)}

    @classmethod
    def from_dict(cls, data: dict) -> ScenarioVerdict:
        return cls(dict(data.get("keys") or {}), Decision.from_dict(data))


@dataclass
class Look:
    """What one look of an adaptive sweep found for one workload (an entry of ``adaptive.json``)."""

    look: int
    prompts: int
    calibration_prompts: int | None
    answer: Answer
    text: str
    best: Candidate | None
    prompts_needed: int | None
    seconds: float
    elapsed_s: float
    scenarios: list[ScenarioVerdict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # configurations this look dropped from timing

    @classmethod
    def of(
        cls,
        look: int,
        prompts: int,
        calibration: int | None,
        scenarios: list[ScenarioVerdict],
        seconds: float,
        elapsed_s: float,
    ) -> Look:
        """The look's entry from its scenarios' verdicts (the first scenario's words; "mixed" when they differ)."""
        answers = {s.decision.answer for s in scenarios}
        if scenarios:
            head = scenarios[0].decision
            answer, text, best = (head.answer if len(answers) <= 1 else MIXED), head.text, head.best
        else:
            answer, text, best = UNSURE, "no verdict: no baseline and speculative records to compare yet", None
        needed = max((s.decision.prompts_needed or 0 for s in scenarios), default=0) or None
        return cls(
            look, prompts, calibration, answer, text, best, needed, round(seconds, 3), round(elapsed_s, 3), scenarios
        )

    def as_dict(self) -> dict:
        out: dict[str, object] = {
            "look": self.look,
            "prompts": self.prompts,
            "calibration_prompts": self.calibration_prompts,
            "answer": self.answer,
            "text": self.text,
            "best": None if self.best is None else self.best.summary_dict(),
            "prompts_needed": self.prompts_needed,
            "seconds": self.seconds,
            "elapsed_s": self.elapsed_s,
            "scenarios": [s.as_dict() for s in self.scenarios],
        }
        if self.dropped:
            out["dropped"] = list(self.dropped)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> Look:
        return cls(
            int(data.get("look") or 0),
            int(data.get("prompts") or 0),
            data.get("calibration_prompts"),
            Answer.of(data.get("answer")),
            str(data.get("text") or ""),
            Candidate.from_dict(data.get("best")),
            data.get("prompts_needed"),
            float(data.get("seconds") or 0.0),
            float(data.get("elapsed_s") or 0.0),
            [ScenarioVerdict.from_dict(s) for s in data.get("scenarios") or [] if isinstance(s, dict)],
            list(data.get("dropped") or []),
        )

    def best_interval_text(self) -> str:
        """The best option's adjusted interval, or what is missing in words."""
        return (self.best.interval_text(self.answer) if self.best is not None else "") or "no speedup yet"

    def best_label(self) -> str:
        return "none compared yet" if self.best is None else self.best.describe(schedule=False)


@dataclass
class WorkloadHistory:
    """One workload's plan and what its looks found so far."""

    name: str
    planned: tuple[int, ...]  # prompts per look
    calibration: tuple[int, ...] = ()  # calibration prompts per look (mode replay; () otherwise)
    looks: list[Look] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # configurations out of the race, as labels
    status: str = OPEN
    seconds: float = 0.0  # wall seconds its looks took (its share of each round)
    planned_whole: tuple[int, ...] = ()  # a shard's: the unsharded sweep's prompts per look (its merge's plan)

    @property
    def look(self) -> int:
        return len(self.looks)

    @property
    def last(self) -> Look | None:
        return self.looks[-1] if self.looks else None

    @property
    def plan(self) -> LookPlan:
        return LookPlan(tuple(self.planned))

    def prompts_needed(self) -> int | None:
        return self.looks[-1].prompts_needed if self.looks else None

    def as_dict(self) -> dict:
        return {
            "planned": list(self.planned),
            **({"planned_whole": list(self.planned_whole)} if self.planned_whole else {}),
            "calibration": list(self.calibration),
            "status": self.status,
            "dropped": list(self.dropped),
            "seconds": self.seconds,
            "looks": [look.as_dict() for look in self.looks],
        }

    @classmethod
    def from_dict(cls, name: str, data: dict) -> WorkloadHistory:
        return cls(
            name,
            tuple(data.get("planned") or ()),
            tuple(data.get("calibration") or ()),
            [Look.from_dict(look) for look in data.get("looks") or [] if isinstance(look, dict)],
            list(data.get("dropped") or []),
            str(data.get("status") or OPEN),
            float(data.get("seconds") or 0.0),
            tuple(data.get("planned_whole") or ()),
        )


@dataclass
class History:
    """Every workload's looks (``adaptive.json``)."""

    plan: dict  # the sweep's `AdaptivePlan` as written (batch, first, max_prompts, budget_s, calibration_batch)
    elapsed_s: float
    finished: bool
    workloads: dict[str, WorkloadHistory]

    def plans(self) -> dict[str, LookPlan]:
        """Workload → the looks its verdicts allow for (what `recommend` needs to judge as the sweep did)."""
        return {name: w.plan for name, w in self.workloads.items() if w.planned}

    def as_dict(self) -> dict:
        return {
            "plan": self.plan,
            "elapsed_s": round(self.elapsed_s, 3),
            "finished": self.finished,
            "workloads": {name: w.as_dict() for name, w in self.workloads.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> History:
        workloads = data.get("workloads") or {}
        return cls(
            dict(data.get("plan") or {}),
            float(data.get("elapsed_s") or 0.0),
            bool(data.get("finished")),
            {str(n): WorkloadHistory.from_dict(str(n), e) for n, e in workloads.items() if isinstance(e, dict)},
        )


def load_history(folder: str | Path) -> History | None:
    """The folder's stopping history, None when it was not an adaptive sweep (a broken file: a one-line error)."""
    data = read_history(folder)
    return None if data is None else History.from_dict(data)

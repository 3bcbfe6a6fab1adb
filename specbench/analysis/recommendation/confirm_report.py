"""A confirmation's state file, ``RESULTS/confirm/confirm.json``: per target its fresh prompts, planned looks and
what each look found (`LookResult`, `TargetLooks`), and the confirmation as a whole (`Report`). The confirmation's
looks (`specbench.measure.run.confirm`) write it after every look; `results show`, `recommend`, `plot` and
`confirm` read it back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specbench.analysis.recommendation.confirm_targets import Target
from specbench.analysis.recommendation.confirmation import TargetResult, result_line
from specbench.analysis.statistics.sequential import FIXED, LookPlan
from specbench.analysis.verdicts.status import BUDGET, DECIDED, EXHAUSTED, OPEN, no_look_words
from specbench.errors import SpecbenchError
from specbench.safe_files import read_json, write_json

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
            return f"{self.target.name}: {no_look_words(self.status)} ({len(self.prompts)} fresh prompts drawn)"
        ended = {
            DECIDED: "",
            OPEN: " (still open)",
            EXHAUSTED: f" (its planned looks ended at {self.planned[-1] if self.planned else 0} fresh prompts)",
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
        """The targets of ``workload``: its own, and for a workload named without options the targets of its
        option variants too (a context sweep's ``long-context`` confirms ``long-context:bin=4k`` and ``…:bin=7k``
        on both sides of a length threshold)."""
        return [
            t
            for t in self.targets.values()
            if t.target.workload == workload or (":" not in workload and t.target.workload.split(":")[0] == workload)
        ]

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
    write_json(Path(folder) / STATE_FILE, report.as_dict())


def load_report(results: str | Path) -> Report | None:
    """The confirmation of the results folder ``results`` (None: not confirmed); a broken file is one line."""
    path = Path(results) / CONFIRM_DIR / STATE_FILE
    if not path.exists():
        return None
    try:
        data = read_json(path, "confirmation")
        if not isinstance(data, dict) or not isinstance(data.get("targets", {}), dict):
            raise ValueError("not a mapping with 'targets'")
        return Report.from_dict(data)
    except SpecbenchError as exc:
        raise SpecbenchError(f"broken {exc}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecbenchError(f"broken confirmation {path}: {exc}") from None

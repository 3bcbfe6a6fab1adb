"""The ``adaptive`` key of a sweep: measure in stages until each workload's verdict is confident.

    adaptive: {batch: 8, first: 8, max_prompts: 64, budget: 10m, calibration_batch: 3}

or on the command line ``--until-decided [--budget 10m] [--max-prompts 64] [--batch 8]``.

* ``first`` prompts per workload in the first look (default: ``batch``), then ``batch`` more per
  look while the workload is open, up to ``max_prompts`` (default 200) and at most the prompts the
  workload has (its ``count``, when the sweep gives one, caps it too);
* ``budget``: wall time for the whole sweep (``90s``, ``20m``, ``1.5h``, or seconds as a number);
  none by default. The budget is wall time or prompts, whichever ends first;
* ``calibration_batch`` (mode replay): calibration prompts added per look (default: the
  ``calibration.prompts`` of the first look), so the cost part of the predicted interval narrows too.

The looks each workload will get are fixed here, before any data (`looks_for`): that is what the
verdict's error control needs (`specbench.analysis.statistics.sequential`). The key chooses which units are
measured, not what a unit measures, so it stays out of the spec hash.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.bounds import check as check_bound
from specbench.bounds import violation
from specbench.durations import parse_duration
from specbench.errors import SpecbenchError, check_keys

KEYS = ("batch", "first", "max_prompts", "budget", "calibration_batch")
DEFAULT_BATCH = 8
DEFAULT_MAX_PROMPTS = 200
MAX_LOOKS = 64  # specbench.analysis.statistics.sequential.MAX_LOOKS: the boundary is simulated for at most this many
BUDGET_UNITS = ("s", "sec", "m", "min", "h", "hr", "d")  # a budget's units (`specbench.durations`); bare: seconds


@dataclass(frozen=True)
class AdaptivePlan:
    batch: int = DEFAULT_BATCH
    first: int = DEFAULT_BATCH
    max_prompts: int = DEFAULT_MAX_PROMPTS
    budget_s: float | None = None
    calibration_batch: int | None = None  # None: the first look's calibration prompts

    def looks_for(self, available: int) -> tuple[int, ...]:
        """Prompts per look for a workload with ``available`` prompts: first, first + batch, ... up to the cap."""
        cap = min(self.max_prompts, available)
        looks = list(range(min(self.first, cap), cap + 1, self.batch))
        if not looks or looks[-1] != cap:
            looks.append(cap)
        if len(looks) > MAX_LOOKS:
            raise SpecbenchError(
                f"adaptive: {len(looks)} looks ({self.first} prompts, then {self.batch} more up to "
                f"{cap}) are over the limit of {MAX_LOOKS}: raise 'batch'"
            )
        return tuple(looks)

    def calibration_for(self, looks: tuple[int, ...], first_calibration: int) -> tuple[int, ...]:
        """Calibration prompts per look (mode replay): the first look's, then ``calibration_batch`` more each look."""
        step = self.calibration_batch if self.calibration_batch is not None else first_calibration
        return tuple(min(n, first_calibration + k * step) for k, n in enumerate(looks))

    @classmethod
    def from_dict(cls, stored: dict) -> AdaptivePlan:
        """The plan `to_dict` wrote (run.json's ``sweep.adaptive``), resolved already: no checks again."""
        return cls(**{k: stored[k] for k in cls.__dataclass_fields__ if k in stored})

    def to_dict(self) -> dict:
        return {
            "batch": self.batch,
            "first": self.first,
            "max_prompts": self.max_prompts,
            "budget_s": self.budget_s,
            "calibration_batch": self.calibration_batch,
        }


def parse_budget(value, where: str) -> float:
    """Seconds from ``600``, ``90s``, ``20m``, ``1.5h`` (`specbench.durations.parse_duration`); a one-line error
    otherwise."""
    seconds = parse_duration(value, BUDGET_UNITS, bare=True)
    if seconds is None:
        shown = value if isinstance(value, (bool, int, float)) else str(value)[:40]
        raise SpecbenchError(f"{where}: budget must be a duration such as 90s, 20m or 1.5h, got {shown!r}")
    if violation("adaptive.budget_s", seconds) is not None:
        raise SpecbenchError(f"{where}: budget must be more than 0 s and at most 30 days, got {value!r}")
    return seconds


def _count(value, where: str, key: str, row: str = "prompts") -> int:
    """A count of prompts, checked against the bounds table (`specbench.bounds`)."""
    return check_bound(row, value, where, f"adaptive.{key}")


def parse_adaptive(value, where: str) -> AdaptivePlan | None:
    """The ``adaptive`` mapping (``true`` for the defaults, ``null``/``false`` for a fixed grid)."""
    if value is None or value is False:
        return None
    if value is True:
        return AdaptivePlan()
    if not isinstance(value, dict):
        raise SpecbenchError(
            f"{where}: 'adaptive' must be true or a mapping, e.g. {{batch: 8, max_prompts: 64, budget: 10m}}"
        )
    check_keys(value, KEYS, f"{where}: unknown key 'adaptive.{{key}}'", listing="adaptive takes")
    batch = _count(value.get("batch", DEFAULT_BATCH), where, "batch")
    first = _count(value.get("first", batch), where, "first")
    max_prompts = _count(value.get("max_prompts", DEFAULT_MAX_PROMPTS), where, "max_prompts")
    budget = value.get("budget")
    calibration = value.get("calibration_batch")
    plan = AdaptivePlan(
        batch=batch,
        first=first,
        max_prompts=max_prompts,
        budget_s=None if budget is None else parse_budget(budget, f"{where}: adaptive.budget"),
        calibration_batch=None
        if calibration is None
        else _count(calibration, where, "calibration_batch", "adaptive.calibration_batch"),
    )
    plan.looks_for(max_prompts)  # the look limit, checked before anything runs
    return plan

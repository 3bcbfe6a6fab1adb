"""Sweeps that decide: measure in looks, stop each workload once its verdict is confident.

A fixed grid spends its budget evenly and stops where it was told. An adaptive sweep (sweep key
``adaptive``, `specbench.measure.grid.adaptive`) works in *looks* per workload:

1. look k of a workload measures its first n_k prompts (planned before any data: n_1 = first,
   then + batch up to the cap), for the configurations still in the race; in mode replay every γ
   is replayed on every prompt (acceptance is cheap) and the calibration units — the only timed
   ones besides the baseline — run on the first c_k prompts;
2. after the look the workload's verdict is recomputed from its records so far, with the error
   control of `specbench.analysis.statistics.sequential` (the planned looks and the best-of-K adjustment);
3. the workload stops when the verdict is settled — a confident no, or a confident yes whose choice is settled
   too (an option within the tolerance ε of the best, by paired comparisons:
   `specbench.analysis.verdicts.choice`) —, when its prompts run out, when
   no practical number of prompts would settle it (futility: the estimate sits on 1), or when the
   wall-time budget is spent; otherwise configurations confidently below the best are dropped
   from timing (racing: `specbench.analysis.verdicts.decision.dominated`) and the next look follows.

Open workloads run their next looks together, one *round* at a time: `AdaptivePolicy` is the look engine
(`specbench.measure.run.looks`, shared with the confirmation) running this module's rule, `AdaptiveLooks`;
the runner drives it (`specbench.measure.run.policy`): it proposes each round's units, the runner measures
them through its own unit machinery (timing protocol, replay, serving groups), writes every record
the moment it is measured and hands the records back; records carry their look in ``stage``. When the next round
would overrun the budget, the workloads closest to a verdict (fewest prompts still needed) go first.

Resume. A look's units are a function of the plan and of the verdicts of the earlier looks, and
each verdict is a function of the records of its looks, so after a kill the same command
recomputes the history from the records, skips the finished units and goes on; only the wall
time spent (``elapsed_s`` in ``adaptive.json``, `specbench.records.adaptive_history`) is carried over.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pandas as pd

from specbench.analysis.recommendation.recommend import recommend
from specbench.analysis.verdicts.stopping import (
    BUDGET,
    CONFIG_KEYS,
    DECIDED,
    EXHAUSTED,
    FUTILE,
    OPEN,
    look_outcome,
    near_zero_acceptance,
)
from specbench.analysis.verdicts.stopping_history import History, Look, ScenarioVerdict, WorkloadHistory
from specbench.analysis.verdicts.stopping_report import summary_lines
from specbench.errors import SpecbenchError
from specbench.measure.grid.units import Unit, expand_units, in_shard
from specbench.measure.run.looks import LookEngine
from specbench.records.adaptive_history import read_history, write_history


@dataclass
class WorkloadLooks(WorkloadHistory):
    """One workload's plan and what its looks found so far, with the configurations out of the race as keys."""

    out_of_race: set[tuple] = field(default_factory=set)  # `Candidate.key` of configurations dropped from timing
    why: dict[tuple, str] = field(default_factory=dict)  # a reason said beside a dropped key (near-zero acceptance)

    def seconds_per_prompt(self) -> float | None:
        measured = self.planned[self.look - 1] if self.look else 0
        return self.seconds / measured if measured and self.seconds > 0 else None

    def drop(self, keys: set[tuple]) -> list[str]:
        """Take ``keys`` out of the race; returns the labels of those newly dropped."""
        newly = keys - self.out_of_race
        self.out_of_race |= newly
        self.dropped = [self._label(k) for k in sorted(self.out_of_race, key=str)]
        return [self._label(k) for k in sorted(newly, key=str)]

    def _label(self, key: tuple) -> str:
        return _key_label(key) + (f" ({self.why[key]})" if key in self.why else "")


def _key_label(key: tuple) -> str:
    label, tree, gamma, schedule = key
    return f"{label}{'' if tree == 'chain' else ' tree ' + str(tree)} γ={gamma}" + (
        "" if schedule in (None, "fixed") else f" schedule {schedule}"
    )


def config_key(unit: Unit) -> tuple:
    c = unit.config
    return (c.drafter_label, c.tree, c.gamma, c.schedule.label)


def pool_units(spec, workloads, shard: tuple[int, int]) -> list[Unit]:
    """Every unit any look of an adaptive sweep may need: the grid over the pool, where in mode replay every
    prompt may become a calibration prompt in a later look."""
    if spec.calibration is not None:
        spec = replace(spec, calibration=replace(spec.calibration, prompts=10**9))
    return expand_units(spec, workloads, shard)


def shard_looks(whole: tuple[int, ...], workload, shard: tuple[int, int]) -> tuple[int, ...]:
    """A shard's prompts per look: of the first n prompts of each look of the unsharded sweep (``whole``, in the
    workload's sample order), those in the shard — so that the shards' looks together are the unsharded sweep's
    looks, and their merge is judged for the looks the unsharded sweep would have planned. Looks that add no
    prompt of the shard are left out."""
    mine = [i for i, p in enumerate(workload.prompts) if in_shard(p.prompt_id, workload.name, shard)]
    counts = [sum(1 for i in mine if i < n) for n in whole]
    return tuple(sorted({c for c in counts if c > 0}))


class LookPlanner:
    """Which units each look of each workload needs (no model, no folder: the dry run uses it too)."""

    def __init__(self, spec, workloads, shard: tuple[int, int]):
        if spec.adaptive is None:
            raise SpecbenchError("not an adaptive sweep")
        self.spec, self.plan = spec, spec.adaptive
        self.units = pool_units(spec, workloads, shard)
        self.index: dict[tuple, int] = {}  # (workload, prompt_id) -> position in the workload's sample order
        counts: dict[str, int] = {}
        for unit in self.units:  # expand_units lays each workload's prompts out in sample order
            key = (unit.workload.name, unit.prompt.prompt_id)
            if key not in self.index:
                self.index[key] = counts.get(key[0], 0)
                counts[key[0]] = self.index[key] + 1
        first_cal = spec.calibration.prompts if spec.calibration is not None else 0
        self.states: dict[str, WorkloadLooks] = {}
        for workload in workloads:
            if not counts.get(workload.name):
                continue
            whole = self.plan.looks_for(len(workload.prompts))  # the unsharded sweep's looks over this pool
            planned = shard_looks(whole, workload, shard)
            calibration = self.plan.calibration_for(planned, first_cal) if spec.calibration is not None else ()
            self.states[workload.name] = WorkloadLooks(
                workload.name, planned, calibration, planned_whole=whole if shard[1] > 1 else ()
            )

    def units_for(self, state: WorkloadLooks, look: int) -> list[Unit]:
        """The units of ``state``'s look ``look`` (1-based), each stamped with the look it first belongs to;
        earlier looks' units are included (they are finished: the runner skips them)."""
        n = state.planned[look - 1]
        calibration = state.calibration[look - 1] if state.calibration else None
        chosen = []
        for unit in self.units:
            if unit.workload.name != state.name:
                continue
            position = self.index[(state.name, unit.prompt.prompt_id)]
            if position >= n:
                continue
            if unit.mode == "live" and not unit.config.is_baseline:
                if self._out_of_race(state, unit):
                    continue
                if calibration is not None and position >= calibration:
                    continue
            chosen.append(unit)
        return [replace(u, stage=self._stage_of(state, u)) for u in chosen]

    def worst_case(self) -> list[Unit]:
        """Every unit if no workload stops before its last look and nothing leaves the race."""
        return [u for state in self.states.values() for u in self.units_for(state, len(state.planned))]

    def _out_of_race(self, state: WorkloadLooks, unit: Unit) -> bool:
        """A live configuration dropped by racing; in mode replay a calibration unit only once every γ of its
        (drafter, tree) is dropped (the cost model of the γ still racing needs the calibration γ)."""
        if self.spec.calibration is None:
            return config_key(unit) in state.out_of_race
        label, tree, _, schedule = config_key(unit)
        return all((label, tree, g, schedule) in state.out_of_race for g in self.spec.gammas if g > 0)

    def _stage_of(self, state: WorkloadLooks, unit: Unit) -> int:
        """The first look whose units include ``unit``."""
        position = self.index[(state.name, unit.prompt.prompt_id)]
        live_timed = unit.mode == "live" and not unit.config.is_baseline and state.calibration
        bounds = state.calibration if live_timed else state.planned
        return next(k for k, n in enumerate(bounds, start=1) if position < n)


class AdaptiveLooks:
    """The adaptive sweep's rule for the look engine (`specbench.measure.run.looks.LookRule`): a workload's
    looks and their units, its verdict after each look (direction and choice), ``adaptive.json``."""

    def __init__(self, spec, workloads, shard: tuple[int, int], folder):
        self.spec, self.plan, self.folder = spec, spec.adaptive, folder
        self.planner = LookPlanner(spec, workloads, shard)
        self.units = self.planner.units
        self.states = self.planner.states
        self.units_for = self.planner.units_for
        self.budget_s = self.plan.budget_s
        previous = read_history(folder) or {}
        self.elapsed_s = float(previous.get("elapsed_s") or 0.0)
        self.previous = History.from_dict(previous)

    def resumed(self, budget_spent: bool) -> None:
        """Carry each workload's seconds (and a budget stop) over from the saved history."""
        for name, entry in self.previous.workloads.items():
            if name in self.states:
                self.states[name].seconds = entry.seconds
                if entry.status == BUDGET and self.states[name].status == OPEN and budget_spent:
                    self.states[name].status = BUDGET

    def judge(self, state: WorkloadLooks, records: pd.DataFrame, elapsed_s: float) -> None:
        """The verdict after ``state``'s next look, from the records of its looks so far."""
        look = state.look + 1
        mine = records[(records["workload"] == state.name) & records["stage"].notna()]
        mine = mine[mine["stage"].astype(int) <= look]
        scenarios = self._verdicts(mine, state)
        calibration = state.calibration[look - 1] if state.calibration else None
        entry = Look.of(look, state.planned[look - 1], calibration, scenarios, state.seconds, elapsed_s)
        state.looks.append(entry)
        state.status, newly = look_outcome([s.decision for s in scenarios], look, state.planned)
        if look == 1:  # a drafter that accepts almost nothing stops at its first look (`near_zero_acceptance`)
            state.why.update(near_zero_acceptance(mine))
            newly |= set(state.why)
            racing = {tuple(k) for k in mine.loc[mine["gamma"] > 0, CONFIG_KEYS].fillna("fixed").to_numpy()}
            if state.why and state.status == OPEN and racing <= set(state.why):
                state.status = FUTILE  # nothing left to race: more looks would time the target alone
        entry.dropped = state.drop(newly)

    def _verdicts(self, records: pd.DataFrame, state: WorkloadLooks) -> list[ScenarioVerdict]:
        """One verdict per scenario of the workload (sampling, backend, concurrency)."""
        try:
            recs = recommend(records, n_boot=0, plans={state.name: state.plan}, tolerance=self.spec.tolerance)
        except SpecbenchError:
            return []
        return [
            ScenarioVerdict({k: v for k, v in rec.keys.items() if k != "workload"}, rec.decision)
            for rec in recs
            if rec.decision is not None
        ]

    def history(self, elapsed_s: float, finished_all: bool = False) -> History:
        return History(self.plan.to_dict(), elapsed_s, finished_all, dict(self.states))

    def save(self, elapsed_s: float, finished: bool) -> None:
        self.elapsed_s = elapsed_s
        write_history(self.folder, self.history(elapsed_s, finished).as_dict())

    def lines(self) -> list[str]:
        return summary_lines(self.history(self.elapsed_s))

    def title(self, name: str, state: WorkloadLooks) -> str:
        return f"adaptive: {name} look {state.look + 1} ({state.planned[state.look]} prompts)"


class AdaptivePolicy(LookEngine):
    """The look-by-look policy of an adaptive sweep: the look engine running `AdaptiveLooks`."""

    def __init__(self, spec, workloads, shard: tuple[int, int], folder):
        super().__init__(AdaptiveLooks(spec, workloads, shard, folder))


__all__ = [
    "AdaptiveLooks",
    "AdaptivePolicy",
    "LookPlanner",
    "config_key",
    "pool_units",
    "OPEN",
    "DECIDED",
    "EXHAUSTED",
    "BUDGET",
    "FUTILE",
]

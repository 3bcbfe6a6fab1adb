"""Sweeps that decide: measure in looks, stop each workload once its verdict is confident.

A fixed grid spends its budget evenly and stops where it was told. An adaptive sweep (sweep key
``adaptive``, `specbench.measure.adaptive_spec`) works in *looks* per workload:

1. look k of a workload measures its first n_k prompts (planned before any data: n_1 = first,
   then + batch up to the cap), for the configurations still in the race; in mode replay every γ
   is replayed on every prompt (acceptance is cheap) and the calibration units — the only timed
   ones besides the baseline — run on the first c_k prompts;
2. after the look the workload's verdict is recomputed from its records so far, with the error
   control of `specbench.analysis.sequential` (the planned looks and the best-of-K adjustment);
3. the workload stops when the verdict is confident (yes or no), when its prompts run out, when
   no practical number of prompts would settle it (futility: the estimate sits on 1), or when the
   wall-time budget is spent; otherwise configurations confidently below the best are dropped
   from timing (racing: `specbench.analysis.decision.dominated`) and the next look follows.

Open workloads run their next looks together, one *round* at a time, through the runner's own
unit machinery (timing protocol, replay, serving groups), so every record is written the moment
it is measured; records carry their look in ``stage``. When the next round would overrun the
budget, the workloads closest to a verdict (fewest prompts still needed) go first.

Resume. A look's units are a function of the plan and of the verdicts of the earlier looks, and
each verdict is a function of the records of its looks, so after a kill the same command
recomputes the history from the records, skips the finished units and goes on; only the wall
time spent (``elapsed_s`` in ``adaptive.json``, `specbench.records.adaptive_history`) is carried over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from specbench.analysis.decision import CANDIDATE_KEYS
from specbench.analysis.recommend import recommend
from specbench.analysis.sequential import LookPlan
from specbench.analysis.speedup_interval import UNSURE
from specbench.analysis.stopping import BUDGET, DECIDED, EXHAUSTED, FUTILE, OPEN, look_outcome
from specbench.errors import SpecbenchError
from specbench.measure.units import Unit, expand_units, in_shard
from specbench.records.adaptive_history import read_history, write_history
from specbench.records.store import load_records


@dataclass
class WorkloadLooks:
    """One workload's plan and what its looks found so far."""

    name: str
    planned: tuple[int, ...]  # prompts per look
    calibration: tuple[int, ...]  # calibration prompts per look (mode replay; () otherwise)
    looks: list[dict] = field(default_factory=list)
    planned_whole: tuple[int, ...] = ()  # a shard's: the unsharded sweep's prompts per look (its merge's plan)
    dropped: set[tuple] = field(default_factory=set)  # CANDIDATE_KEYS of configurations out of the race
    status: str = OPEN
    seconds: float = 0.0  # wall seconds its looks took (its share of each round)

    @property
    def look(self) -> int:
        return len(self.looks)

    @property
    def plan(self) -> LookPlan:
        return LookPlan(self.planned)

    def seconds_per_prompt(self) -> float | None:
        measured = self.planned[self.look - 1] if self.look else 0
        return self.seconds / measured if measured and self.seconds > 0 else None

    def prompts_needed(self) -> int | None:
        return self.looks[-1].get("prompts_needed") if self.looks else None

    def to_dict(self) -> dict:
        return {
            "planned": list(self.planned),
            **({"planned_whole": list(self.planned_whole)} if self.planned_whole else {}),
            "calibration": list(self.calibration),
            "status": self.status,
            "dropped": [_key_label(k) for k in sorted(self.dropped, key=str)],
            "seconds": self.seconds,
            "looks": self.looks,
        }


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
            return config_key(unit) in state.dropped
        label, tree, _, schedule = config_key(unit)
        return all((label, tree, g, schedule) in state.dropped for g in self.spec.gammas if g > 0)

    def _stage_of(self, state: WorkloadLooks, unit: Unit) -> int:
        """The first look whose units include ``unit``."""
        position = self.index[(state.name, unit.prompt.prompt_id)]
        live_timed = unit.mode == "live" and not unit.config.is_baseline and state.calibration
        bounds = state.calibration if live_timed else state.planned
        return next(k for k, n in enumerate(bounds, start=1) if position < n)


class AdaptiveSweep:
    """The look-by-look driver over a `specbench.measure.runner.SweepRunner` (duck-typed: spec, store,
    observer, workloads, shard, ``_run_units``, backend)."""

    def __init__(self, runner):
        self.runner, self.spec, self.plan = runner, runner.spec, runner.spec.adaptive
        self.planner = LookPlanner(runner.spec, runner.workloads, runner.shard)
        self.states = self.planner.states
        self.units_for = self.planner.units_for
        previous = read_history(runner.store.folder) or {}
        self.elapsed_before = float(previous.get("elapsed_s") or 0.0)
        self.budget_stopped = False  # the last round was refused for want of budget, not of prompts

    # ------------------------------------------------------------------ running
    def run(self, finished: set[str]) -> int:
        """Every look until each workload is settled; returns the units measured now."""
        measured = 0
        self._replay_history(finished)
        self._save()
        while True:
            todo = self._next_round(finished)
            if not todo:
                break
            units = [u for batch in todo.values() for u in batch]
            started = time.monotonic()
            self.runner.observer.status(self._round_title(todo))
            fresh = [u for u in units if u.unit_id not in finished]
            self._announce_look(len(fresh))
            count = self.runner._run_units(fresh) if fresh else 0
            finished.update(u.unit_id for u in fresh)
            measured += count
            seconds = time.monotonic() - started
            self._share_time(todo, seconds)
            self.elapsed_before += seconds
            records = load_records(self.runner.store.folder)
            for name in todo:
                self._judge(self.states[name], records)
            self._save()
            self._report()
        self._close_open(BUDGET if self._budget_spent() or self.budget_stopped else EXHAUSTED)
        self._save(finished_all=True)
        self._report()
        return measured

    def _replay_history(self, finished: set[str]) -> None:
        """Rebuild every workload's looks from the records of a resumed sweep (verdicts are recomputed)."""
        records = None
        for state in self.states.values():
            while state.status == OPEN and state.look < len(state.planned):
                units = self.units_for(state, state.look + 1)
                if any(u.unit_id not in finished for u in units):
                    break
                if records is None:
                    records = load_records(self.runner.store.folder)
                self._judge(state, records)
        previous = read_history(self.runner.store.folder) or {}
        for name, entry in previous.get("workloads", {}).items():
            if name in self.states:
                self.states[name].seconds = float(entry.get("seconds") or 0.0)
                if entry.get("status") == BUDGET and self.states[name].status == OPEN and self._budget_spent():
                    self.states[name].status = BUDGET

    def _next_round(self, finished: set[str]) -> dict[str, list[Unit]]:
        """Open workloads' next looks that fit the budget (closest to a verdict first)."""
        candidates = {}
        for state in self.states.values():
            if state.status != OPEN:
                continue
            if state.look >= len(state.planned):
                state.status = EXHAUSTED
                continue
            candidates[state.name] = self.units_for(state, state.look + 1)
        if not candidates or self.plan.budget_s is None:
            return candidates
        if self._budget_spent():
            self.budget_stopped = True
            return {}
        left = self.plan.budget_s - self.elapsed_before
        order = sorted(candidates, key=lambda n: (self.states[n].prompts_needed() or np.inf, n))
        chosen, planned_s = {}, 0.0
        for name in order:
            cost = self._look_seconds(self.states[name])
            if cost is None or planned_s + cost <= left or not chosen and cost <= left:
                chosen[name] = candidates[name]
                planned_s += cost or 0.0
        self.budget_stopped = not chosen  # looks remain, but none fits the budget left
        return chosen

    def _look_seconds(self, state: WorkloadLooks) -> float | None:
        per_prompt = state.seconds_per_prompt()
        if per_prompt is None or state.look == 0:
            return None
        return per_prompt * (state.planned[state.look] - state.planned[state.look - 1])

    def _budget_spent(self) -> bool:
        return self.plan.budget_s is not None and self.elapsed_before >= self.plan.budget_s

    def _share_time(self, todo: dict[str, list[Unit]], seconds: float) -> None:
        """A round's wall time split between its workloads by the tokens their units could generate."""
        weights = {name: sum(u.max_new_tokens for u in units if u.mode == "live") or 1 for name, units in todo.items()}
        total = sum(weights.values())
        for name, weight in weights.items():
            self.states[name].seconds += seconds * weight / total

    # ------------------------------------------------------------------ judging
    def _judge(self, state: WorkloadLooks, records: pd.DataFrame) -> None:
        """The verdict after ``state``'s next look, from the records of its looks so far."""
        look = state.look + 1
        mine = records[(records["workload"] == state.name) & records["stage"].notna()]
        mine = mine[mine["stage"].astype(int) <= look]
        scenarios = self._verdicts(mine, state)
        answers = {s["answer"] for s in scenarios}
        head = (
            scenarios[0]
            if scenarios
            else {
                "answer": UNSURE,
                "text": "no verdict: no baseline and speculative records to compare yet",
                "best": None,
                "prompts_needed": None,
                "candidates": [],
            }
        )
        entry = {
            "look": look,
            "prompts": state.planned[look - 1],
            "calibration_prompts": state.calibration[look - 1] if state.calibration else None,
            "answer": head["answer"] if len(answers) <= 1 else "mixed",
            "text": head["text"],
            "best": head.get("best"),
            "prompts_needed": max((s["prompts_needed"] or 0 for s in scenarios), default=0) or None,
            "seconds": round(state.seconds, 3),
            "elapsed_s": round(self.elapsed_before, 3),
            "scenarios": [{k: v for k, v in s.items() if k != "candidates"} for s in scenarios],
        }
        state.looks.append(entry)
        state.status, newly = look_outcome(scenarios, look, state.planned)
        newly -= state.dropped
        if newly:
            entry["dropped"] = [_key_label(k) for k in sorted(newly, key=str)]
            state.dropped |= newly

    def _verdicts(self, records: pd.DataFrame, state: WorkloadLooks) -> list[dict]:
        """One verdict per scenario of the workload (sampling, backend, concurrency)."""
        try:
            recs = recommend(records, n_boot=0, plans={state.name: state.plan})
        except SpecbenchError:
            return []
        out = []
        for rec in recs:
            decision = rec.decision
            if decision is None:
                continue
            out.append(
                {
                    "keys": {k: v for k, v in rec.keys.items() if k != "workload"},
                    **decision.as_dict(),
                    "candidates": decision.candidates,
                }
            )
        return out

    # ------------------------------------------------------------------ history and progress
    def _close_open(self, status: str) -> None:
        for state in self.states.values():
            if state.status == OPEN:
                state.status = status

    def history(self, finished_all: bool = False) -> dict:
        return {
            "plan": self.plan.to_dict(),
            "elapsed_s": round(self.elapsed_before, 3),
            "finished": finished_all,
            "workloads": {name: state.to_dict() for name, state in self.states.items()},
        }

    def _save(self, finished_all: bool = False) -> None:
        write_history(self.runner.store.folder, self.history(finished_all))

    def _announce_look(self, units: int) -> None:
        announce = getattr(self.runner.observer, "look_started", None)
        if announce is not None:
            left = None if self.plan.budget_s is None else max(self.plan.budget_s - self.elapsed_before, 0.0)
            announce(units, left)

    def _report(self) -> None:
        report = getattr(self.runner.observer, "looks_done", None)
        if report is not None:
            report(self.history())

    def _round_title(self, todo: dict[str, list[Unit]]) -> str:
        parts = [
            f"{name} look {self.states[name].look + 1} ({self.states[name].planned[self.states[name].look]} prompts)"
            for name in todo
        ]
        return "adaptive: " + ", ".join(parts)


__all__ = [
    "AdaptiveSweep",
    "LookPlanner",
    "CANDIDATE_KEYS",
    "config_key",
    "pool_units",
    "OPEN",
    "DECIDED",
    "EXHAUSTED",
    "BUDGET",
    "FUTILE",
]

"""The one look engine: looks, budget, stopping and racing for every policy that measures in looks.

The adaptive sweep (`specbench.measure.run.adaptive`) and the confirmation (`specbench.measure.run.confirm`)
both measure *items* (a workload; a confirmed target) in looks of prompts planned before any data, judge each item
after each of its looks, stop it when it is settled, when its planned looks run out or when the budget is spent,
and leave the runner to measure. What differs between them is their *rule* (`LookRule`): which units a look
needs, how a look is judged (the sweep's verdict and choice; the confirmation's held / missed and regret), how
the state is written and worded. The engine is the rest, written once:

* a **round** is the next look of every open item; with a budget, the items closest to a verdict (fewest prompts
  still needed) go first while their estimated look time fits what is left (`policy.choose_round`);
* after a round its wall time is shared between its items by the tokens they could generate (`policy.share_time`)
  and each item is judged on the records of its looks so far;
* **resume**: the looks whose units are all finished are judged again from the records (a verdict is a function
  of the records), so a killed run goes on where it stopped; the wall time spent is the rule's saved state;
* an **interrupted** round (Ctrl-C, a kill the runner sees) still counts its wall time, so a resumed run cannot
  escape its budget by being interrupted;
* **close**: items still open end as "budget" when the budget stopped them, "prompts exhausted" otherwise.

The status words are `specbench.analysis.verdicts.status`'s (OPEN, DECIDED, EXHAUSTED, BUDGET, FUTILE).
"""

from __future__ import annotations

from typing import Protocol

import pandas as pd

from specbench.analysis.verdicts.status import BUDGET, EXHAUSTED, OPEN
from specbench.measure.grid.units import Unit
from specbench.measure.run.policy import Proposal, choose_round, share_time


class LookState(Protocol):
    """One item's looks: its plan, how far it got and how it ended."""

    name: str
    planned: tuple[int, ...]  # prompts per look
    status: str
    seconds: float  # wall seconds its looks took (its share of each round)

    @property
    def look(self) -> int: ...

    def prompts_needed(self) -> int | None: ...

    def seconds_per_prompt(self) -> float | None: ...


class LookRule(Protocol):
    """What a policy brings to the engine: its units, its judgement, its state file and its words."""

    units: list[Unit]  # every unit any look may need (the runner prepares models for them)
    states: dict  # item name → its `LookState`
    budget_s: float | None
    elapsed_s: float  # wall time spent before this run (the saved state's)

    def units_for(self, state, look: int) -> list[Unit]: ...

    def judge(self, state, records: pd.DataFrame, elapsed_s: float) -> None: ...

    def resumed(self, budget_spent: bool) -> None: ...

    def save(self, elapsed_s: float, finished: bool) -> None: ...

    def lines(self) -> list[str]: ...

    def title(self, name: str, state) -> str: ...


class LookEngine:
    """A policy (`specbench.measure.run.policy.Policy`) that runs a rule's looks: propose, observe, close."""

    def __init__(self, rule: LookRule):
        self.rule = rule
        self.states = rule.states
        self.units = rule.units
        self.elapsed_s = float(rule.elapsed_s)
        self.budget_stopped = False  # the last round was refused for want of budget, not of prompts
        self._round: dict[str, list[Unit]] = {}

    # ------------------------------------------------------------------ the policy
    def resume(self, records: pd.DataFrame | None, finished: set[str]) -> None:
        """Judge again every look whose units are all finished (a resumed run)."""
        for state in self.states.values():
            while state.status == OPEN and state.look < len(state.planned):
                units = self.rule.units_for(state, state.look + 1)
                if records is None or any(u.unit_id not in finished for u in units):
                    break
                self.rule.judge(state, records, self.elapsed_s)
        self.rule.resumed(self._budget_spent())
        self.rule.save(self.elapsed_s, False)

    def propose(self, finished: set[str]) -> Proposal | None:
        """The next round: the open items' next looks that fit the budget (closest to a verdict first)."""
        self._round = self._next_round()
        if not self._round:
            return None
        left = None if self.rule.budget_s is None else max(self.rule.budget_s - self.elapsed_s, 0.0)
        units = list({u.unit_id: u for batch in self._round.values() for u in batch}.values())
        title = ", ".join(self.rule.title(name, self.states[name]) for name in self._round)
        return Proposal(units, title, left)

    def observe(self, records: pd.DataFrame, seconds: float) -> None:
        """The round's records are in: each of its items is judged on the records of its looks so far."""
        self._spend(seconds)
        for name in self._round:
            self.rule.judge(self.states[name], records, self.elapsed_s)
        self.rule.save(self.elapsed_s, False)

    def interrupted(self, seconds: float) -> None:
        """The round was interrupted after ``seconds``: its time counts against the budget on resume."""
        self._spend(seconds)
        self.rule.save(self.elapsed_s, False)

    def close(self) -> None:
        status = BUDGET if self._budget_spent() or self.budget_stopped else EXHAUSTED
        for state in self.states.values():
            if state.status == OPEN:
                state.status = status
        self.rule.save(self.elapsed_s, True)

    def progress_lines(self) -> list[str]:
        return self.rule.lines()

    # ------------------------------------------------------------------ rounds and budget
    def _next_round(self) -> dict[str, list[Unit]]:
        candidates = {}
        for state in self.states.values():
            if state.status != OPEN:
                continue
            if state.look >= len(state.planned):
                state.status = EXHAUSTED
                continue
            candidates[state.name] = self.rule.units_for(state, state.look + 1)
        if not candidates or self.rule.budget_s is None:
            return candidates
        if self._budget_spent():
            self.budget_stopped = True
            return {}
        costs = {name: self._look_seconds(self.states[name]) for name in candidates}
        needed = {name: self.states[name].prompts_needed() for name in candidates}
        chosen = choose_round(candidates, costs, needed, self.rule.budget_s - self.elapsed_s)
        self.budget_stopped = not chosen  # looks remain, but none fits the budget left
        return chosen

    def _spend(self, seconds: float) -> None:
        for name, share in share_time(self._round, seconds).items():
            self.states[name].seconds += share
        self.elapsed_s += seconds

    def _look_seconds(self, state) -> float | None:
        per_prompt = state.seconds_per_prompt()
        if per_prompt is None or state.look == 0:
            return None
        return per_prompt * (state.planned[state.look] - state.planned[state.look - 1])

    def _budget_spent(self) -> bool:
        return self.rule.budget_s is not None and self.elapsed_s >= self.rule.budget_s


__all__ = ["LookEngine", "LookRule", "LookState"]

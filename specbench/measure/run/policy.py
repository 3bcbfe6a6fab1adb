"""What the runner drives when a sweep measures in looks: a policy proposes, the runner measures.

A policy (the adaptive sweep, `specbench.measure.run.adaptive.AdaptivePolicy`; the confirmation of a
recommendation, `specbench.measure.run.confirm.ConfirmPolicy`; both the one look engine,
`specbench.measure.run.looks.LookEngine`, running their own rule) owns every decision about *what* to measure
next; `specbench.measure.run.runner.SweepRunner.drive` owns *how*: it runs a proposal's units through its
executor (timing protocol, replay, serving groups), writes every record the moment it is measured, and
hands the policy the folder's records after each proposal. Neither reaches into the other:

    policy.resume(records, finished)         # rebuild what the earlier looks found (a resumed run)
    while (step := policy.propose(finished)) is not None:
        ... the runner measures step.units ...
        policy.observe(records, seconds)     # every record so far, and the wall seconds the step took
    policy.close()

``units`` is every unit the policy may ever propose (the runner prepares models and drafters for
them before the first look), and ``progress_lines()`` the policy's news in words after each step. A step cut
short by Ctrl-C, SIGTERM or a failed piece is not observed (it is no look to judge): the runner calls
``policy.interrupted(seconds)`` before the interrupt goes on, so that a resumed run's budget counts its wall time
(`specbench.measure.run.looks.LookEngine.interrupted`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pandas as pd

from specbench.measure.grid.units import Unit


@dataclass(frozen=True)
class Proposal:
    """The next step: the units to measure (finished ones are skipped), a title for the progress display, and
    the budget left (None: no budget)."""

    units: list[Unit]
    title: str
    budget_left_s: float | None = None


class Policy(Protocol):
    units: list[Unit]  # every unit the policy may propose

    def resume(self, records: pd.DataFrame | None, finished: set[str]) -> None: ...

    def propose(self, finished: set[str]) -> Proposal | None: ...

    def observe(self, records: pd.DataFrame, seconds: float) -> None: ...

    def interrupted(self, seconds: float) -> None: ...

    def close(self) -> None: ...

    def progress_lines(self) -> list[str]: ...


def choose_round(
    candidates: dict[str, list[Unit]],
    look_seconds: dict[str, float | None],
    needed: dict[str, int | None],
    budget_left_s: float | None,
) -> dict[str, list[Unit]]:
    """Which of the open items' next looks (``candidates``: name → units) run in this round.

    Without a budget, all of them. With one, the items closest to a verdict (fewest prompts still
    ``needed``) go first while their estimated ``look_seconds`` fit what is left; an item whose cost is not
    known yet (its first look) always goes, and so does the first one that fits on its own.
    """
    if budget_left_s is None:
        return candidates
    order = sorted(candidates, key=lambda n: (needed.get(n) or float("inf"), n))
    chosen: dict[str, list[Unit]] = {}
    planned_s = 0.0
    for name in order:
        cost = look_seconds.get(name)
        if cost is None or planned_s + cost <= budget_left_s or not chosen and cost <= budget_left_s:
            chosen[name] = candidates[name]
            planned_s += cost or 0.0
    return chosen


def share_time(round_units: dict[str, list[Unit]], seconds: float) -> dict[str, float]:
    """A round's wall time split between its items by the tokens their live units could generate."""
    weights = {
        name: sum(u.max_new_tokens for u in units if u.mode == "live") or 1 for name, units in round_units.items()
    }
    total = sum(weights.values())
    return {name: seconds * weight / total for name, weight in weights.items()}

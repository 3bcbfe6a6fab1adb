"""The stopping rule of an adaptive sweep: after a look, is the workload settled, and what leaves the race?

After look k of a workload (n_k prompts of the planned n_1 < … < n_L), each of its scenarios
(sampling, backend, concurrency) has a verdict (`specbench.analysis.verdicts.decision`, adjusted by
`specbench.analysis.statistics.sequential`). Then, in this order:

* **decided** — every scenario is settled: a confident no, or a confident yes whose choice is settled too (an
  option certified within the tolerance ε of the best by paired comparisons,
  `specbench.analysis.verdicts.choice`), and no timing was disturbed (timing taken under interference never
  yields a confident verdict);
* **prompts exhausted** — k = L: the planned looks are spent;
* **futile** — after `FUTILITY_LOOKS` looks, every unsettled scenario would need more than
  `FUTILITY_FACTOR` × n_L prompts at its observed spread (or no number at all: the estimate sits
  on 1, or the options are too close to tell apart and too far apart to be within ε). Stopping for
  futility never makes a verdict confident, so it costs power, not error;
* otherwise **open**, and the configurations confidently more than ε behind another option in every
  scenario leave the race (`specbench.analysis.verdicts.decision.dominated`): they are no longer timed, though
  in a replay sweep every γ keeps its acceptance.

Near-zero acceptance (`near_zero_acceptance`), judged on the first look alone: a live configuration whose
acceptance rate α = accepted ÷ drafted draft tokens has its exact (Clopper–Pearson, 95 %) upper end below
`NEAR_ZERO_ALPHA` leaves the race there, with the reason in its label. At α < 0.1 a round emits
τ = (1 − α^(γ+1)) ÷ (1 − α) < 1.12 tokens for any γ, so no drafter costing more than about a tenth of a target
forward can pay: a drafter that accepts almost nothing (a broken quantization, a wrong ``p_min``) is caught after
its first look instead of spending the budget.
"""

from __future__ import annotations

import pandas as pd

from specbench.analysis.statistics.intervals import clopper_pearson
from specbench.analysis.verdicts.decision import dominated
from specbench.analysis.verdicts.status import BUDGET, DECIDED, EXHAUSTED, FUTILE, OPEN
from specbench.analysis.verdicts.verdict import UNSURE, YES, Decision

FUTILITY_LOOKS = 2
FUTILITY_FACTOR = 2.0
NEAR_ZERO_ALPHA = 0.1
CONFIG_KEYS = ["drafter_label", "tree", "gamma", "schedule"]  # a configuration, as the adaptive sweep keys it


def near_zero_acceptance(records: pd.DataFrame) -> dict[tuple, str]:
    """Live speculative configurations of ``records`` whose α's upper end is below `NEAR_ZERO_ALPHA`, keyed as
    (drafter_label, tree, γ, schedule), each with its reason ("near-zero acceptance: α 0.01 [0.00, 0.03], ...")."""
    live = records[(records["gamma"] > 0) & (records["mode"] == "live")]
    if live.empty:
        return {}
    live = live.assign(schedule=live["schedule"].fillna("fixed"))  # records from before schedules: fixed
    sums = live.groupby(CONFIG_KEYS, sort=False)[["accepted", "drafted"]].sum()
    lo, hi = clopper_pearson(sums["accepted"].to_numpy(), sums["drafted"].to_numpy())
    found = {}
    for (key, row), low, high in zip(sums.iterrows(), lo, hi):
        if row["drafted"] > 0 and high < NEAR_ZERO_ALPHA:
            alpha = row["accepted"] / row["drafted"]
            found[tuple(key)] = (
                f"near-zero acceptance: α {alpha:.3f} [{low:.3f}, {high:.3f}] over {int(row['drafted'])} draft tokens "
                f"(below {NEAR_ZERO_ALPHA:g}: cannot pay at any γ)"
            )
    return found


def look_outcome(verdicts: list[Decision], look: int, planned: tuple[int, ...]) -> tuple[str, set[tuple]]:
    """(status after look ``look``, configurations confidently below the best in every scenario).

    ``verdicts``: one `Decision` per scenario of the workload.
    """
    if verdicts and all(v.settled for v in verdicts):
        return DECIDED, set()
    if look >= len(planned):
        return EXHAUSTED, set()
    if _futile(verdicts, look, planned[-1]):
        return FUTILE, set()
    out = [set(dominated(v)) for v in verdicts]
    return OPEN, set.intersection(*out) if out else set()


def _futile(verdicts: list[Decision], look: int, cap: int) -> bool:
    if look < FUTILITY_LOOKS or not verdicts:
        return False
    for v in verdicts:
        if v.timing_disturbed:  # a quieter machine may settle it
            return False
        if v.settled:
            continue
        needed = v.prompts_needed
        if v.answer in (UNSURE, YES) and (needed is None or needed > FUTILITY_FACTOR * cap):
            continue
        return False
    return True


__all__ = ["BUDGET", "DECIDED", "EXHAUSTED", "FUTILE", "OPEN", "look_outcome", "near_zero_acceptance"]

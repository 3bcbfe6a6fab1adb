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
"""

from __future__ import annotations

from specbench.analysis.verdicts.decision import dominated
from specbench.analysis.verdicts.status import BUDGET, DECIDED, EXHAUSTED, FUTILE, OPEN
from specbench.analysis.verdicts.verdict import UNSURE, YES, Decision

FUTILITY_LOOKS = 2
FUTILITY_FACTOR = 2.0


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


__all__ = ["BUDGET", "DECIDED", "EXHAUSTED", "FUTILE", "OPEN", "look_outcome"]

"""How an item measured in looks (an adaptive sweep's workload, a confirmed target) stands: the one place the
status words are spelled (`specbench.measure.run.looks` runs the looks; the rules set them).

* ``open`` — more looks to come;
* ``decided`` — settled: the sweep's direction and choice, the confirmation's held / missed and regret;
* ``prompts exhausted`` — the planned looks are spent and it is not settled;
* ``budget`` — the wall-time budget ended it first;
* ``futile`` — no number of prompts within reach would settle it (an adaptive sweep's stopping rule).
"""

OPEN, DECIDED, EXHAUSTED, BUDGET, FUTILE = "open", "decided", "prompts exhausted", "budget", "futile"
STATUSES = (OPEN, DECIDED, EXHAUSTED, BUDGET, FUTILE)


def no_look_words(status: str) -> str:
    """An item with no finished look: why, when the budget ended it inside its first look (which starts whatever
    the budget, having no time estimate; `specbench.measure.run.runner` stops it at a piece's end)."""
    if status == BUDGET:
        return "no look finished: the budget ran out inside the first look (its units so far are kept; the same command with a larger --budget resumes it)"
    return "no look finished yet"

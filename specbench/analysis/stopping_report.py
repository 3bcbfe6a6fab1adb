"""An adaptive sweep's stopping history in words: one line per workload (how it ended, on what evidence).

The history is ``adaptive.json`` (`specbench.records.adaptive_history`). `sweep`, `results show`,
`recommend` and the HTML report all word it with `summary_lines`, so they agree.
"""

from __future__ import annotations

from specbench.analysis.stopping_history import History, Look, WorkloadHistory
from specbench.analysis.verdict import Answer, Candidate

STATUS_WORDS = {
    "decided": "decided",
    "prompts exhausted": "cannot tell: its prompts ran out",
    "budget": "cannot tell within the budget",
    "futile": "cannot tell: no number of prompts within reach would settle it",
    "open": "still open",
}


def interval_text(best: Candidate | None, answer: Answer) -> str:
    """The best option's point and the adjusted interval ``answer`` rests on (``-`` without an option)."""
    return "-" if best is None else best.interval_text(answer)


def best_label(best: Candidate | None) -> str:
    return "-" if best is None else best.describe(schedule=False)


def needed_text(entry: WorkloadHistory, look: Look) -> str:
    """What would settle a workload still unsure: prompts and, from its pace so far, time."""
    needed = look.prompts_needed
    if not needed:
        return "no practical number of prompts would settle it (the speedup sits at 1)"
    more = max(int(needed) - int(look.prompts), 0)
    pace = entry.seconds / look.prompts if look.prompts else 0.0
    time = f", about {duration(more * pace)} more at this pace" if pace > 0 and more else ""
    return f"about {needed} prompts in all would settle it ({more} more{time})"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def workload_line(name: str, entry: WorkloadHistory) -> str:
    """One line: how a workload ended (or stands), at which look, on how many prompts."""
    last = entry.last
    if last is None:
        return f"{name}: no look finished yet"
    where = f"look {last.look} of {len(entry.planned)}, {last.prompts} prompts"
    best = f"best {best_label(last.best)} {interval_text(last.best, last.answer)}"
    if entry.status == "decided":
        return f"{name}: {last.answer} at {where} — {best}"
    if entry.status == "open":
        return f"{name}: {last.answer} after {where} — {best}"
    return f"{name}: {STATUS_WORDS.get(entry.status, entry.status)} ({where}) — {best}; {needed_text(entry, last)}"


def summary_lines(history: History) -> list[str]:
    return [workload_line(name, entry) for name, entry in history.workloads.items()]

"""An adaptive sweep's stopping history in words: one line per workload (how it ended, on what evidence).

The history is ``adaptive.json`` (`specbench.records.adaptive_history`). `sweep`, `results show`,
`recommend` and the HTML report all word it with `summary_lines`, so they agree.
"""

from __future__ import annotations

import math

from specbench.analysis.speedup_interval import speedup_words

STATUS_WORDS = {
    "decided": "decided",
    "prompts exhausted": "cannot tell: its prompts ran out",
    "budget": "cannot tell within the budget",
    "futile": "cannot tell: no number of prompts within reach would settle it",
    "open": "still open",
}


def interval_text(best: dict | None, answer: str) -> str:
    if not best or best.get("speedup") is None:
        return "-"
    point = best["speedup"]
    if answer == "confident no" and _finite(best.get("hi_adj")):
        return speedup_words(point, point**2 / best["hi_adj"], best["hi_adj"])
    if _finite(best.get("lo_adj")) and best["lo_adj"] > 0:
        return speedup_words(point, best["lo_adj"], point**2 / best["lo_adj"])
    return f"{point:.2f}×"


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def best_label(best: dict | None) -> str:
    if not best:
        return "-"
    tree = "" if best.get("tree") in (None, "chain") else f" tree {best['tree']}"
    return f"{best.get('drafter_label')}{tree} γ={best.get('gamma')}"


def needed_text(entry: dict, look: dict) -> str:
    """What would settle a workload still unsure: prompts and, from its pace so far, time — or, when its timing
    was taken beside other busy processes, a quieter machine (more prompts timed the same way would not)."""
    if any(s.get("timing_disturbed") for s in look.get("scenarios") or []):
        return (
            "the timing was disturbed (other processes kept the machine busy while units were timed): rerun on a "
            "quieter machine; more prompts timed the same way would not settle it"
        )
    needed = look.get("prompts_needed")
    if not needed:
        return "no practical number of prompts would settle it (the speedup sits at 1)"
    more = max(int(needed) - int(look["prompts"]), 0)
    seconds = float(entry.get("seconds") or 0.0)
    pace = seconds / look["prompts"] if look.get("prompts") else 0.0
    time = f", about {duration(more * pace)} more at this pace" if pace > 0 and more else ""
    return f"about {needed} prompts in all would settle it ({more} more{time})"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def workload_line(name: str, entry: dict) -> str:
    """One line: how a workload ended (or stands), at which look, on how many prompts."""
    looks = entry.get("looks") or []
    status = entry.get("status", "open")
    if not looks:
        return f"{name}: no look finished yet"
    last = looks[-1]
    where = f"look {last['look']} of {len(entry.get('planned', []))}, {last['prompts']} prompts"
    best = f"best {best_label(last.get('best'))} {interval_text(last.get('best'), last.get('answer', ''))}"
    if status == "decided":
        return f"{name}: {last['answer']} at {where} — {best}"
    if status == "open":
        return f"{name}: {last['answer']} after {where} — {best}"
    return f"{name}: {STATUS_WORDS.get(status, status)} ({where}) — {best}; {needed_text(entry, last)}"


def summary_lines(history: dict) -> list[str]:
    return [workload_line(name, entry) for name, entry in history.get("workloads", {}).items()]

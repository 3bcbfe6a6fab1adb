"""An adaptive sweep's stopping history in words: one line per workload (how it ended, on what evidence).

The history is ``adaptive.json`` (`specbench.records.adaptive_history`). `sweep`, `results show`,
`recommend` and the HTML report all word it with `summary_lines`, so they agree.
"""

from __future__ import annotations

import math

from specbench.analysis.verdicts.decision import describe_best
from specbench.analysis.verdicts.status import BUDGET, DECIDED, EXHAUSTED, FUTILE, OPEN, no_look_words
from specbench.analysis.verdicts.stopping_history import History, Look, WorkloadHistory
from specbench.analysis.verdicts.verdict import Answer, Candidate

STATUS_WORDS = {
    DECIDED: "decided",
    EXHAUSTED: "cannot tell: its prompts ran out",
    BUDGET: "cannot tell within the budget",
    FUTILE: "cannot tell: no number of prompts within reach would settle it",
    OPEN: "still open",
}


def interval_text(best: Candidate | None, answer: Answer | None) -> str:
    """The point and the adjusted interval a verdict rests on, '1.25× [1.08, 1.45]'; '1.25× (no interval)' without
    adjusted ends; '' when there is no finite speedup (callers then say what is missing: `best_phrase`)."""
    return "" if best is None else best.interval_text(Answer.of(answer))


def best_label(best: Candidate | None) -> str:
    """The best configuration's name, or what is missing: 'none compared yet'."""
    return describe_best(best) or "none compared yet"


def best_phrase(best: Candidate | None, answer: Answer | None) -> str:
    """'best ngram γ=2 at 1.25× [1.08, 1.45]' ('speculate with …' for a yes), or a phrase that says what is missing (no configuration compared
    yet; no speedup for it yet) — never a placeholder."""
    name = describe_best(best)
    if not name:
        return "no configuration compared yet"
    interval = interval_text(best, answer)
    word = "speculate with" if answer == Answer.YES else "best"  # a yes names its recommendation, not a race's leader
    return f"{word} {name} at {interval}" if interval else f"{word} {name} (no speedup measured for it yet)"


def _answer_words(answer: Answer | None, disturbed: bool) -> str:
    """A scenario's answer, as the main verdict words it: a confident answer on disturbed timing is none."""
    if answer is None:
        return "no verdict yet"
    if disturbed and answer.decided:
        return f"not decided (disturbed timing; on its numbers alone: {answer})"
    return str(answer)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _load_name(keys: dict) -> str:
    """'at 4 in flight', 'at 2 req/s', or '' for a scenario without a load level."""
    if keys.get("request_rate") not in (None, 0, 0.0) and _finite(keys.get("request_rate")):
        return f"at {keys['request_rate']:g} req/s"
    if keys.get("concurrency") is not None and _finite(keys.get("concurrency")):
        return f"at {int(keys['concurrency'])} in flight"
    return ""


def _scenario_parts(look: Look) -> list[str]:
    """One phrase per scenario of a look that has several (loads, backends): its load, answer and best — each
    interval beside the load it belongs to."""
    parts = []
    for i, scenario in enumerate(look.scenarios):
        keys, d = scenario.keys or {}, scenario.decision
        where = _load_name(keys) or (f"backend {keys['backend']}" if keys.get("backend") else f"scenario {i + 1}")
        parts.append(f"{where}: {_answer_words(d.answer, d.timing_disturbed)}, {best_phrase(d.best, d.answer)}")
    return parts


def _look_disturbed(look: Look) -> bool:
    return bool(look.scenarios) and look.scenarios[0].decision.timing_disturbed


def needed_text(entry: WorkloadHistory, look: Look) -> str:
    """What would settle a workload still unsure: prompts and, from its pace so far, time — or, when its timing
    was taken beside other busy processes, a quieter machine (more prompts timed the same way would not)."""
    if any(s.decision.timing_disturbed for s in look.scenarios):
        return (
            "the timing was disturbed (other processes kept the machine busy while units were timed): rerun on a "
            "quieter machine; more prompts timed the same way would not settle it"
        )
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
    """One line: how a workload ended (or stands), at which look, on how many prompts; a workload measured at
    several loads (or backends) names each one's answer and best beside it, so no interval is read against
    another load's answer."""
    last = entry.last
    if last is None:
        return f"{name}: {no_look_words(entry.status)}"
    status = entry.status
    where = f"look {last.look} of {len(entry.planned)}, {last.prompts} prompts"
    if len(last.scenarios) > 1:
        best = "; ".join(_scenario_parts(last))
        if status == "decided":
            return f"{name}: decided at every load at {where} — {best}"
        if status == "open":
            return f"{name}: still open after {where} — {best}"
        return f"{name}: {STATUS_WORDS.get(status, status)} at some load ({where}) — {best}; {needed_text(entry, last)}"
    answer = _answer_words(last.answer, _look_disturbed(last))
    best = best_phrase(last.best, last.answer)
    if last.scenarios and last.answer == Answer.YES:
        best += last.scenarios[0].decision.pays_words()
    if status == "decided":
        return f"{name}: {answer} at {where} — {best}"
    if status == "open":
        return f"{name}: {answer} after {where} — {best}"
    if answer.startswith("not decided"):  # a yes or no on disturbed timing: say so beside its interval
        best = f"{answer}, {best}"
    choice = _open_choice(last)
    if choice is not None:  # the direction is settled, the choice is not: say which part is open
        why = CHOICE_ENDS.get(status, status)
        return f"{name}: {answer}, but the choice is not settled ({why}; {where}) — {best}; {choice}; {needed_text(entry, last)}"
    return f"{name}: {STATUS_WORDS.get(status, status)} ({where}) — {best}; {needed_text(entry, last)}"


CHOICE_ENDS = {
    EXHAUSTED: "its prompts ran out",
    BUDGET: "the budget ran out",
    FUTILE: "no number of prompts within reach would settle it",
}


def _open_choice(look: Look) -> str | None:
    """The words of an open choice when a look's verdict is a confident yes whose choice is not settled."""
    if not look.scenarios:
        return None
    decision = look.scenarios[0].decision
    if decision.says_yes and decision.confident and decision.choice is not None and not decision.choice.settled:
        return decision.choice.text
    return None


def look_rows(history: History) -> list[dict]:
    """The stopping history as table rows (the text and the HTML tables both read these): one per look, or per
    scenario of a look that has several (each load's answer beside its own best and interval). Missing values
    are said in words ('none compared yet', 'no speedup yet'), never a placeholder."""
    rows = []
    for name, entry in history.workloads.items():
        for look in entry.looks:
            several = len(look.scenarios) > 1
            for scenario in look.scenarios if several else [None]:
                if scenario is not None:
                    d = scenario.decision
                    best, answer, disturbed = d.best, d.answer, d.timing_disturbed
                    where = _load_name(scenario.keys or {})
                else:
                    best, answer, disturbed, where = look.best, look.answer, _look_disturbed(look), ""
                rows.append(
                    {
                        "workload": f"{name} {where}".strip(),
                        "look": look.look,
                        "prompts": look.prompts,
                        "timed": look.calibration_prompts,
                        "said": _answer_words(answer, disturbed),  # the answer in the main verdict's words
                        "best": best_label(best),
                        "interval": interval_text(best, answer) or "no speedup yet",
                        "dropped": ", ".join(look.dropped) or "none",
                    }
                )
    return rows


def summary_lines(history: History) -> list[str]:
    return [workload_line(name, entry) for name, entry in history.workloads.items()]

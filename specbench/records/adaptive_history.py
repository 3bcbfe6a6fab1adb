"""``adaptive.json``: the stopping history of an adaptive sweep, beside its records.

Written by `specbench.measure.run.adaptive` after every look, read by `results show`, `recommend`,
`plot` and ``sweep --json``. Layout (docs/results-schema.md, "Adaptive sweeps")::

    {"plan": {batch, first, max_prompts, budget_s, calibration_batch},
     "elapsed_s": wall seconds spent so far (a resumed sweep keeps counting),
     "finished": true once no workload is open,
     "workloads": {NAME: {"planned": [prompts per look], "calibration": [...], "status": "open" |
                          "decided" | "prompts exhausted" | "budget" | "futile",
                          "dropped": [configurations dropped from timing],
                          "looks": [{look, prompts, calibration_prompts, answer, text, best, prompts_needed,
                                     seconds, scenarios: [...]}, ...]}}}

Its typed form is `specbench.analysis.verdicts.stopping_history.History` (the planned looks are what `recommend`
needs to judge the records the way the sweep did: `History.plans`).
"""

from __future__ import annotations

from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.safe_files import read_json, write_json

HISTORY_FILE = "adaptive.json"
MAX_BYTES = 16 * 2**20


def read_history(folder: str | Path) -> dict | None:
    """The folder's stopping history, None when it was not an adaptive sweep; a broken file is a one-line error."""
    path = Path(folder) / HISTORY_FILE
    if not path.exists():
        return None
    try:
        data = read_json(path, "stopping history", MAX_BYTES)
        if not isinstance(data, dict) or not isinstance(data.get("workloads", {}), dict):
            raise ValueError("not a mapping with 'workloads'")
        for name, entry in data.get("workloads", {}).items():
            planned = entry.get("planned") if isinstance(entry, dict) else None
            if not isinstance(planned, list) or not all(isinstance(n, int) and n > 0 for n in planned):
                raise ValueError(f"workload {name!r} has no list of planned prompts")
    except SpecbenchError as exc:
        raise SpecbenchError(f"broken {exc}") from None
    except ValueError as exc:
        raise SpecbenchError(f"broken stopping history {path}: {exc}") from None
    return data


def write_history(folder: str | Path, history: dict) -> None:
    write_json(Path(folder) / HISTORY_FILE, history)

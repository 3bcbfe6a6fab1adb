"""Sweep progress for a log file: plain lines, because a redrawn bar prints nothing until it ends.

Used when standard output is not a terminal (``nohup``, CI, ``| tee``, ``> log``): one line per
finished unit (at most one every `MIN_GAP_S`), and a heartbeat at least every `HEARTBEAT_S` while
a long unit or a serving batch runs. Each line says units done of the total, elapsed time, an
ETA from this run's pace, what is being measured, and — in an adaptive sweep — each workload's
current verdict. Lines are plain text: nothing from the data is read as markup.
"""

from __future__ import annotations

import sys
import threading
import time


MIN_GAP_S = 2.0
HEARTBEAT_S = 30.0


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


class LineProgress:
    """A `specbench.measure.runner.SweepObserver` that writes plain lines to ``stream``."""

    def __init__(self, stream=None, heartbeat_s: float = HEARTBEAT_S, min_gap_s: float = MIN_GAP_S):
        self.stream = stream or sys.stdout
        self.heartbeat_s, self.min_gap_s = heartbeat_s, min_gap_s
        self.total = self.done = self.done_at_start = 0
        self.started = time.monotonic()
        self.last_line = 0.0
        self.current = ""
        self.phase = "starting"
        self.verdicts: list[str] = []
        self.look: dict | None = None  # an adaptive sweep's current look: units, done, start, budget left
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="specbench-progress-lines", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=2)
        return False

    # ------------------------------------------------------------------ observer
    def status(self, message: str) -> None:
        with self._lock:
            changed = message != self.phase
            self.phase = message
        if changed:
            self._write(f"{message}")

    def begin(self, total: int, done: int) -> None:
        with self._lock:
            self.total, self.done, self.done_at_start = total, done, done
            self.started = time.monotonic()
        self._write(f"{total} units in the grid" + (f", {done} already measured (resuming)" if done else ""))

    def look_started(self, units: int, budget_left_s: float | None) -> None:
        """An adaptive look begins: progress and ETA count this look's units, capped by the budget."""
        with self._lock:
            self.look = {"units": units, "done": 0, "started": time.monotonic(), "budget_left_s": budget_left_s}

    def unit_started(self, unit) -> None:
        with self._lock:
            self.current = f"{unit.config.label} · {unit.workload.name} {unit.prompt.prompt_id} t{unit.turn}"

    def round_done(self, unit, result) -> None:
        if time.monotonic() - self.last_line >= self.heartbeat_s:
            self._write(self._line())

    def unit_done(self, unit, record) -> None:
        with self._lock:
            self.done += 1
            if self.look is not None:
                self.look["done"] += 1
        if time.monotonic() - self.last_line >= self.min_gap_s or self.done >= self.total:
            self._write(self._line())

    def looks_done(self, lines: list[str]) -> None:
        with self._lock:
            self.verdicts = list(lines)
        for line in self.verdicts:
            self._write(f"verdict · {line}")

    # ------------------------------------------------------------------ lines
    def _line(self) -> str:
        with self._lock:
            if self.look is not None:
                return self._look_line()
            elapsed = time.monotonic() - self.started
            measured = self.done - self.done_at_start
            left = max(self.total - self.done, 0)
            eta = _clock(elapsed / measured * left) if measured and left else ("-" if left else "0m00s")
            text = f"{self.done}/{self.total} units · elapsed {_clock(elapsed)} · eta {eta} (at most) · {self.phase}"
            if self.current:
                text += f" · now {self.current}"
            return text

    def _look_line(self) -> str:
        """``look 5/40 units · elapsed … · look eta … · budget left …`` (caller holds the lock)."""
        look, now = self.look, time.monotonic()
        in_look = now - look["started"]
        left = max(look["units"] - look["done"], 0)
        eta = _clock(in_look / look["done"] * left) if look["done"] and left else ("-" if left else "0m00s")
        text = (
            f"look {look['done']}/{look['units']} units ({self.done} of the grid's {self.total}) · "
            f"elapsed {_clock(now - self.started)} · look eta {eta}"
        )
        if look["budget_left_s"] is not None:
            text += f" · budget left {_clock(look['budget_left_s'] - in_look)}"
        text += f" · {self.phase}"
        if self.current:
            text += f" · now {self.current}"
        return text

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            if time.monotonic() - self.last_line >= self.heartbeat_s:
                self._write(self._line() + " · still working")

    def _write(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        try:
            self.stream.write(f"[{stamp}] {' '.join(text.split())}\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not stop the sweep
            pass
        self.last_line = time.monotonic()

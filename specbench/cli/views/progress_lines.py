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

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from specbench.cli.views.render import console, plain, text_column
from specbench.text_sinks import for_terminal

MIN_GAP_S = 2.0
HEARTBEAT_S = 30.0


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"


class _StampedLines:
    """What both progress kinds write when piped: one stamped, sanitised line at a time (``_write``), and a
    heartbeat line (``_beat``, run in a daemon thread) when nothing was written for ``heartbeat_s``. The class
    using it sets ``stream``, ``heartbeat_s``, ``last_line`` and ``_stop`` and says its current line (``_line``)."""

    stream: object
    heartbeat_s: float
    last_line: float
    _stop: threading.Event

    def _line(self) -> str:
        raise NotImplementedError

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            if time.monotonic() - self.last_line >= self.heartbeat_s:
                self._write(self._line() + " · still working")

    def _write(self, text: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        try:
            self.stream.write(f"[{stamp}] {for_terminal(' '.join(text.split()))}\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not stop the work
            pass
        self.last_line = time.monotonic()


class LineProgress(_StampedLines):
    """A `specbench.measure.run.runner.SweepObserver` that writes plain lines to ``stream``."""

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


class Steps(_StampedLines):
    """Progress of any long command or script, in one place: a bar on a terminal, plain lines otherwise.

    ``with Steps("profile", total=N) as steps: steps.update(done, description)`` — on a terminal a Rich bar
    (transient, on ``stream``); piped or redirected, a line per step (at most one every ``min_gap_s``) and a
    heartbeat every ``heartbeat_s`` while one step runs long, each with the steps done of the total, elapsed
    time, an ETA from this run's pace and what runs now. ``total`` may be unknown (None) or change."""

    def __init__(
        self,
        title: str,
        total: int | None = None,
        stream=None,
        *,
        heartbeat_s: float = HEARTBEAT_S,
        min_gap_s: float = MIN_GAP_S,
        bar: bool | None = None,
    ):
        self.title, self.total, self.stream = title, total, stream or sys.stderr
        self.heartbeat_s, self.min_gap_s = heartbeat_s, min_gap_s
        self.done, self.current = 0, "starting"
        self.started = self.last_line = time.monotonic()
        try:
            tty = self.stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        self.bar = tty if bar is None else bar
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress = self._task = None

    def __enter__(self):
        if self.bar:
            self._progress = Progress(
                text_column(f"{self.title}", "bold"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                text_column("{task.description}"),
                console=console(stderr=self.stream is sys.stderr, wide=False),
                transient=True,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(plain(self.current), total=self.total)
        else:
            self._thread = threading.Thread(target=self._beat, name="specbench-steps", daemon=True)
            self._thread.start()
            self._write(self._line())
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        else:
            self._stop.set()
            if self._thread is not None:
                self._thread.join(timeout=2)
            if exc[0] is None:
                self._write(self._line(final=True))
        return False

    def update(self, done: int | None = None, description: str | None = None, total: int | None = None) -> None:
        """Steps done so far (None: one more), what runs now, and the total when it changed."""
        with self._lock:
            self.done = self.done + 1 if done is None else done
            self.current = description if description is not None else self.current
            self.total = total if total is not None else self.total
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, total=self.total, description=plain(self.current))
        elif time.monotonic() - self.last_line >= self.min_gap_s or (self.total and self.done >= self.total):
            self._write(self._line())

    def say(self, description: str) -> None:
        """What runs now, without a step done (a phase: loading, probing)."""
        self.update(self.done, description)

    def _line(self, final: bool = False) -> str:
        with self._lock:
            elapsed = time.monotonic() - self.started
            count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
            left = (self.total - self.done) if self.total else None
            eta = _clock(elapsed / self.done * left) if self.done and left else "-"
            what = "done" if final else self.current
            return (
                f"{self.title}: {count} · elapsed {_clock(elapsed)}" + ("" if final else f" · eta {eta}") + f" · {what}"
            )

"""The executor seam: the runner hands pieces of work to an executor, and one writer keeps the records.

`SweepRunner` cuts what is left of a sweep into pieces (`specbench.measure.executors.pieces`) and gives them to
its executor:

* ``inprocess`` (the default) runs them in this process on the sweep's own backend, one after
  another, in the order a serial sweep always had: the same records, each written as its unit
  finishes;
* ``ray`` (`specbench.measure.executors.ray_executor`) runs them on Ray workers, as many at once as there are
  workers, on one machine or a cluster.

Both go through `dispatch`: a piece is handed out once it is ready (its turn-2 prompts' baseline
answers are known), its outcome goes to the `RecordWriter`, and a piece whose worker died is
handed out again up to ``retries`` times, then reported as a `Failure` with its reason while the
other pieces go on. The writer is the driver — the process holding the results folder's lock —
and nothing else: workers return records as plain data and never touch the folder, so the
README's promises (whole records, resume, no duplicates, exit codes) hold for every executor.

A record says where it ran: ``node``, ``node_device`` and ``node_groups`` (how many pieces shared its
node while it ran) are null in-process. On a CPU machine, a live unit that shared its node with
another piece was timed beside another engine: it is flagged (``timing_ok`` false, ``timing_flag``
says why) and left out of timing fits, as the timing protocol does with any interference.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from specbench.errors import SpecbenchError
from specbench.measure.executors.pieces import Piece, answer_key
from specbench.measure.executors.worker import PieceWorker, live_drafters
from specbench.measure.grid.sweep import RunConfig
from specbench.measure.grid.units import Unit, UnitOutput
from specbench.measure.replay.units import MomentsStore
from specbench.measure.serving.groups import write_backend_file

DIED, INPUT, BUG = "died", "input", "bug"  # why a piece failed: its worker or node died; bad input; a bug


@dataclass
class Outcome:
    """A finished piece: its outputs (produced lazily by an in-process worker), or why it failed."""

    piece: Piece
    outputs: Iterable[UnitOutput] = ()
    placement: dict | None = None  # node, node_device, node_groups, cpu (a remote worker's); None in-process
    described: Callable[[], dict | None] = lambda: None  # what a serving engine ran, read after the outputs
    error: str | None = None
    kind: str = ""  # DIED, INPUT or BUG when error is set


@dataclass
class Failure:
    piece: Piece
    reason: str
    kind: str
    attempts: int = 1


class Pool(Protocol):
    """Workers that run pieces: `dispatch` hands a piece to a free one and waits for outcomes."""

    def free(self) -> bool: ...  # a worker could take a piece now
    def busy(self) -> bool: ...  # pieces are in flight
    def choose(self, ready: list[Piece]) -> Piece: ...  # which ready piece the next free worker takes
    def submit(self, piece: Piece) -> None: ...
    def wait(self) -> list[Outcome]: ...  # at least one finished piece (blocks)


class Executor(Protocol):
    """What the runner needs of an executor: `InProcessExecutor` here, `RayExecutor` (``ray_executor``)."""

    name: str
    reports: list[dict]  # each worker's report from `prepare` (hashes, dtype, device)

    def prepare(self, todo: list[Unit]) -> dict: ...  # start the workers, check the units; the first report
    def warm(self) -> Callable[[RunConfig], bool] | None: ...  # ``is_warm(config)`` of a kept engine, or None
    def run(self, pieces: list[Piece], writer: RecordWriter) -> list[Failure]: ...
    def info(self) -> dict | None: ...  # run.json's ``executor`` (None in-process)
    def close(self) -> None: ...


class RecordWriter:
    """The one writer of a results folder: records, moments and backend.json, from every worker's outcomes."""

    def __init__(self, store, observer, answers: dict, deadline: float | None = None):
        self.store, self.observer, self.answers = store, observer, answers
        self.moments = MomentsStore(store.folder)
        self.written = 0
        self.deadline = deadline  # time.monotonic() past which no new piece starts (a look's budget), or None
        self.cut_short = False  # pieces were left unstarted because the deadline passed

    def ready(self, piece: Piece) -> bool:
        return all(key in self.answers for key in piece.needs)

    def accepting(self) -> bool:
        """Whether a new piece may start: always, unless the deadline has passed (the pieces in flight finish)."""
        return self.deadline is None or time.monotonic() < self.deadline

    def take(self, outcome: Outcome) -> None:
        for output in outcome.outputs:
            self.write(output, outcome.placement)
        write_backend_file(self.store.folder, outcome.described())

    def write(self, output: UnitOutput, placement: dict | None) -> None:
        unit, record = output.unit, dict(output.record)
        record.update(placement_columns(placement, record))
        if output.moments is not None:  # a replayed record never lacks its moments
            self.moments.write(output.moments)
        self.store.write_unit(record)
        if unit.mode == "live" and unit.turn == 1 and unit.config.is_baseline:
            self.answers[answer_key(unit)] = [list(record["output_ids"])]
        self.written += 1
        self.observer.unit_done(unit, record)


def placement_columns(placement: dict | None, record: dict) -> dict:
    """The record's ``node``, ``node_device``, ``node_groups`` and, for a live unit timed beside another
    piece on one CPU machine, the timing flag."""
    if placement is None:
        return {"node": None, "node_device": None, "node_groups": None}
    columns = {
        "node": placement["node"],
        "node_device": placement["node_device"],
        "node_groups": int(placement["node_groups"]),
    }
    if placement.get("cpu") and columns["node_groups"] > 1 and record.get("mode") == "live":
        note = f"shared node: {columns['node_groups']} pieces ran on this CPU machine at once"
        flag = record.get("timing_flag") or ""
        columns.update(timing_ok=False, timing_flag=f"{flag}; {note}" if flag else note)
    return columns


def dispatch(
    pieces: list[Piece], pool: Pool, writer: RecordWriter, *, run: int = 0, retries: int = 0, on_retry=None
) -> list[Failure]:
    """Run ``pieces`` on ``pool``'s workers, each outcome through ``writer``; returns the pieces that failed.

    A piece is handed out when it is ready (``writer.ready``: the answers its turn-2 prompts continue are
    known), in list order unless the pool prefers another (a worker whose engine already runs that
    configuration); it goes out with those answers and ``run`` (the executor call: a worker warms up once
    per call). A piece whose worker died goes back to the front of the queue, at most ``retries``
    times; a piece that failed for another reason is not retried. Pieces left waiting on an answer that
    never came (their baseline's piece failed) fail with that reason. Once the writer's deadline has passed
    (``writer.accepting``) no piece starts: those in flight finish and are written, the rest are left
    unstarted — not failed — and ``writer.cut_short`` says so.
    """
    waiting = list(pieces)
    attempts: dict[int, int] = {}  # id(piece) -> attempts so far
    handed: dict[int, Piece] = {}  # id(the piece as handed out, with its inputs) -> the piece
    failures: list[Failure] = []
    while True:
        if waiting and not writer.accepting():
            writer.cut_short = True
            waiting.clear()
        while waiting and pool.free():
            ready = [p for p in waiting if writer.ready(p)]
            if not ready:
                break
            piece = pool.choose(ready)
            waiting.remove(piece)
            attempts[id(piece)] = attempts.get(id(piece), 0) + 1
            out = piece.with_inputs(writer.answers, run)
            handed[id(out)] = piece
            pool.submit(out)
        if not pool.busy():
            break
        for outcome in pool.wait():
            piece = handed.pop(id(outcome.piece))
            tries = attempts[id(piece)]
            if outcome.error is None:
                writer.take(outcome)
            elif outcome.kind == DIED and tries <= retries:
                waiting.insert(0, piece)
                if on_retry is not None:
                    on_retry(outcome, tries)
            else:
                failures.append(Failure(piece, outcome.error, outcome.kind, tries))
    failures += [
        Failure(
            p,
            "no worker was left to run it (every worker died)"
            if writer.ready(p)
            else "its turn-2 prompts continue a baseline answer whose piece failed",
            DIED if writer.ready(p) else INPUT,
            attempts.get(id(p), 0),
        )
        for p in waiting
    ]
    return failures


def failure_message(failures: list[Failure], total: int, out_dir, waiting: int = 0) -> str:
    """One line for a sweep whose pieces partly failed: how many, the first reasons, how to resume."""
    reasons = "; ".join(
        f"{f.piece.label}: {one_line(f.reason)[:300]}" + (f" (after {f.attempts} attempts)" if f.attempts > 1 else "")
        for f in failures[:3]
    )
    more = f"; and {len(failures) - 3} more" if len(failures) > 3 else ""
    replays = f"; {waiting} replayed unit(s) wait for them" if waiting else ""
    return (
        f"{len(failures)} of {total} pieces of work failed, their units were not measured ({reasons}{more})"
        f"{replays}; the other units are saved in {out_dir}: run the same command to measure the rest"
    )


def one_line(text: str) -> str:
    return " ".join(str(text).split())


class WorkerBug(Exception):
    """A piece that failed on an internal error in its worker; carries the worker's traceback."""


def raise_failures(failures: list[Failure], total: int, out_dir, waiting: int = 0) -> None:
    """End a sweep with failed pieces: exit 2 (one line, resumable), or exit 1 when a worker hit a bug (the
    worker's traceback then goes to the crash log)."""
    if not failures:
        return
    message = failure_message(failures, total, out_dir, waiting)
    bugs = [f for f in failures if f.kind == BUG]
    if bugs:
        raise WorkerBug(f"{message}\n\nworker traceback:\n{bugs[0].reason}")
    raise SpecbenchError(message)


# ----------------------------------------------------------------------------- in-process


class SerialPool:
    """One worker in this process: a piece runs when its outcome is read, records streaming out as each unit
    finishes (a serial sweep's behaviour); errors are raised as they happen."""

    def __init__(self, worker: PieceWorker):
        self.worker = worker
        self.queued: list[Piece] = []

    def free(self) -> bool:
        return not self.queued

    def busy(self) -> bool:
        return bool(self.queued)

    def choose(self, ready: list[Piece]) -> Piece:
        return ready[0]

    def submit(self, piece: Piece) -> None:
        self.queued.append(piece)

    def wait(self) -> list[Outcome]:
        piece = self.queued.pop(0)
        return [Outcome(piece, self.worker.run(piece), described=self.worker.describe)]


@dataclass
class InProcessExecutor:
    """Every piece in this process, serially, on the runner's backend."""

    worker: PieceWorker
    runs: int = 0
    reports: list[dict] = field(default_factory=list)
    name = "inprocess"

    def prepare(self, todo: list[Unit]) -> dict:
        self.worker.start(live_drafters(todo))
        report = self.worker.check(todo)
        self.reports = [report]
        return report

    def warm(self) -> Callable[[RunConfig], bool] | None:
        """``is_warm(config)`` of the backend (a serving engine kept running), or None."""
        return getattr(self.worker.backend, "is_warm", None)

    def run(self, pieces: list[Piece], writer: RecordWriter) -> list[Failure]:
        self.runs += 1
        return dispatch(pieces, SerialPool(self.worker), writer, run=self.runs)

    def info(self) -> dict | None:
        return None

    def close(self) -> None:
        self.worker.close()

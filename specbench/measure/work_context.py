"""What a piece of work needs from the worker that runs it, as one typed, frozen value.

A worker (`specbench.measure.executors.worker.PieceWorker`) holds one backend and turns pieces of work into
records. The serving groups (`specbench.measure.serving.groups`) and the replayed prompt turns
(`specbench.measure.replay.units`) used to receive the worker itself and reach back into it (``worker.backend``,
``worker.replayer``, ``worker.prompt_ids``, ``worker.observer``): an untyped context object. They now receive a
`WorkContext` — the spec, the backend, the observer, the device's name, how a unit's prompt is built and the replay
engine — and nothing else of the worker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from specbench.measure.grid.sweep_spec import SweepSpec
from specbench.measure.grid.units import Unit


class UnitObserver(Protocol):
    """Who hears about units as they run (the sweep's progress display)."""

    def status(self, text: str) -> None: ...

    def unit_started(self, unit: Unit) -> None: ...


@dataclass(frozen=True)
class WorkContext:
    """A worker's context for the pieces it runs."""

    spec: SweepSpec
    backend: Any  # a `specbench.backends.base.Backend` (measure names backends only through the seam's protocol)
    observer: UnitObserver
    device_name: str
    prompt_ids: Callable[[Unit, dict], list[int]]  # a unit's prompt token ids, given the baseline's earlier answers
    replayer: Callable[[], Any]  # the replay engine over the backend's target, built on first use and kept


__all__ = ["UnitObserver", "WorkContext"]

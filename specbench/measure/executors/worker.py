"""A worker: one backend that runs a sweep's pieces and returns their records, never writing them.

The in-process executor runs one `PieceWorker` over the sweep's own backend; the Ray executor runs one
inside each Ray actor (`specbench.measure.executors.ray_executor`). Either way the worker only computes: it
builds prompts (turn 2 from the answers the piece carries), times blocks by the timing protocol,
sends a serving group to its engine, replays a prompt turn, and yields one `UnitOutput` per unit.
The results folder is the driver's alone (`specbench.measure.executors.executor.RecordWriter`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from dataclasses import replace

from specbench.backends.registry import make_backend
from specbench.errors import SpecbenchError
from specbench.measure.executors.pieces import BLOCK, GROUP, REPLAY, Piece, answer_key
from specbench.measure.grid.sweep_spec import RunConfig, SweepSpec
from specbench.measure.grid.units import Unit, UnitOutput, make_record
from specbench.measure.grid.validate import check_unit_lengths, prompt_room
from specbench.measure.replay.replayer import Replayer
from specbench.measure.replay.units import replay_outputs
from specbench.measure.serving.groups import group_outputs
from specbench.measure.timing.energy import meter
from specbench.measure.timing.machine_state import MachineProbe, MachineState
from specbench.measure.timing.timing_protocol import combine, run_block, warm_up
from specbench.measure.work_context import WorkContext
from specbench.models.limits import check_window
from specbench.workloads.catalog import encode_turn


def settle_garbage() -> None:
    """Collect the garbage now and move every object alive (models, tokenizers, libraries: about half a million
    on a SmolLM2 sweep) out of the cyclic collector's reach (``gc.freeze``), so that a collection during a
    timed unit scans only what was made since: a full collection of that heap cost 0.26 s of CPU here, paid
    by whichever unit it fell in. Objects frozen by an earlier call are given back to it first."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class SilentObserver:
    """An observer that hears nothing (a remote worker's: the driver reports progress)."""

    def status(self, message):
        pass

    def begin(self, total, done):
        pass

    def unit_started(self, unit):
        pass

    def round_done(self, unit, result):
        pass

    def unit_done(self, unit, record):
        pass

    def looks_done(self, lines):
        pass

    def look_started(self, units, budget_left_s):
        pass


def sweep_backend(spec):
    """The backend a worker measures ``spec`` with (one per process: the driver's in-process worker, each Ray actor)."""
    return make_backend(
        spec.backend,
        spec.run_options,
        target=spec.target,
        device=spec.device,
        dtype=spec.dtype,
        seed=spec.seed,
        max_concurrency=max(spec.concurrency),
    )


def live_drafters(todo: list[Unit]) -> list:
    """The drafters the live units of ``todo`` run (built, and their weights hashed, when a worker starts)."""
    return list(dict.fromkeys(u.config.drafter for u in todo if u.mode == "live" and u.config.drafter))


class PieceWorker:
    """Runs pieces on ``backend`` (started by `start`); ``observer`` hears rounds and units as they run."""

    def __init__(self, spec: SweepSpec, backend, observer) -> None:
        self.spec, self.backend, self.observer = spec, backend, observer
        self._replayer: Replayer | None = None  # the replay engine over the target (built on the first replay piece)
        self._warm_run: int | None = None  # the executor call this worker last warmed up in

    @property
    def device_name(self) -> str:
        return self.backend.device_name

    @property
    def context(self) -> WorkContext:
        """What the pieces it runs need of it (`specbench.measure.work_context`): they never see the worker."""
        return WorkContext(self.spec, self.backend, self.observer, self.device_name, self.prompt_ids, self.replayer)

    def replayer(self):
        """The replay engine over the backend's target, built on first use and kept."""
        if self._replayer is None:
            self._replayer = Replayer(self.backend.target, decoder=self.backend.decoder)
        return self._replayer

    def start(self, drafters: list) -> None:
        """Load the models and build ``drafters`` (bad drafter settings fail here); the weights' hashes go into
        the worker's spec, and so into every record it makes."""
        self.backend.start(self.observer.status)
        self.spec.dtype_used = getattr(self.backend, "dtype_used", None)  # dtype auto: the one chosen on this machine
        self.spec.model_hashes = self.backend.model_hashes(drafters)
        self.spec.weights_sha256 = self.spec.model_hashes.get(self.spec.target)

    def check(self, todo: list[Unit]) -> dict:
        """Check what can fail on bad input before anything is measured (γ the drafters can run, prompt lengths); returns the models'
        hashes, the dtype the target runs in, the device's name, the backend's thread and CPU layout reports and the
        energy counters (found here, their idle power measured before any unit runs: `specbench.measure.timing.energy`)."""
        if hasattr(self.backend, "check_configs"):  # e.g. γ deeper than a Medusa checkpoint's heads
            self.backend.check_configs([u.config for u in todo if u.mode == "live"])
        check_unit_lengths(self.backend, self.spec.target, todo)
        threads, layout, engine = (
            getattr(self.backend, name, None) for name in ("thread_report", "layout_report", "engine_report")
        )
        return {
            "model_hashes": dict(self.spec.model_hashes),
            "dtype_used": self.spec.dtype_used,
            "device_name": self.device_name,
            "threads": threads() if threads is not None else None,
            "cpu_layout": layout() if layout is not None else None,
            "energy": meter().describe() if any(u.mode == "live" for u in todo) else None,
            "engine": engine() if engine is not None else None,
        }

    def describe(self) -> dict | None:
        """What a serving engine ran (``backend.json``), or None."""
        described = getattr(self.backend, "describe", None)
        if described is None:
            return None
        new = described()
        scope = getattr(self.backend, "timing_scope", None)
        if scope is not None:
            new["machine_state"] = scope().observed  # what the records' machine-state columns cover
        return new

    def close(self) -> None:
        self.backend.close()

    # ------------------------------------------------------------------ prompts
    def prompt_ids(self, unit: Unit, answers: dict) -> list[int]:
        """The unit's prompt: turn ``t`` continues the baseline's answers to turns < t (``answers``: token ids)."""
        tokenizer = self.backend.tokenizer
        earlier = answers.get(answer_key(unit), [])[: unit.turn - 1]
        if len(earlier) < unit.turn - 1:
            raise SpecbenchError(f"{unit.prompt.prompt_id}: turn {unit.turn} needs the baseline's earlier answers")
        texts = [tokenizer.decode(list(ids), skip_special_tokens=True) for ids in earlier]
        return encode_turn(
            tokenizer,
            unit.workload,
            unit.prompt,
            unit.turn - 1,
            texts,
            token_limit=prompt_room(self.backend.context_window, unit.max_new_tokens),
        )

    # ------------------------------------------------------------------ running
    def run(self, piece: Piece) -> Iterator[UnitOutput]:
        """The piece's units, each as it finishes (a block's after its last attempt)."""
        if piece.kind == BLOCK:
            yield from self._block(piece)
        elif piece.kind == GROUP:
            yield from group_outputs(self.context, piece)
        elif piece.kind == REPLAY:
            yield from replay_outputs(self.context, piece)
        else:
            raise ValueError(f"unknown piece kind {piece.kind!r}")

    def _block(self, piece: Piece) -> Iterator[UnitOutput]:
        """A prompt turn's live units by the timing protocol, after a warm-up once per executor call."""
        if self._warm_run != piece.run:
            self._warm_up(piece)
            self._warm_run = piece.run
        for unit in (u for u in piece.units if u.unit_id in piece.catch_up):
            self._run_again(unit, piece.answers)
        timed = [u for u in piece.units if u.unit_id not in piece.catch_up]
        measure = lambda unit: self._measure(unit, piece.answers)  # noqa: E731
        for unit, attempts in run_block(timed, measure, self.spec.timing, self.backend.threads):
            yield UnitOutput(unit, combine(attempts))

    def _run_again(self, unit: Unit, answers: dict) -> None:
        """A finished online unit, generated again untimed and unrecorded: its drafter learns from it again."""
        self.observer.status(f"online: catching up {unit.config.label} on {unit.prompt.prompt_id} turn {unit.turn}")
        self.backend.generate(
            unit.config,
            self.prompt_ids(unit, answers),
            unit.max_new_tokens,
            seed=unit.seed,
            stop_at_eos=not self.spec.ignore_eos,
        )
        self.observer.status("sweep")

    def _warm_up(self, piece: Piece) -> None:
        """Untimed work before the first timed unit (rule 1 of the timing protocol): every configuration of the
        block built and run through every shape its timed units will meet (a backend that can: its
        ``warm_shapes``), then the target decoding for ``warmup_s`` seconds."""
        seconds = self.spec.timing.warmup_s
        if seconds <= 0:
            return
        unit = piece.units[0]
        ids = self.prompt_ids(unit if unit.turn == 1 else replace(unit, turn=1), piece.answers)
        shapes = getattr(self.backend, "warm_shapes", None)
        if shapes is not None:
            self.observer.status("warming up every configuration's shapes")
            longest = max(len(self.prompt_ids(u, piece.answers)) + u.max_new_tokens for u in piece.units)
            shapes([u.config for u in piece.units], ids, longest)
        self.observer.status(f"warming up ({seconds:g} s)")
        c = unit.config
        baseline = RunConfig(None, 0, "chain", c.temperature, c.top_p, c.top_k)
        warm_up(lambda: self.backend.generate(baseline, ids, 16, seed=0, stop_at_eos=False), seconds)
        settle_garbage()
        self.observer.status("sweep")

    def _measure(self, unit: Unit, answers: dict) -> tuple[dict, MachineState]:
        """Run one live unit once: its record and the machine's state while it ran."""
        self.observer.unit_started(unit)
        ids = self.prompt_ids(unit, answers)
        check_window(
            self.backend.context_window,
            self.spec.target,
            len(ids),
            unit.max_new_tokens,
            f"{unit.workload.name} {unit.prompt.prompt_id} turn {unit.turn}",
        )
        probe = MachineProbe()
        result = self.backend.generate(
            unit.config,
            ids,
            unit.max_new_tokens,
            seed=unit.seed,
            stop_at_eos=not self.spec.ignore_eos,
            on_round=lambda r, u=unit: self.observer.round_done(u, r),
        )
        state = probe.stop()
        return make_record(unit, result, self.spec, self.device_name), state

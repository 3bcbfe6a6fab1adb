"""Running a sweep: every unit of the grid through a backend, each record saved at once.

A unit is one configuration on one prompt turn and repeat, measured live or replayed (its
``mode``). Live units run prompt by prompt, the baseline first, so that every configuration of
a prompt is measured close together in time and MT-Bench's turn 2 can be asked after the
target's own turn-1 answer (the baseline's: the same context for every configuration).
Replayed units (``mode: replay`` or ``both``, see `specbench.measure.replay_units`) run after every
live unit: they need the baselines' trajectories and the cost model fitted on the live units.
Finished units are skipped on a re-run, so a killed sweep resumes where it stopped, losing at
most the unit in flight (or the prompt turn in flight: a turn's units are timed as one block).

Timing follows `specbench.measure.timing_protocol`: a warm-up, then each prompt turn's live units
as one block — baseline and configurations back to back, the baseline timed again after them
(``timing.order``) — with the machine's state recorded per attempt and disturbed units re-timed
or flagged.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Protocol

from specbench.backends.base import Backend
from specbench.engine.device import device_info
from specbench.measure.environment import git_commit, now_utc, package_versions
from specbench.backends.registry import make_backend
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.errors import SpecbenchError
from specbench.measure.adaptive import AdaptiveSweep, pool_units
from specbench.measure.groups import run_groups, uses_groups
from specbench.measure.machine_state import MachineProbe
from specbench.measure.online_resume import catch_up_units
from specbench.measure.online_spec import check_shard
from specbench.measure.replay_units import run_replay_units, write_summary
from specbench.measure.spec import RunConfig, SweepSpec
from specbench.measure.timing_protocol import combine, run_block, warm_up
from specbench.measure.units import Unit, expand_units, in_shard, load_workloads, make_record
from specbench.measure.validate import check_device, check_grid_size, check_unit_lengths, prompt_room
from specbench.measure.workloads import encode_turn
from specbench.models.limits import check_window
from specbench.records.lock import FolderLock, check_writable_folder, lock_holder
from specbench.records.store import SCHEMA_VERSION, ResultsStore, load_records


def live_blocks(units: list[Unit]) -> list[list[Unit]]:
    """Consecutive live units of one prompt turn (baseline first): the timing protocol's blocks."""
    blocks: list[list[Unit]] = []
    for unit in units:
        key = unit.group + (unit.turn,)
        if blocks and blocks[-1][0].group + (blocks[-1][0].turn,) == key:
            blocks[-1].append(unit)
        else:
            blocks.append([unit])
    return blocks


class SweepObserver(Protocol):
    """What the runner reports while it works (the CLI draws progress bars from it)."""

    def status(self, message: str) -> None: ...
    def begin(self, total: int, done: int) -> None: ...
    def unit_started(self, unit: Unit) -> None: ...
    def round_done(self, unit: Unit, result) -> None: ...
    def unit_done(self, unit: Unit, record: dict) -> None: ...
    def looks_done(self, history: dict) -> None: ...  # adaptive sweeps: after every round of looks
    def look_started(self, units: int, budget_left_s: float | None) -> None: ...  # adaptive: a round begins


class SilentObserver:
    def status(self, message): pass
    def begin(self, total, done): pass
    def unit_started(self, unit): pass
    def round_done(self, unit, result): pass
    def unit_done(self, unit, record): pass
    def looks_done(self, history): pass
    def look_started(self, units, budget_left_s): pass


def check_folder(store: ResultsStore, spec: SweepSpec, force: bool) -> dict | None:
    """Refuse a folder holding records of a different sweep unless forced; returns its run.json.

    A run.json without records (a sweep that failed before its first unit) protects nothing.
    """
    info = store.run_info()
    if info is not None and info.get("kind") not in (None, "sweep"):
        raise SpecbenchError(f"{store.folder} holds a {info.get('kind')}, not sweep results; use another --out")
    if info is not None and not isinstance(info.get("spec_hash"), str) and not force:
        raise SpecbenchError(f"{store.folder}/run.json has no spec hash (not written by a sweep); use another --out "
                             "or --force")
    if info is not None and info.get("spec_hash") != spec.spec_hash and not force and store.has_records():
        raise SpecbenchError(f"{store.folder} holds results of a different sweep spec "
                             f"(spec {info.get('spec_hash')} vs {spec.spec_hash}); use another --out or --force")
    return info


def run_info(spec: SweepSpec, previous: dict | None, shard: tuple[int, int], threads: dict | None = None,
             cpu_layout: dict | None = None) -> dict:
    """run.json's contents; ``threads``: the backend's CPU thread report (`OwnEngineBackend.thread_report`);
    ``cpu_layout``: its CPU dtype and weight layout choice (`OwnEngineBackend.layout_report`)."""
    info = {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "sweep": spec.to_dict(),
        "spec_hash": spec.spec_hash,
        "versions": package_versions(),
        "git_commit": git_commit(),
        **device_info(spec.device),
        "dtype": spec.dtype_used or spec.dtype,
        "created": (previous or {}).get("created", now_utc()),
        "updated": now_utc(),
        "shards": sorted({*map(tuple, (previous or {}).get("shards", [])), shard}),
        "models": dict(spec.model_hashes),
    }
    if threads is not None:
        info["threads"] = threads
    if cpu_layout is not None:
        info["cpu_layout"] = cpu_layout
    if previous and previous.get("spec_hash") != spec.spec_hash:
        info["previous_specs"] = previous.get("previous_specs", []) + [previous.get("sweep")]
    return info


class SweepRunner:
    """Loads the models once and runs the (remaining) units of one sweep shard."""

    def __init__(self, spec: SweepSpec, out_dir: str | Path, *, force: bool = False, shard: tuple[int, int] = (0, 1),
                 observer: SweepObserver | None = None, yes: bool = False):
        self.spec, self.shard, self.force = spec, shard, force
        check_writable_folder(Path(out_dir))
        check_device(spec.device)
        self.store = ResultsStore(out_dir)
        self.observer = observer or SilentObserver()
        writer = lock_holder(out_dir)
        if writer is not None:
            raise SpecbenchError(f"{out_dir} is in use by PID {writer} (another specbench is writing there); "
                                 "wait for it to finish or choose another --out")
        self.previous = check_folder(self.store, spec, force)
        check_shard(spec, shard)
        self.workloads = load_workloads(spec)
        check_grid_size(spec, self.workloads, shard, yes=yes, in_shard=in_shard)
        self.units = (pool_units(spec, self.workloads, shard) if spec.adaptive is not None
                      else expand_units(spec, self.workloads, shard))
        if not self.units:
            raise SpecbenchError("empty grid: this shard has no prompts" if shard[1] > 1 else "empty grid")
        self.backend: Backend = make_backend(spec.backend, spec.run_options, target=spec.target, device=spec.device,
                                             dtype=spec.dtype, seed=spec.seed, max_concurrency=max(spec.concurrency))
        self._answers: dict[tuple, list[str]] = {}
        self._catch_up: set[str] = set()  # finished online units that run again on a resume (measure.online_resume)

    @property
    def device_name(self) -> str:
        return self.backend.device_name

    def _prepare(self, todo: list[Unit]) -> None:
        """Everything that can fail on bad input, before run.json is written: models, drafters, lengths."""
        self.backend.start(self.observer.status)
        self.spec.dtype_used = getattr(self.backend, "dtype_used", None)
        drafters = list(dict.fromkeys(u.config.drafter for u in todo if u.mode == "live" and u.config.drafter))
        self.spec.model_hashes = self.backend.model_hashes(drafters)
        self.spec.weights_sha256 = self.spec.model_hashes.get(self.spec.target)
        check_unit_lengths(self.backend, self.spec.target, todo)

    def _restore_answers(self) -> None:
        """Turn-1 answers of finished baseline units (for turn 2 after a resume)."""
        if not self.store.records_dir.exists():
            return
        frame = load_records(self.store.folder, columns=["mode", "drafter", "gamma", "turn", "workload", "prompt_id",
                                                          "repeat", "temperature", "top_p", "top_k", "output_ids"])
        done = frame[(frame["drafter"] == TARGET_ONLY) & (frame["turn"] == 1) & (frame["mode"] == "live")]
        for row in done.itertuples():
            key = (row.workload, row.prompt_id, row.repeat, row.temperature, row.top_p, row.top_k)
            self._answers[key] = [self.backend.tokenizer.decode(list(row.output_ids), skip_special_tokens=True)]

    # ------------------------------------------------------------------ running
    def prompt_ids(self, unit: Unit) -> list[int]:
        answers = self._answers.get(unit.group, [])[: unit.turn - 1]
        if len(answers) < unit.turn - 1:
            raise SpecbenchError(f"{unit.prompt.prompt_id}: turn {unit.turn} needs the baseline's earlier answers")
        return encode_turn(self.backend.tokenizer, unit.workload, unit.prompt, unit.turn - 1, answers,
                           token_limit=prompt_room(self.backend.context_window, unit.max_new_tokens))

    def _warm_up(self, unit: Unit) -> None:
        """Untimed decoding before the first timed unit (rule 1 of the timing protocol)."""
        seconds = self.spec.timing.warmup_s
        if seconds <= 0:
            return
        self.observer.status(f"warming up ({seconds:g} s)")
        ids = self.prompt_ids(unit) if unit.turn == 1 else self.prompt_ids(replace(unit, turn=1))
        baseline = self._baseline_config(unit)
        warm_up(lambda: self.backend.generate(baseline, ids, 16, seed=0, stop_at_eos=False), seconds)
        self.observer.status("sweep")

    def _baseline_config(self, unit: Unit) -> RunConfig:
        c = unit.config
        return RunConfig(None, 0, "chain", c.temperature, c.top_p, c.top_k)

    def _measure(self, unit: Unit):
        """Run one live unit once: its record and the machine's state while it ran."""
        self.observer.unit_started(unit)
        ids = self.prompt_ids(unit)
        check_window(self.backend.context_window, self.spec.target, len(ids), unit.max_new_tokens,
                     f"{unit.workload.name} {unit.prompt.prompt_id} turn {unit.turn}")
        probe = MachineProbe()
        result = self.backend.generate(unit.config, ids, unit.max_new_tokens, seed=unit.seed,
                                       stop_at_eos=not self.spec.ignore_eos,
                                       on_round=lambda r, u=unit: self.observer.round_done(u, r))
        state = probe.stop()
        if unit.config.is_baseline and unit.turn == 1 and unit.group not in self._answers:
            text = self.backend.tokenizer.decode(result.tokens, skip_special_tokens=True)
            self._answers[unit.group] = [text]
        return make_record(unit, result, self.spec, self.device_name), state

    def _run_again(self, unit: Unit) -> None:
        """A finished online unit, generated again untimed and unrecorded: its drafter learns from it again."""
        self.observer.status(f"online: catching up {unit.config.label} on {unit.prompt.prompt_id} turn {unit.turn}")
        self.backend.generate(unit.config, self.prompt_ids(unit), unit.max_new_tokens, seed=unit.seed,
                              stop_at_eos=not self.spec.ignore_eos)
        self.observer.status("sweep")

    def run(self) -> int:
        """Run every unfinished unit, holding the folder's writer lock; returns how many were measured now."""
        with FolderLock(self.store.folder):
            return self._run_locked()

    def _run_locked(self) -> int:
        self.previous = check_folder(self.store, self.spec, self.force)  # again, now that we are the only writer
        # --force on another spec's records: they are set aside (records/old-SPECHASH/) once the models load
        forcing = (self.previous is not None and self.previous.get("spec_hash") != self.spec.spec_hash
                   and self.store.has_records())
        self.store.remove_stale_temporaries()
        finished = set() if forcing else self.store.finished_units()
        self._catch_up = catch_up_units(self.units, finished)
        todo = [u for u in self.units if u.unit_id not in finished or u.unit_id in self._catch_up]
        self.observer.begin(total=len(self.units), done=len(self.units) - len(todo) + len(self._catch_up))
        if not todo:
            if self.previous is None or self.previous.get("spec_hash") != self.spec.spec_hash:
                self.store.write_run_info(run_info(self.spec, self.previous, self.shard))
            self.store.consolidate()
            return 0
        try:
            self._prepare(todo)
            if forcing:
                set_aside = self.store.archive_records(str(self.previous.get("spec_hash")))
                self.observer.status(f"--force: {set_aside} record(s) of spec {self.previous.get('spec_hash')} "
                                     "set aside")
            self.store.write_run_info(self._run_info())  # spec valid, models loaded
            if self.spec.adaptive is not None:  # looks until each workload is decided (measure.adaptive)
                return AdaptiveSweep(self).run(finished)
            return self._run_units(todo)
        finally:
            self.backend.close()

    def _run_units(self, todo: list[Unit]) -> int:
        self._restore_answers()
        measured = 0
        if uses_groups(self.spec):  # serving backends: a (configuration, concurrency) group at a time
            measured += run_groups(self, todo)
            todo = [u for u in todo if u.mode != "live"]
        live = [u for u in todo if u.mode == "live"]
        if live:
            self._warm_up(live[0])
        threads = self.backend.threads
        for block in live_blocks(live):  # timing protocol: specbench.measure.timing_protocol
            for unit in [u for u in block if u.unit_id in self._catch_up]:
                self._run_again(unit)
            block = [u for u in block if u.unit_id not in self._catch_up]
            for unit, attempts in run_block(block, self._measure, self.spec.timing, threads):
                record = combine(attempts)
                self.store.write_unit(record)
                measured += 1
                self.observer.unit_done(unit, record)
        replayed = [u for u in todo if u.mode == "replay"]
        if replayed:
            self.observer.status("replaying")
            measured += run_replay_units(self, replayed)
            write_summary(self.store.folder)
        self.store.write_run_info(self._run_info())
        self.store.consolidate()
        return measured

    def _run_info(self) -> dict:
        threads, layout = (getattr(self.backend, name, None) for name in ("thread_report", "layout_report"))
        return run_info(self.spec, self.previous, self.shard, threads() if threads is not None else None,
                        layout() if layout is not None else None)

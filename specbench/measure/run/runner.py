"""Running a sweep: every unit of the grid through a backend, each record saved at once.

A unit is one configuration on one prompt turn and repeat, measured live or replayed (its
``mode``). Live units run prompt by prompt, the baseline first, so that every configuration of
a prompt is measured close together in time and MT-Bench's turn 2 can be asked after the
target's own turn-1 answer (the baseline's: the same context for every configuration).
Replayed units (``mode: replay`` or ``both``, see `specbench.measure.replay.units`) run after every
live unit: they need the baselines' trajectories and the cost model fitted on the live units.
Finished units are skipped on a re-run, so a killed sweep resumes where it stopped, losing at
most the unit in flight (or the prompt turn in flight: a turn's units are timed as one block).

Timing follows `specbench.measure.timing.timing_protocol`: a warm-up, then each prompt turn's live units
as one block — baseline and configurations back to back, the baseline timed again after them
(``timing.order``) — with the machine's state recorded per attempt and disturbed units re-timed
or flagged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeGuard

from specbench.backends.base import Backend
from specbench.catalogue.drafters import TARGET_ONLY
from specbench.engine.device import device_info
from specbench.errors import SpecbenchError, note
from specbench.measure.environment import git_commit, now_utc, package_versions
from specbench.measure.executors.executor import Executor, InProcessExecutor, RecordWriter, raise_failures
from specbench.measure.executors.pieces import live_blocks, live_pieces, replay_pieces  # noqa: F401 (live_blocks: re-export)
from specbench.measure.executors.ray_executor import RayExecutor
from specbench.measure.executors.worker import PieceWorker, SilentObserver, sweep_backend  # noqa: F401 (SilentObserver: re-export)
from specbench.measure.grid.online_strategy import check_shard
from specbench.measure.grid.sweep_spec import SweepSpec
from specbench.measure.grid.units import Unit, expand_units, in_shard, load_workloads
from specbench.measure.grid.validate import check_device, check_grid_size, check_models
from specbench.measure.replay.units import cost_key, replay_inputs, write_summary
from specbench.measure.run.adaptive import AdaptivePolicy
from specbench.measure.run.online_resume import catch_up_units
from specbench.measure.run.policy import Policy
from specbench.records.archive import set_aside_folder
from specbench.records.identity import CONFIRMATION, SWEEP, role_of_shards
from specbench.records.lock import LOCK_FILE, FolderLock, another, check_writable_folder, lock_holder
from specbench.records.store import SCHEMA_VERSION, ResultsStore, load_records


class SweepObserver(Protocol):
    """What the runner reports while it works (the CLI draws progress bars from it)."""

    def status(self, message: str) -> None: ...
    def begin(self, total: int, done: int) -> None: ...
    def unit_started(self, unit: Unit) -> None: ...
    def round_done(self, unit: Unit, result) -> None: ...
    def unit_done(self, unit: Unit, record: dict) -> None: ...
    def looks_done(self, lines: list[str]) -> None: ...  # a policy's news in words, after each of its steps
    def look_started(self, units: int, budget_left_s: float | None) -> None: ...  # a policy's step begins


def check_folder(store: ResultsStore, spec: SweepSpec, force: bool, flag: str | None = "--out") -> dict | None:
    """Refuse a folder holding records of a different sweep unless forced; returns its run.json. ``flag``: the
    option that chooses another folder (None: the command has none, as confirm).

    A run.json without records (a sweep that failed before its first unit) protects nothing.
    """
    info = store.run_info()
    other = f"use another {flag} or --force" if flag else "use --force"
    if other_kind(info):
        if force:  # set aside by `SweepRunner` once the models load, like another spec's records
            return info
        raise SpecbenchError(
            f"{store.folder} holds a {info.get('kind')}, not sweep results; {other} "
            "(--force moves its content to old-KIND-TAG/ in the folder)"
        )
    if info is not None and not isinstance(info.get("spec_hash"), str) and not force:
        raise SpecbenchError(f"{store.folder}/run.json has no spec hash (not written by a sweep); {other}")
    if info is not None and info.get("spec_hash") != spec.spec_hash and not force and store.has_records():
        raise SpecbenchError(
            f"{store.folder} holds results of a different sweep spec "
            f"(spec {info.get('spec_hash')} vs {spec.spec_hash}); {other}"
        )
    return info


def other_kind(info: dict | None) -> TypeGuard[dict]:
    """Whether a folder's run.json is of another kind than a sweep's (a cost profile, say)."""
    return info is not None and info.get("kind") not in (None, "sweep")


def run_info(
    spec: SweepSpec,
    previous: dict | None,
    shard: tuple[int, int],
    threads: dict | None = None,
    cpu_layout: dict | None = None,
    device: dict | None = None,
    executor: dict | None = None,
    energy: dict | None = None,
    engine: dict | None = None,
    warm_up: dict | None = None,
    role: str = SWEEP,
) -> dict:
    """run.json's contents; ``role``: what the folder is (`specbench.records.identity`: a confirmation says so,
    a sweep is a shard until its shards cover every index); ``threads``: the backend's CPU thread report (`OwnEngineBackend.thread_report`);
    ``cpu_layout``: its CPU dtype and weight layout choice (`OwnEngineBackend.layout_report`); ``device``: the
    device the units ran on (default: this machine's ``spec.device``); ``executor``: the Ray executor's workers
    (their nodes, devices and processes); ``energy``: the energy counters and idle power (`measure.timing.energy`);
    ``warm_up``: the shapes each configuration ran untimed before timing (`OwnEngineBackend.warm_up_report`)."""
    shards = sorted({*map(tuple, (previous or {}).get("shards", [])), shard})
    info = {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "role": role if role == CONFIRMATION else role_of_shards(shards),
        "sweep": spec.to_dict(),
        "spec_hash": spec.spec_hash,
        "versions": package_versions(),
        "git_commit": git_commit(),
        **(device if device is not None else device_info(spec.device)),
        "dtype": spec.dtype_used or spec.dtype,
        "created": (previous or {}).get("created", now_utc()),
        "updated": now_utc(),
        "shards": shards,
        "models": dict(spec.model_hashes),
    }
    if threads is not None:
        info["threads"] = threads
    if cpu_layout is not None:
        info["cpu_layout"] = cpu_layout
    if executor is not None:
        info["executor"] = executor
    if energy is not None:
        info["energy"] = energy
    if warm_up:
        info["warm_up"] = warm_up
    if engine:
        info["engine"] = engine  # a serving engine's build (llama.cpp: its commit, the GGUF it ran)
    if previous and previous.get("spec_hash") != spec.spec_hash:
        info["previous_specs"] = previous.get("previous_specs", []) + [previous.get("sweep")]
    return info


def _missing(value) -> bool:
    """A null column value as pandas reads it (None or NaN)."""
    return value is None or value != value


class SweepRunner:
    """Loads the models once and runs the (remaining) units of one sweep shard."""

    def __init__(
        self,
        spec: SweepSpec,
        out_dir: str | Path,
        *,
        force: bool = False,
        shard: tuple[int, int] = (0, 1),
        observer: SweepObserver | None = None,
        yes: bool = False,
        workloads: list | None = None,
        policy: Callable[..., Policy] | None = None,
        role: str = SWEEP,
        out_flag: str | None = "--out",
    ):
        """``workloads``: the prompts to measure (default: the spec's, loaded); ``policy``: what decides the units
        look by look, built as ``policy(spec, workloads, shard, folder)`` (default: `AdaptivePolicy` for an
        adaptive spec; none for a fixed grid: every unit, once); ``role``: what run.json says the folder is
        (`specbench.records.identity.ROLES`: ``confirmation`` for `specbench confirm`'s folder); ``out_flag``: the
        option that names the folder, which messages about the folder suggest (None: the command chose the folder
        itself, as confirm does)."""
        self.spec, self.shard, self.force, self.role, self.out_flag = spec, shard, force, role, out_flag
        self._cut_short = False  # the last step's budget ran out before all its pieces started
        check_writable_folder(Path(out_dir), out_flag)
        if not spec.executor.is_ray:  # Ray workers check their own node's device (the driver may have none)
            check_device(spec.device)
        check_models(spec)  # a name that resolves nowhere: one line, as --dry-run says it
        self.store = ResultsStore(out_dir)
        self.observer = observer or SilentObserver()
        writer = lock_holder(out_dir)
        if writer is not None:
            raise SpecbenchError(
                f"{out_dir} is in use by PID {writer} (another specbench is writing there); "
                f"wait for it to finish{another(out_flag)}"
            )
        self.previous = check_folder(self.store, spec, force, out_flag)
        check_shard(spec, shard)
        self.workloads = load_workloads(spec) if workloads is None else workloads
        check_grid_size(spec, self.workloads, shard, yes=yes, in_shard=in_shard)
        if policy is None and spec.adaptive is not None:
            policy = AdaptivePolicy
        self.policy = None if policy is None else policy(spec, self.workloads, shard, self.store.folder)
        self.units = expand_units(spec, self.workloads, shard) if self.policy is None else self.policy.units
        if not self.units and shard[1] == 1:
            raise SpecbenchError("empty grid")  # a shard may hold no prompt: it runs nothing and says so
        self.backend: Backend | None = None  # in-process: the sweep's backend; Ray: each worker builds its own
        self.executor: Executor
        if spec.executor.is_ray:
            self.executor = RayExecutor(spec, self.observer)
        else:
            self.backend = sweep_backend(spec)
            self.executor = InProcessExecutor(PieceWorker(spec, self.backend, self.observer))
        self._answers: dict[tuple, list[list[int]]] = {}  # conversation -> the baseline's turn-1 answer (token ids)
        self._catch_up: set[str] = set()  # finished online units that run again on a resume (measure.run.online_resume)
        self._report: dict = {}

    @property
    def device_name(self) -> str:
        return self._report.get("device_name") or (self.backend.device_name if self.backend is not None else "")

    def _prepare(self, todo: list[Unit]) -> None:
        """Everything that can fail on bad input, before run.json is written: models, drafters, lengths (on every
        worker: the executor starts them)."""
        self._report = self.executor.prepare(todo)
        energy = self._report.get("energy") or {}
        if energy.get("reason"):  # the one line that says why the energy columns stay null
            note(f"energy columns left null: {energy['reason']}")

    def _restore_answers(self) -> None:
        """Turn-1 answers of finished baseline units (for turn 2 after a resume)."""
        if not self.store.records_dir.exists():
            return
        frame = load_records(
            self.store.folder,
            columns=[
                "mode",
                "drafter",
                "gamma",
                "turn",
                "workload",
                "prompt_id",
                "repeat",
                "temperature",
                "top_p",
                "top_k",
                "concurrency",
                "request_rate",
                "output_ids",
            ],
        )
        done = frame[(frame["drafter"] == TARGET_ONLY) & (frame["turn"] == 1) & (frame["mode"] == "live")]
        for row in done.itertuples():
            concurrency = 1 if _missing(row.concurrency) else int(row.concurrency)
            rate = None if _missing(row.request_rate) else float(row.request_rate)
            key = (row.workload, row.prompt_id, row.repeat, row.temperature, row.top_p, row.top_k, concurrency, rate)
            self._answers[key] = [list(row.output_ids)]  # as `pieces.answer_key` keys them

    def run(self) -> int:
        """Run every unfinished unit, holding the folder's writer lock; returns how many were measured now."""
        with FolderLock(self.store.folder, self.out_flag):
            return self._run_locked()

    def _run_locked(self) -> int:
        self.previous = check_folder(
            self.store, self.spec, self.force, self.out_flag
        )  # again, now that we are the only writer
        # --force on another spec's records: they are set aside (records/old-SPECHASH/) once the models load
        forcing = (
            self.previous is not None
            and self.previous.get("spec_hash") != self.spec.spec_hash
            and (self.store.has_records() or other_kind(self.previous))
        )
        self.store.remove_stale_temporaries()
        finished = set() if forcing else self.store.finished_units()
        self._catch_up = catch_up_units(self.units, finished)
        todo = [u for u in self.units if u.unit_id not in finished or u.unit_id in self._catch_up]
        self.observer.begin(total=len(self.units), done=len(self.units) - len(todo) + len(self._catch_up))
        if not todo:  # every unit finished, or a shard that holds no prompt: run.json says it ran
            if forcing:
                self._set_aside()
            if self.previous is None or self.previous.get("spec_hash") != self.spec.spec_hash:
                self.store.write_run_info(run_info(self.spec, self.previous, self.shard, role=self.role))
            self.store.consolidate()
            return 0
        try:
            self._prepare(todo)
            if forcing:
                self._set_aside()
            self.store.write_run_info(self._run_info())  # spec valid, models loaded
            if self.policy is not None:  # looks until the policy is done (measure.run.adaptive, measure.run.confirm)
                return self.drive(self.policy, finished)
            return self._run_units(todo)
        finally:
            self.executor.close()

    def drive(self, policy: Policy, finished: set[str]) -> int:
        """Every step ``policy`` proposes, measured (`specbench.measure.run.policy`); returns the units measured now."""
        policy.resume(load_records(self.store.folder) if self.store.has_records() else None, finished)
        measured = 0
        shown: list[str] = []
        while (step := policy.propose(finished)) is not None:
            fresh = [u for u in step.units if u.unit_id not in finished]
            self.observer.status(step.title)
            self._notify("look_started", len(fresh), step.budget_left_s)
            started = time.monotonic()
            deadline = None if step.budget_left_s is None else started + step.budget_left_s
            try:
                measured += self._run_units(fresh, deadline) if fresh else 0
            except BaseException:  # Ctrl-C, SIGTERM, a failed piece: the step's seconds were spent all the same
                policy.interrupted(time.monotonic() - started)  # the step is not judged: a look cut short is none
                raise
            if self._cut_short:  # the budget ran out inside the step: its units so far are kept, it is not judged
                policy.interrupted(time.monotonic() - started)
                break
            finished.update(u.unit_id for u in fresh)
            policy.observe(load_records(self.store.folder), time.monotonic() - started)
            shown = self._show_verdicts(policy, shown)
        policy.close()
        self._show_verdicts(policy, shown)
        return measured

    def _show_verdicts(self, policy: Policy, shown: list[str]) -> list[str]:
        """Tell the observer the policy's verdict lines when they differ from those it was last told (``shown``):
        the lines after the last look are not printed again when closing changes nothing."""
        lines = policy.progress_lines()
        if lines != shown:
            self._notify("looks_done", lines)
        return lines

    def _notify(self, event: str, *args) -> None:
        """Tell the observer about a policy's step, when it listens (the two hooks are optional)."""
        hook = getattr(self.observer, event, None)
        if hook is not None:
            hook(*args)

    def _set_aside(self) -> None:
        """--force: another spec's records to records/old-SPECHASH/; another kind's content (a cost
        profile) to old-KIND-TAG/ — never overwritten, never pooled with this spec's."""
        previous = self.previous
        if previous is None:  # forcing means an earlier run.json (`_run_locked`)
            return
        if other_kind(previous):
            moved = set_aside_folder(
                self.store.folder,
                str(previous.get("kind")),
                str(previous.get("created") or "earlier"),
                keep=(LOCK_FILE,),
            )
            self.observer.status(f"--force: the earlier {previous.get('kind')} is set aside in {moved}")
            self.previous = None
            return
        set_aside = self.store.archive_records(str(previous.get("spec_hash")))
        self.observer.status(f"--force: {set_aside} record(s) of spec {previous.get('spec_hash')} set aside")

    def _run_units(self, todo: list[Unit], deadline: float | None = None) -> int:
        """The units of ``todo`` through the executor: the live pieces (timing blocks, serving groups), then the
        replay pieces (they need the live units' trajectories and cost fits); every record is written here.
        Past ``deadline`` (``time.monotonic()``; a look's budget) no further piece starts and ``_cut_short`` is set:
        the units written are kept, the rest (with the replays, which need every live unit) wait for a resume."""
        self._restore_answers()
        writer = RecordWriter(self.store, self.observer, self._answers, deadline)
        live = live_pieces(self.spec, todo, self.executor.warm(), catch_up=self._catch_up)
        failures = self.executor.run(live, writer) if live else []
        self._cut_short = writer.cut_short
        replayed = [u for u in todo if u.mode == "replay"]
        replay = []
        if replayed and not failures and not writer.cut_short:  # a failed live piece would change the replays' fits
            self.observer.status("replaying")
            paths, costs = replay_inputs(self.store.folder)
            replay = replay_pieces(replayed, paths, costs, lambda unit: cost_key(self.spec, unit))
            failures += self.executor.run(replay, writer)
        if replayed:
            write_summary(self.store.folder)
        self.store.write_run_info(self._run_info())
        self.store.consolidate()
        raise_failures(
            failures,
            len(live) + len(replay),
            self.store.folder,
            waiting=len(replayed) if replayed and not replay else 0,
        )
        return writer.written

    def _run_info(self) -> dict:
        report = dict(self._report)
        if self.backend is not None:  # in process: the thread counts the units ran with so far, not at the start
            for key, name in (
                ("threads", "thread_report"),
                ("cpu_layout", "layout_report"),
                ("warm_up", "warm_up_report"),
            ):
                current = getattr(self.backend, name, None)
                if current is not None:
                    report[key] = current()
        device = report.get("device_info") if self.spec.executor.is_ray else None
        return run_info(
            self.spec,
            self.previous,
            self.shard,
            report.get("threads"),
            report.get("cpu_layout"),
            device,
            self.executor.info(),
            report.get("energy"),
            report.get("engine"),
            report.get("warm_up"),
            role=self.role,
        )

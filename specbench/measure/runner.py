"""Running a sweep: every unit of the grid through a backend, each record saved at once.

A unit is one configuration on one prompt turn and repeat, measured live or replayed (its
``mode``). Live units run prompt by prompt, the baseline first, so that every configuration of
a prompt is measured close together in time and MT-Bench's turn 2 can be asked after the
target's own turn-1 answer (the baseline's: the same context for every configuration).
Replayed units (``mode: replay`` or ``both``, see `specbench.measure.replay_units`) run after every
live unit: they need the baselines' trajectories and the cost model fitted on the live units.
Finished units are skipped on a re-run, so a killed sweep resumes where it stopped, losing at
most the unit in flight.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from specbench.backends.base import Backend
from specbench.backends.environment import device_info, git_commit, now_utc, package_versions
from specbench.backends.registry import make_backend
from specbench.errors import SpecbenchError
from specbench.measure.groups import run_groups, uses_groups
from specbench.measure.replay_units import run_replay_units, write_summary
from specbench.measure.spec import SweepSpec
from specbench.measure.units import Unit, expand_units, load_workloads, make_record
from specbench.measure.workloads import encode_turn
from specbench.records.store import SCHEMA_VERSION, ResultsStore, load_records


class SweepObserver(Protocol):
    """What the runner reports while it works (the CLI draws progress bars from it)."""

    def status(self, message: str) -> None: ...
    def begin(self, total: int, done: int) -> None: ...
    def unit_started(self, unit: Unit) -> None: ...
    def round_done(self, unit: Unit, result) -> None: ...
    def unit_done(self, unit: Unit, record: dict) -> None: ...


class SilentObserver:
    def status(self, message): pass
    def begin(self, total, done): pass
    def unit_started(self, unit): pass
    def round_done(self, unit, result): pass
    def unit_done(self, unit, record): pass


def check_folder(store: ResultsStore, spec: SweepSpec, force: bool) -> dict | None:
    """Refuse a folder holding a different sweep unless forced; returns its run.json."""
    info = store.run_info()
    if info is not None and info.get("spec_hash") != spec.spec_hash and not force:
        raise SpecbenchError(f"{store.folder} holds results of a different sweep spec "
                             f"(spec {info.get('spec_hash')} vs {spec.spec_hash}); use another --out or --force")
    return info


def run_info(spec: SweepSpec, previous: dict | None, shard: tuple[int, int]) -> dict:
    info = {
        "schema_version": SCHEMA_VERSION,
        "kind": "sweep",
        "sweep": spec.to_dict(),
        "spec_hash": spec.spec_hash,
        "versions": package_versions(),
        "git_commit": git_commit(),
        **device_info(spec.device),
        "dtype": spec.dtype,
        "created": (previous or {}).get("created", now_utc()),
        "updated": now_utc(),
        "shards": sorted({*map(tuple, (previous or {}).get("shards", [])), shard}),
    }
    if previous and previous.get("spec_hash") != spec.spec_hash:
        info["previous_specs"] = previous.get("previous_specs", []) + [previous.get("sweep")]
    return info


class SweepRunner:
    """Loads the models once and runs the (remaining) units of one sweep shard."""

    def __init__(self, spec: SweepSpec, out_dir: str | Path, *, force: bool = False, shard: tuple[int, int] = (0, 1),
                 observer: SweepObserver | None = None):
        self.spec, self.shard = spec, shard
        self.store = ResultsStore(out_dir)
        self.observer = observer or SilentObserver()
        self.previous = check_folder(self.store, spec, force)
        self.workloads = load_workloads(spec)
        self.units = expand_units(spec, self.workloads, shard)
        if not self.units:
            raise SpecbenchError("empty grid: this shard has no prompts" if shard[1] > 1 else "empty grid")
        self.backend: Backend = make_backend(spec.backend, spec.run_options, target=spec.target, device=spec.device,
                                             dtype=spec.dtype, seed=spec.seed, max_concurrency=max(spec.concurrency))
        self._answers: dict[tuple, list[str]] = {}

    @property
    def device_name(self) -> str:
        return self.backend.device_name

    def _restore_answers(self) -> None:
        """Turn-1 answers of finished baseline units (for turn 2 after a resume)."""
        if not self.store.records_dir.exists():
            return
        frame = load_records(self.store.folder, columns=["mode", "drafter", "gamma", "turn", "workload", "prompt_id",
                                                          "repeat", "temperature", "top_p", "top_k", "output_ids"])
        done = frame[(frame["drafter"] == "none") & (frame["turn"] == 1) & (frame["mode"] == "live")]
        for row in done.itertuples():
            key = (row.workload, row.prompt_id, row.repeat, row.temperature, row.top_p, row.top_k)
            self._answers[key] = [self.backend.tokenizer.decode(list(row.output_ids), skip_special_tokens=True)]

    # ------------------------------------------------------------------ running
    def prompt_ids(self, unit: Unit) -> list[int]:
        answers = self._answers.get(unit.group, [])[: unit.turn - 1]
        if len(answers) < unit.turn - 1:
            raise SpecbenchError(f"{unit.prompt.prompt_id}: turn {unit.turn} needs the baseline's earlier answers")
        return encode_turn(self.backend.tokenizer, unit.workload, unit.prompt, unit.turn - 1, answers)

    def run(self) -> int:
        """Run every unfinished unit; returns how many were measured now."""
        self.store.remove_stale_temporaries()
        finished = self.store.finished_units()
        todo = [u for u in self.units if u.unit_id not in finished]
        self.observer.begin(total=len(self.units), done=len(self.units) - len(todo))
        self.store.write_run_info(run_info(self.spec, self.previous, self.shard))
        if not todo:
            self.store.consolidate()
            return 0
        self.backend.start(self.observer.status)
        try:
            return self._run_units(todo)
        finally:
            self.backend.close()

    def _run_units(self, todo: list[Unit]) -> int:
        self._restore_answers()
        measured = 0
        if uses_groups(self.spec):  # serving backends: a (configuration, concurrency) group at a time
            measured += run_groups(self, todo)
            todo = [u for u in todo if u.mode != "live"]
        for unit in (u for u in todo if u.mode == "live"):
            self.observer.unit_started(unit)
            ids = self.prompt_ids(unit)
            result = self.backend.generate(unit.config, ids, unit.max_new_tokens, seed=unit.seed,
                                           stop_at_eos=not self.spec.ignore_eos,
                                           on_round=lambda r, u=unit: self.observer.round_done(u, r))
            record = make_record(unit, result, self.spec, self.device_name)
            self.store.write_unit(record)
            if unit.config.is_baseline and unit.turn == 1:
                text = self.backend.tokenizer.decode(result.tokens, skip_special_tokens=True)
                self._answers[unit.group] = [text]
            measured += 1
            self.observer.unit_done(unit, record)
        replayed = [u for u in todo if u.mode == "replay"]
        if replayed:
            self.observer.status("replaying")
            measured += run_replay_units(self, replayed)
            write_summary(self.store.folder)
        self.store.write_run_info(run_info(self.spec, self.previous, self.shard))
        self.store.consolidate()
        return measured

"""Running a sweep: every unit of the grid through the engine, each record saved at once.

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

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from specbench.measure.environment import device_info, git_commit, now_utc, package_versions
from specbench.errors import SpecbenchError
from specbench.records.store import SCHEMA_VERSION, ResultsStore, load_records
from specbench.measure.spec import RunConfig, SweepSpec
from specbench.measure.workloads import Prompt, Workload, load_workload
from specbench.measure.machine_state import MachineProbe
from specbench.measure.timing_protocol import combine, run_block, warm_up

WARMUP_TOKENS = 8


@dataclass(frozen=True)
class Unit:
    config: RunConfig
    workload: Workload
    prompt: Prompt
    turn: int  # 1-based
    repeat: int
    max_new_tokens: int
    base_seed: int
    mode: str = "live"  # 'live' (through the engine) or 'replay' (from the baseline's trajectory)

    @property
    def group(self) -> tuple:
        """Units sharing a conversation context (turn 2 reuses the baseline's turn-1 answer)."""
        c = self.config
        return (self.workload.name, self.prompt.prompt_id, self.repeat, c.temperature, c.top_p, c.top_k)

    @property
    def seed(self) -> int:
        text = f"{self.base_seed}:{self.workload.name}:{self.prompt.prompt_id}:{self.turn}:{self.repeat}"
        return int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)

    @property
    def unit_id(self) -> str:
        c = self.config
        key = [c.drafter.type if c.drafter else "none", c.drafter.params_json if c.drafter else "{}", c.gamma,
               c.tree, c.temperature, c.top_p, c.top_k, self.workload.name, self.prompt.prompt_id, self.turn,
               self.repeat, self.max_new_tokens, self.base_seed] + (["replay"] if self.mode == "replay" else [])
        return hashlib.sha1(repr(key).encode()).hexdigest()[:20]


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 0, 1
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise SpecbenchError(f"--shard expects I/N (e.g. 0/4), got '{text}'") from None
    if count < 1 or not 0 <= index < count:
        raise SpecbenchError(f"--shard {text}: need 0 <= I < N")
    return index, count


def _in_shard(prompt_id: str, workload: str, shard: tuple[int, int]) -> bool:
    digest = int(hashlib.sha1(f"{workload}:{prompt_id}".encode()).hexdigest()[:8], 16)
    return digest % shard[1] == shard[0]


def load_workloads(spec: SweepSpec) -> list[Workload]:
    loaded = []
    for choice in spec.workloads:
        loaded.append(load_workload(choice.name, count=choice.count, seed=spec.seed, split=choice.split))
    return loaded


def runs_live(spec: SweepSpec, config: RunConfig, prompt_index: int) -> bool:
    """Whether ``config`` runs live on the workload's ``prompt_index``-th prompt (0-based, in the shard).

    The baseline always does; in mode replay a speculative configuration only as a calibration unit.
    """
    if config.is_baseline or spec.runs_live:
        return True
    cal = spec.calibration
    return cal is not None and config.gamma in cal.gammas and prompt_index < cal.prompts


def expand_units(spec: SweepSpec, workloads: list[Workload], shard: tuple[int, int] = (0, 1)) -> list[Unit]:
    """Every unit of the grid in execution order (one shard of it); replayed units after each turn's live ones."""
    units = []
    for workload in workloads:
        max_new = spec.max_new_tokens or workload.max_new_tokens
        prompts = [p for p in workload.prompts if _in_shard(p.prompt_id, workload.name, shard)]
        for index, prompt in enumerate(prompts):
            for repeat in range(spec.repeats):
                for temperature in spec.temperatures:
                    configs = [c for c in spec.configs if c.temperature == temperature]
                    for turn in range(1, len(prompt.turns) + 1):
                        for config in configs:  # the baseline comes first in spec.configs
                            if runs_live(spec, config, index):
                                units.append(Unit(config, workload, prompt, turn, repeat, max_new, spec.seed))
                        if spec.replays:
                            units.extend(Unit(c, workload, prompt, turn, repeat, max_new, spec.seed, "replay")
                                         for c in configs if not c.is_baseline)
    return units


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
        self._engines: dict[RunConfig, object] = {}
        self._drafters: dict = {}
        self._answers: dict[tuple, list[str]] = {}

    # ------------------------------------------------------------------ setup
    def _load_models(self) -> None:
        import torch

        from specbench.engine.decoder import make_decoder
        from specbench.models.resolve import load_model

        torch.manual_seed(self.spec.seed)
        self.observer.status(f"loading target {self.spec.target}")
        self.target = load_model(self.spec.target, device=self.spec.device, dtype=self.spec.dtype)
        if self.target.tokenizer is None:
            raise SpecbenchError(f"target '{self.spec.target}' has no tokenizer; sweeps need text prompts")
        self.decoder = make_decoder(self.target.model, kernels=self.spec.kernels, compile=self.spec.compile)
        self.device_name = device_info(self.spec.device)["device_name"]

    def _drafter(self, config: RunConfig):
        from specbench.engine.drafters import make_drafter

        if config.drafter not in self._drafters:
            self.observer.status(f"preparing drafter {config.drafter.label}")
            self._drafters[config.drafter] = make_drafter(config.drafter.type, self.target,
                                                          config.drafter.params_dict, device=self.spec.device,
                                                          dtype=self.spec.dtype)
        return self._drafters[config.drafter]

    def _engine(self, config: RunConfig, warmup_ids: list[int]):
        from specbench.engine.loop import SpeculativeEngine
        from specbench.engine.sampling import SamplingParams

        if config not in self._engines:
            drafter = None if config.is_baseline else self._drafter(config)
            sampling = SamplingParams(config.temperature, config.top_k, config.top_p)
            engine = SpeculativeEngine(self.target, drafter, gamma=config.gamma, tree=config.tree,
                                       sampling=sampling, decoder=self.decoder)
            engine.generate(warmup_ids, WARMUP_TOKENS, seed=0, stop_at_eos=False)  # untimed warm-up
            self._engines[config] = engine
        return self._engines[config]

    def _restore_answers(self) -> None:
        """Turn-1 answers of finished baseline units (for turn 2 after a resume)."""
        if not self.store.records_dir.exists():
            return
        frame = load_records(self.store.folder, columns=["mode", "drafter", "gamma", "turn", "workload", "prompt_id",
                                                          "repeat", "temperature", "top_p", "top_k", "output_ids"])
        done = frame[(frame["drafter"] == "none") & (frame["turn"] == 1) & (frame["mode"] == "live")]
        for row in done.itertuples():
            key = (row.workload, row.prompt_id, row.repeat, row.temperature, row.top_p, row.top_k)
            self._answers[key] = [self.target.tokenizer.decode(list(row.output_ids), skip_special_tokens=True)]

    # ------------------------------------------------------------------ running
    def prompt_ids(self, unit: Unit) -> list[int]:
        from specbench.measure.workloads import encode_turn

        answers = self._answers.get(unit.group, [])[: unit.turn - 1]
        if len(answers) < unit.turn - 1:
            raise SpecbenchError(f"{unit.prompt.prompt_id}: turn {unit.turn} needs the baseline's earlier answers")
        return encode_turn(self.target.tokenizer, unit.workload, unit.prompt, unit.turn - 1, answers)

    def _threads(self) -> int:
        import torch

        return int(torch.get_num_threads()) if self.spec.device == "cpu" else 0

    def _warm_up(self, unit: Unit) -> None:
        """Untimed decoding before the first timed unit (rule 1 of the timing protocol)."""
        seconds = self.spec.timing.warmup_s
        if seconds <= 0:
            return
        self.observer.status(f"warming up ({seconds:g} s)")
        ids = self.prompt_ids(unit) if unit.turn == 1 else self.prompt_ids(replace(unit, turn=1))
        engine = self._engine(self._baseline_config(unit), ids)
        warm_up(lambda: engine.generate(ids, 16, seed=0, stop_at_eos=False), seconds)
        self.observer.status("sweep")

    def _baseline_config(self, unit: Unit) -> RunConfig:
        c = unit.config
        return RunConfig(None, 0, "chain", c.temperature, c.top_p, c.top_k)

    def _measure(self, unit: Unit):
        """Run one live unit once: its record and the machine's state while it ran."""
        self.observer.unit_started(unit)
        ids = self.prompt_ids(unit)
        engine = self._engine(unit.config, ids)
        probe = MachineProbe()
        result = engine.generate(ids, unit.max_new_tokens, seed=unit.seed, stop_at_eos=not self.spec.ignore_eos,
                                 on_round=lambda r, u=unit: self.observer.round_done(u, r))
        state = probe.stop()
        if unit.config.is_baseline and unit.turn == 1 and unit.group not in self._answers:
            text = self.target.tokenizer.decode(result.tokens, skip_special_tokens=True)
            self._answers[unit.group] = [text]
        return make_record(unit, result, self.spec, self.device_name), state

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
        self._load_models()
        self._restore_answers()
        measured = 0
        live = [u for u in todo if u.mode == "live"]
        if live:
            self._warm_up(live[0])
        threads = self._threads()
        for block in live_blocks(live):  # timing protocol: specbench.measure.timing_protocol
            for unit, attempts in run_block(block, self._measure, self.spec.timing, threads):
                record = combine(attempts)
                self.store.write_unit(record)
                measured += 1
                self.observer.unit_done(unit, record)
        replayed = [u for u in todo if u.mode == "replay"]
        if replayed:
            from specbench.measure.replay_units import run_replay_units, write_summary

            self.observer.status("replaying")
            measured += run_replay_units(self, replayed)
            write_summary(self.store.folder)
        self.store.write_run_info(run_info(self.spec, self.previous, self.shard))
        self.store.consolidate()
        return measured


def make_record(unit: Unit, result, spec: SweepSpec, device_name: str) -> dict:
    """A results row (every column of `specbench.records.store.COLUMNS`) for one measured or replayed unit."""
    from specbench.engine.tree import shape_for

    c = unit.config
    nodes = shape_for(c.tree, c.gamma).num_nodes if c.gamma else 0
    attempts, accepts = result.position_counts(max(c.gamma, 1))
    rounds = result.rounds
    return {
        "unit_id": unit.unit_id, "sweep": spec.name, "mode": unit.mode, "target": spec.target,
        "drafter": c.drafter.type if c.drafter else "none",
        "drafter_params": c.drafter.params_json if c.drafter else "{}",
        "drafter_label": c.drafter.label if c.drafter else "none",
        "tree": c.tree, "tree_nodes": nodes, "gamma": c.gamma, "temperature": c.temperature, "top_p": c.top_p,
        "top_k": c.top_k, "workload": unit.workload.name, "prompt_id": unit.prompt.prompt_id,
        "category": unit.prompt.category, "turn": unit.turn, "repeat": unit.repeat, "seed": unit.seed,
        "device": device_name, "dtype": spec.dtype,
        "prompt_tokens": result.prompt_tokens, "new_tokens": result.new_tokens, "decode_tokens": result.decode_tokens,
        "rounds": result.target_forwards, "drafted": result.drafted, "accepted": result.accepted,
        "draft_steps": int(sum(rounds.draft_steps)), "alpha": result.alpha, "tau": result.tau,
        "accept_hist": result.accepted_length_histogram(c.gamma).tolist(),
        "pos_attempts": attempts.tolist()[: c.gamma], "pos_accepts": accepts.tolist()[: c.gamma],
        "round_drafted": list(rounds.drafted), "round_depth": list(rounds.depth),
        "round_accepted": list(rounds.accepted), "round_draft_steps": list(rounds.draft_steps),
        "round_draft_s": list(rounds.draft_s), "round_verify_s": list(rounds.verify_s),
        "prefill_s": result.prefill_s, "decode_s": result.decode_s, "draft_s": result.draft_s,
        "verify_s": result.verify_s, "overhead_s": result.overhead_s, "tokens_per_s": result.tokens_per_s,
        "peak_memory_bytes": result.peak_memory_bytes,
        "memory_kind": "cuda_max_allocated" if spec.device.startswith("cuda") else "cpu_max_rss",
        "stop_reason": result.stop_reason,
        "output_sha1": hashlib.sha1(str(result.tokens).encode()).hexdigest(),
        "output_ids": list(result.tokens), "timestamp": now_utc(),
    }

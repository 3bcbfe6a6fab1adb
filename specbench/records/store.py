"""The results store: one record per measured unit, Parquet files pandas reads directly.

A results folder (``results/<sweep-name>/``) holds

* ``run.json`` — the sweep spec, package versions, git commit, device, dtype, dates;
* ``records/`` — Parquet files of records (schema: `COLUMNS`, documented in
  docs/results-schema.md). Each finished unit is written at once as its own file
  (``unit-<id>.parquet``, written to a temporary name and renamed, so a killed sweep never
  leaves half a file); `ResultsStore.consolidate` later merges them into ``part-NNNN.parquet``
  files. Readers drop duplicate ``unit_id`` rows, so a crash between writing a merged part
  and deleting its sources loses nothing and duplicates nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specbench.errors import SpecbenchError
from specbench.records.archive import archive_records, check_run_info, note_set_aside
from specbench.records.lock import interrupts_deferred
from specbench.safe_files import read_json, write_atomic, write_json

SCHEMA_VERSION = 1

# name -> (arrow type, meaning). The single source of truth for the record layout.
COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "unit_id": (pa.string(), "hash of configuration + prompt + turn + repeat; unique per record"),
    "sweep": (pa.string(), "sweep name"),
    "mode": (pa.string(), "'live' (measured) or 'replay' (derived from a target trajectory)"),
    "target": (pa.string(), "target model spec"),
    "drafter": (pa.string(), "drafter type; 'none' for the target-only baseline (gamma 0)"),
    "drafter_params": (pa.string(), "drafter parameters as sorted JSON"),
    "drafter_label": (pa.string(), "drafter type + parameters, human readable (one per configuration)"),
    "tree": (pa.string(), "draft shape: 'chain' or a tree spec"),
    "tree_nodes": (pa.int64(), "draft tokens (tree nodes) per full round; gamma for a chain"),
    "gamma": (pa.int64(), "draft length γ (tree: depth); 0 = target-only baseline"),
    "temperature": (pa.float64(), "sampling temperature; 0 = greedy"),
    "top_p": (pa.float64(), "nucleus cut (1 = none)"),
    "top_k": (pa.int64(), "top-k cut (0 = none)"),
    "workload": (pa.string(), "workload name"),
    "prompt_id": (pa.string(), "prompt identifier inside the workload"),
    "category": (pa.string(), "prompt category (MT-Bench category, 'code', ...)"),
    "turn": (pa.int64(), "conversation turn (1, or 2 for MT-Bench follow-ups)"),
    "repeat": (pa.int64(), "repeat index"),
    "seed": (pa.int64(), "sampling seed of this unit"),
    "device": (pa.string(), "device name (e.g. 'cpu', 'NVIDIA H100 80GB HBM3')"),
    "dtype": (pa.string(), "weights dtype"),
    "prompt_tokens": (pa.int64(), "prompt length in tokens"),
    "new_tokens": (pa.int64(), "generated tokens, the prefill's first token included"),
    "decode_tokens": (pa.int64(), "tokens emitted by the rounds (new_tokens - 1)"),
    "rounds": (pa.int64(), "target forwards in the decode phase (one per round)"),
    "drafted": (pa.int64(), "draft tokens offered, summed over rounds"),
    "accepted": (pa.int64(), "draft tokens accepted, summed over rounds"),
    "draft_steps": (pa.int64(), "drafter forwards, summed over rounds (0 for model-free drafters)"),
    "alpha": (pa.float64(), "observed acceptance rate accepted / drafted (NaN when drafted = 0)"),
    "tau": (pa.float64(), "tokens per target forward, bonus included: decode_tokens / rounds"),
    "accept_hist": (pa.list_(pa.int64()), "rounds accepting exactly j tokens, j = 0..gamma"),
    "pos_attempts": (pa.list_(pa.int64()), "rounds reaching draft position i (i = 0..gamma-1)"),
    "pos_accepts": (pa.list_(pa.int64()), "rounds accepting draft position i"),
    "round_drafted": (pa.list_(pa.int64()), "per round: draft tokens (tree nodes) offered (a schedule's choice)"),
    "round_depth": (pa.list_(pa.int64()), "per round: draft depth (= drafted for a chain)"),
    "round_accepted": (pa.list_(pa.int64()), "per round: draft tokens accepted"),
    "round_draft_steps": (pa.list_(pa.int64()), "per round: drafter forwards"),
    "round_draft_s": (pa.list_(pa.float64()), "per round: proposal time, seconds"),
    "round_verify_s": (pa.list_(pa.float64()), "per round: target forward over drafted+1 tokens + acceptance, s"),
    "prefill_s": (pa.float64(), "prefill time (target and drafter), first token included, s"),
    "decode_s": (pa.float64(), "decode time, all rounds, s"),
    "draft_s": (pa.float64(), "sum of round_draft_s"),
    "verify_s": (pa.float64(), "sum of round_verify_s"),
    "overhead_s": (pa.float64(), "decode_s - draft_s - verify_s (bookkeeping)"),
    "tokens_per_s": (pa.float64(), "decode throughput decode_tokens / decode_s"),
    "peak_memory_bytes": (pa.int64(), "CUDA max allocated (GPU) or peak RSS (CPU)"),
    "memory_kind": (pa.string(), "'cuda_max_allocated' or 'cpu_max_rss'"),
    "stop_reason": (pa.string(), "'eos' or 'length'"),
    "output_sha1": (pa.string(), "sha1 of the generated token ids (greedy runs must match the baseline)"),
    "output_ids": (pa.list_(pa.int64()), "the generated token ids"),
    "timestamp": (pa.string(), "UTC time the unit finished, ISO 8601"),
    "weights_sha256": (
        pa.string(),
        "sha256 of the target's weights that produced the record (the model cache's "
        "proven content hash; null in records written before it existed)",
    ),
    # timing protocol (specbench.measure.timing.timing_protocol; docs/results-schema.md "Timing protocol")
    "timing_ok": (pa.bool_(), "false: every timed attempt ran under interference; timings left out of timing fits"),
    "timing_flag": (pa.string(), "'' clean; what disturbed the timing; 'modelled' for replayed units"),
    "timing_attempts": (pa.int64(), "times this unit was timed (0 for replayed units)"),
    "timing_kept": (pa.int64(), "undisturbed attempts averaged into the timings (all attempts if none)"),
    "attempt_decode_s": (pa.list_(pa.float64()), "decode_s of every timed attempt, in timing order"),
    "attempt_other_cores": (pa.list_(pa.float64()), "per attempt: cores other processes kept busy (NaN unknown)"),
    "load_1m": (pa.float64(), "1-minute load average at the end of the kept attempts (mean)"),
    "other_cpu_s": (pa.float64(), "CPU seconds other processes used during the kept attempts (NaN unknown)"),
    "other_cores": (pa.float64(), "other_cpu_s ÷ wall time: cores other processes kept busy (mean of kept)"),
    "cpu_mhz": (pa.float64(), "mean core clock during the kept attempts, MHz (NaN where the OS does not say)"),
    "backend": (
        pa.string(),
        "who generated: 'own' (specbench's engine), 'vllm', 'openai', 'vllm-server'; "
        "null in records written before backends existed (= own)",
    ),
    "concurrency": (
        pa.int64(),
        "requests in flight while the unit ran (1 for the own engine; null in old records = 1)",
    ),
    "ttft_s": (pa.float64(), "time to first token, s (own engine: prefill_s; vLLM: submission to first token)"),
    "itl_s": (pa.float64(), "mean inter-token latency of the request, s (decode time / (new_tokens - 1))"),
    # MoE targets (docs/results-schema.md "MoE targets"); null / NaN / [] for dense targets and old records
    "moe_experts": (pa.int64(), "MoE target: experts per layer E (null: dense target)"),
    "moe_top_k": (pa.int64(), "MoE target: experts each token selects per layer (null: dense target)"),
    "round_experts": (
        pa.list_(pa.float64()),
        "MoE target, per round: distinct experts the verify forward touched per layer, mean over layers",
    ),
    "experts_per_verify": (pa.float64(), "MoE target: mean of round_experts (NaN: dense target)"),
    "expert_bytes_per_verify": (
        pa.float64(),
        "MoE target: expert weight bytes one verify forward reads, "
        "Σ_layers distinct experts × one expert's bytes, mean over rounds",
    ),
    "expert_bytes_per_token": (pa.float64(), "MoE target: Σ expert bytes over rounds ÷ decode_tokens"),
    "moe_step_bytes": (
        pa.int64(),
        "MoE target: weight bytes one target-only forward streamed here (each MLP "
        "computed once; the expert-aware cost model's bandwidth reference)",
    ),
    "context_bin": (
        pa.string(),
        "context-length bin of a long-context prompt ('1k', '2k', '4k', '7k') or of a "
        "SPEED-Bench throughput split ('1k' … '32k'); null for other workloads and in "
        "records written before the column existed",
    ),
    # round strategy (docs/strategies.md); records written before it existed are sequential
    "strategy": (
        pa.string(),
        "how rounds were driven: 'sequential' or 'nested' (next draft prepared during verification)",
    ),
    "prepared": (pa.int64(), "nested: next-round drafts prepared per round (P); 0 sequential"),
    "prepared_drafts": (pa.int64(), "nested: next-round drafts prepared, summed over rounds; null sequential"),
    "prepared_hits": (
        pa.int64(),
        "nested: rounds that verified a prepared draft (its drafting hidden); null sequential",
    ),
    "draft_hidden_s": (pa.float64(), "nested: drafting time of the hit rounds, spent while the target verified, s"),
    "schedule": (
        pa.string(),
        "verify-length schedule (label, one per configuration): 'fixed' (every round drafts "
        "gamma), 'heuristic', 'threshold(threshold=T)', 'dspark'; gamma is its cap",
    ),
    "schedule_params": (pa.string(), "the schedule's parameters as sorted JSON ('{}' for fixed)"),
    "strategy_params": (
        pa.string(),
        "the round strategy's parameters as sorted JSON ('{}' sequential; nested: "
        "prepared; online: the plan, docs/strategies.md)",
    ),
    # stream workloads (docs/workloads.md "Streams"); null for other workloads and older records
    "stream_position": (pa.int64(), "stream workload: the prompt's position in the stream (0, 1, ...); null otherwise"),
    "stream_segment": (
        pa.string(),
        "stream workload: the label of the prompt's segment (a shift point is where it changes); null otherwise",
    ),
    # online adaptation (docs/strategies.md "Online adaptation"); null / NaN / [] for other strategies
    "drafter_version": (
        pa.int64(),
        "online: the drafter's version when the unit started (updates swapped in "
        "before it; 0 = the starting weights); null for other strategies",
    ),
    "online_train_s": (
        pa.float64(),
        "online: seconds of the drafter updates made during or right after the unit "
        "(training steps + swap), outside decode_s; NaN for other strategies",
    ),
    "online_train_tokens": (pa.int64(), "online: training positions those updates used, summed over their steps"),
    "update_round": (
        pa.list_(pa.int64()),
        "online, per update of the unit: rounds of the generation before it "
        "(its round count: at the end of the generation)",
    ),
    "update_s": (pa.list_(pa.float64()), "online, per update: seconds (training steps + swap)"),
    "update_tokens": (pa.list_(pa.int64()), "online, per update: training positions used"),
    "update_loss": (
        pa.list_(pa.float64()),
        "online, per update: mean over its steps of the accepted (distillation) loss",
    ),
    "update_reject_loss": (
        pa.list_(pa.float64()),
        "online, per update: mean of the rejected-draft term (NaN: not used or no rejection scored)",
    ),
    # adaptive sweeps (docs/fit.md "Sweeps that decide"); null for fixed grids and older records
    "stage": (
        pa.int64(),
        "adaptive sweep: the look of its workload this unit was measured for (1, 2, ...); null in a fixed grid",
    ),
    # load (docs/results-schema.md "Load"): serving backends; null for the own engine and older records
    "request_rate": (
        pa.float64(),
        "open loop: requests per second arriving while the unit ran (null: closed loop, "
        "concurrency requests in flight)",
    ),
    "arrival_s": (
        pa.float64(),
        "when the request arrived, s after its batch began (open loop: its scheduled "
        "arrival; closed loop: when a slot freed and it was sent)",
    ),
    "finish_s": (pa.float64(), "when the request's last token arrived, s after its batch began"),
    "latency_s": (pa.float64(), "request latency: finish_s - arrival_s (waiting for a slot, queue, prefill, decode)"),
    "batch_id": (pa.string(), "the batch (one configuration, load, workload turn) the request ran in"),
    "batch_requests": (pa.int64(), "requests in that batch"),
    "batch_output_tokens": (pa.int64(), "output tokens of the whole batch (Σ new_tokens of its requests)"),
    "batch_wall_s": (pa.float64(), "wall time of the whole batch: its first arrival to its last token, s"),
    # energy (docs/results-schema.md "Energy"): null where the machine has no energy counter and in older records
    "energy_j": (
        pa.float64(),
        "joules above idle the machine's energy counters measured while the unit ran (the "
        "kept attempts' mean; a serving record: its share of the batch's, by time in flight)",
    ),
    "idle_w": (pa.float64(), "idle power measured before the first timed unit and subtracted, W"),
    "energy_counter": (pa.string(), "the counters read: 'nvml: <GPU> (GPU i), ...', 'rapl: package-0, ...'"),
    "joules_per_token": (pa.float64(), "energy_j ÷ new_tokens: joules per output token"),
    "joules_per_accepted": (pa.float64(), "energy_j ÷ accepted: joules per accepted draft token (null: none accepted)"),
    # executors (docs/scale-out.md); null for units run in the sweep's own process and in older records
    "node": (pa.string(), "Ray executor: IP address of the node whose worker ran the unit (null: in-process)"),
    "node_device": (
        pa.string(),
        "Ray executor: the worker's device on its node, 'cpu' or 'GPU 0,1' (Ray's GPU ids; null: in-process)",
    ),
    "node_groups": (
        pa.int64(),
        "Ray executor: pieces of work (groups, timing blocks, replays) in flight on the "
        "node at once while this unit's piece ran, itself included (null: in-process)",
    ),
}

# the energy columns (docs/operating-cost.md): null together where no counter read a unit (`null_energy_columns`)
ENERGY_COLUMNS = ("energy_j", "idle_w", "energy_counter", "joules_per_token", "joules_per_accepted")


def null_energy_columns() -> dict[str, None]:
    """The energy columns of a record no energy counter measured (a replayed unit, a machine without one): all
    null. The one writer of them; the measured ones are `measure.timing.energy.energy_columns`'s."""
    return dict.fromkeys(ENERGY_COLUMNS)


# Columns added after schema 1's first release: records written without them (older folders,
# hand-made records) read back with these values.
LATER_DEFAULTS: dict[str, object] = {
    "weights_sha256": None,
    "backend": None,
    "concurrency": None,
    "ttft_s": None,
    "itl_s": None,
    "timing_ok": True,
    "timing_flag": "",
    "timing_attempts": 1,
    "timing_kept": 1,
    "attempt_decode_s": [],
    "attempt_other_cores": [],
    "load_1m": float("nan"),
    "other_cpu_s": float("nan"),
    "other_cores": float("nan"),
    "cpu_mhz": float("nan"),
    "moe_experts": None,
    "moe_top_k": None,
    "round_experts": [],
    "experts_per_verify": float("nan"),
    "expert_bytes_per_verify": float("nan"),
    "expert_bytes_per_token": float("nan"),
    "moe_step_bytes": None,
    "context_bin": None,
    "strategy": "sequential",
    "prepared": 0,
    "prepared_drafts": None,
    "prepared_hits": None,
    "draft_hidden_s": None,
    "schedule": "fixed",
    "schedule_params": "{}",
    "stage": None,
    "strategy_params": "{}",
    "stream_position": None,
    "stream_segment": None,
    "drafter_version": None,
    "online_train_s": float("nan"),
    "online_train_tokens": None,
    "update_round": [],
    "update_s": [],
    "update_tokens": [],
    "update_loss": [],
    "update_reject_loss": [],
    "request_rate": None,
    "arrival_s": None,
    "finish_s": None,
    "latency_s": None,
    "batch_id": None,
    "batch_requests": None,
    "batch_output_tokens": None,
    "batch_wall_s": None,
    "node": None,
    "node_device": None,
    "node_groups": None,
    **null_energy_columns(),
}

SCHEMA = pa.schema([pa.field(name, typ) for name, (typ, _) in COLUMNS.items()])
# what identifies a record and its configuration: never empty in a record specbench wrote (a file whose
# records lack one is damaged, and is refused in one line rather than crashing a reader)
KEY_COLUMNS = (
    "unit_id",
    "mode",
    "drafter",
    "drafter_label",
    "tree",
    "gamma",
    "temperature",
    "top_p",
    "top_k",
    "workload",
    "prompt_id",
    "turn",
    "repeat",
)
JSON_COLUMNS = ("drafter_params", "schedule_params")  # text columns holding a JSON object
RUN_INFO = "run.json"
RUN_INFO_MAX_BYTES = 16 * 2**20
RECORDS = "records"


# ----------------------------------------------------------------------------- atomic files


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """``data`` written whole at ``path`` (`specbench.safe_files.write_atomic`: never through a symlink)."""
    write_atomic(path, data)


def _table(records: list[dict]) -> pa.Table:
    missing = [c for c in COLUMNS if c not in records[0] and c not in LATER_DEFAULTS]
    if missing:
        raise ValueError(f"record lacks columns {missing}")
    return pa.Table.from_pylist([{c: r.get(c, LATER_DEFAULTS.get(c)) for c in COLUMNS} for r in records], schema=SCHEMA)


def atomic_write_parquet(path: Path, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


# ----------------------------------------------------------------------------- store


class ResultsStore:
    """Write side of a results folder (one sweep, possibly resumed or sharded)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.records_dir = self.folder / RECORDS

    def run_info(self) -> dict | None:
        path = self.folder / RUN_INFO
        if not path.exists():
            return None
        try:
            info = read_json(path, "results file", RUN_INFO_MAX_BYTES)
        except SpecbenchError as exc:
            raise SpecbenchError(f"{exc}; remove it or use another folder") from None
        return check_run_info(info, path)

    def write_run_info(self, info: dict) -> None:
        write_json(self.folder / RUN_INFO, info)

    def remove_stale_temporaries(self) -> int:
        """Delete temporary files a killed writer left behind (readers never look at them)."""
        stale = list(self.records_dir.glob(".*.parquet.*")) if self.records_dir.exists() else []
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)

    def write_unit(self, record: dict) -> None:
        with interrupts_deferred():  # Ctrl-C lands after the record is whole on disk
            atomic_write_parquet(self.records_dir / f"unit-{record['unit_id']}.parquet", _table([record]))

    def has_records(self) -> bool:
        return bool(record_files(self.folder))

    def archive_records(self, spec_hash: str) -> int:
        """Move the current records to ``records/old-SPEC_HASH/`` (what --force does); returns how many."""
        return archive_records(self.records_dir, record_files(self.folder), spec_hash)

    def finished_units(self) -> set[str]:
        if not self.records_dir.exists():
            return set()
        return set(load_records(self.folder, columns=["unit_id"])["unit_id"])

    def _next_part(self) -> Path:
        existing = sorted(self.records_dir.glob("part-*.parquet"))
        number = 1 + max((int(p.stem.split("-")[1]) for p in existing), default=0)
        return self.records_dir / f"part-{number:04d}.parquet"

    def consolidate(self) -> None:
        """Merge single-unit files into one part file; idempotent and crash safe."""
        units = sorted(self.records_dir.glob("unit-*.parquet"))
        if len(units) < 2:
            return
        table = pa.concat_tables([pq.read_table(p, schema=SCHEMA) for p in units])
        atomic_write_parquet(self._next_part(), table)
        for p in units:
            p.unlink(missing_ok=True)

    def replace_records(self, frame: pd.DataFrame) -> None:
        """Make ``frame`` the folder's only records: written as a new part, then the old files go."""
        old = record_files(self.folder)
        frame = frame.copy()
        for name, default in LATER_DEFAULTS.items():  # columns a caller's frame may lack or leave empty
            if name not in frame:
                frame[name] = None
            missing = (
                frame[name].isna()
                if not isinstance(default, list)
                else frame[name].map(lambda v: not isinstance(v, (list, tuple, np.ndarray)))
            )
            frame[name] = (
                frame[name]
                .astype(object)
                .where(~missing, pd.Series([default] * len(frame), index=frame.index, dtype=object))
            )
        atomic_write_parquet(
            self._next_part(), pa.Table.from_pandas(frame[list(COLUMNS)], schema=SCHEMA, preserve_index=False)
        )
        for p in old:
            p.unlink(missing_ok=True)


def record_files(folder: Path) -> list[Path]:
    records = Path(folder) / RECORDS
    return sorted(records.glob("part-*.parquet")) + sorted(records.glob("unit-*.parquet"))


def load_records(folder: str | Path, columns: list[str] | None = None) -> pd.DataFrame:
    """All records of a results folder as a DataFrame (duplicates by unit_id removed)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SpecbenchError(f"results folder not found: {folder}")
    wanted = None if columns is None else list(dict.fromkeys(["unit_id", *columns]))
    for _attempt in range(5):  # a writer may consolidate unit files into a part while we list them
        files = record_files(folder)
        if not files:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in (columns or COLUMNS)})
        tables = []
        try:
            for path in files:
                try:
                    table = _with_later_columns(pq.read_table(path, columns=wanted, schema=SCHEMA), wanted)
                    _check_keys(table, path)
                    tables.append(table)
                except FileNotFoundError:
                    raise
                except (OSError, pa.ArrowException) as exc:
                    if not path.exists():
                        raise FileNotFoundError(path) from None
                    reason = " ".join(str(exc).split())[:200]
                    raise SpecbenchError(f"broken results file {path}: {reason}") from None
        except FileNotFoundError:
            continue
        break
    else:
        raise SpecbenchError(f"{folder}: record files keep changing while being read; try again")
    frame = pa.concat_tables(tables).to_pandas()
    frame = frame.drop_duplicates("unit_id", keep="last").reset_index(drop=True)
    return frame if columns is None else frame[columns]


def _check_keys(table: pa.Table, path: Path) -> None:
    """Refuse a record file whose records lack a key column, or whose JSON columns are not JSON objects
    (a damaged or foreign file: readers parse them)."""
    for name in KEY_COLUMNS:
        if name in table.column_names and table.column(name).null_count:
            raise SpecbenchError(
                f"broken results file {path}: {table.column(name).null_count} record(s) have no "
                f"{name}; remove the file or rerun the sweep"
            )
    for name in JSON_COLUMNS:
        if name not in table.column_names:
            continue
        for text in table.column(name).unique().to_pylist():
            try:
                ok = text is None or isinstance(json.loads(text or "{}"), dict)
            except (ValueError, RecursionError):
                ok = False
            if not ok:
                raise SpecbenchError(
                    f"broken results file {path}: {name} {str(text)[:40]!r} is not a JSON object; "
                    "remove the file or rerun the sweep"
                )


def _with_later_columns(table: pa.Table, wanted: list[str] | None) -> pa.Table:
    """A table of a file written before `LATER_DEFAULTS`' columns existed, with them filled in."""
    for name in wanted or COLUMNS:
        if name in LATER_DEFAULTS and (name not in table.column_names or table.column(name).null_count == len(table)):
            column = pa.array([LATER_DEFAULTS[name]] * len(table), type=COLUMNS[name][0])
            if name in table.column_names:
                table = table.set_column(table.column_names.index(name), name, column)
            else:
                table = table.append_column(pa.field(name, COLUMNS[name][0]), column)
    return table.select(wanted or list(COLUMNS))


def load_run_info(folder: str | Path) -> dict:
    if not Path(folder).is_dir():
        raise SpecbenchError(f"results folder not found: {folder}")
    info = ResultsStore(folder).run_info()
    note_set_aside(folder)  # readers say how many records of an earlier spec they leave out
    if info is None:
        raise SpecbenchError(f"{folder} is not a results folder (no {RUN_INFO})")
    return info

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
import os
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specbench.errors import SpecbenchError

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
    "round_drafted": (pa.list_(pa.int64()), "per round: draft tokens (tree nodes) offered"),
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
    "backend": (pa.string(), "who generated: 'own' (specbench's engine), 'vllm', 'openai', 'vllm-server'; "
                             "null in records written before backends existed (= own)"),
    "concurrency": (pa.int64(), "requests in flight while the unit ran (1 for the own engine; null in old records = 1)"),
    "ttft_s": (pa.float64(), "time to first token, s (own engine: prefill_s; vLLM: submission to first token)"),
    "itl_s": (pa.float64(), "mean inter-token latency of the request, s (decode time / (new_tokens - 1))"),
}

SCHEMA = pa.schema([pa.field(name, typ) for name, (typ, _) in COLUMNS.items()])
RUN_INFO = "run.json"
RECORDS = "records"


# ----------------------------------------------------------------------------- atomic files

def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; results are ordinary files
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n").encode())


# Columns added after schema version 1's first release: null when a writer does not fill them
# (old records read back have them null too; docs/results-schema.md says what null means).
ADDED_NULLABLE = ("backend", "concurrency", "ttft_s", "itl_s")


def _table(records: list[dict]) -> pa.Table:
    records = [r if all(c in r for c in ADDED_NULLABLE) else {**{c: None for c in ADDED_NULLABLE}, **r}
               for r in records]
    missing = [c for c in COLUMNS if c not in records[0]]
    if missing:
        raise ValueError(f"record lacks columns {missing}")
    return pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in records], schema=SCHEMA)


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
            return json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise SpecbenchError(f"{path} is unreadable ({exc}); remove it or use another folder") from None

    def write_run_info(self, info: dict) -> None:
        atomic_write_json(self.folder / RUN_INFO, info)

    def remove_stale_temporaries(self) -> int:
        """Delete temporary files a killed writer left behind (readers never look at them)."""
        stale = list(self.records_dir.glob(".*.parquet.*")) if self.records_dir.exists() else []
        for p in stale:
            p.unlink(missing_ok=True)
        return len(stale)

    def write_unit(self, record: dict) -> None:
        atomic_write_parquet(self.records_dir / f"unit-{record['unit_id']}.parquet", _table([record]))

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
        atomic_write_parquet(self._next_part(), pa.Table.from_pandas(frame[list(COLUMNS)], schema=SCHEMA,
                                                                      preserve_index=False))
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
    files = record_files(folder)
    if not files:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in (columns or COLUMNS)})
    wanted = None if columns is None else list(dict.fromkeys(["unit_id", *columns]))
    tables = []
    for path in files:
        try:
            tables.append(pq.read_table(path, columns=wanted, schema=SCHEMA))
        except (OSError, pa.ArrowException) as exc:
            raise SpecbenchError(f"broken results file {path}: {exc}") from None
    frame = pa.concat_tables(tables).to_pandas()
    frame = frame.drop_duplicates("unit_id", keep="last").reset_index(drop=True)
    return frame if columns is None else frame[columns]


def load_run_info(folder: str | Path) -> dict:
    if not Path(folder).is_dir():
        raise SpecbenchError(f"results folder not found: {folder}")
    info = ResultsStore(folder).run_info()
    if info is None:
        raise SpecbenchError(f"{folder} is not a results folder (no {RUN_INFO})")
    return info

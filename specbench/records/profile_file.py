"""The cost-profile folder: its file format, written and read without torch.

A profile folder holds ``run.json`` (what was measured and where: device, versions, grid, peak
bandwidth, load average; ``kind`` = `PROFILE_KIND`) and ``profile.parquet`` (one row per cell,
`COLUMNS`), written atomically like results, so a profile taken on a GPU machine is read
anywhere. `specbench.profile.profiler` measures one; `specbench.analysis.cost.profile` fits it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from specbench.errors import SpecbenchError
from specbench.records.store import atomic_write_parquet
from specbench.safe_files import read_json, write_json

PROFILE_KIND = "specbench-cost-profile"
SCHEMA_VERSION = 1
RUN_INFO = "run.json"
PROFILE_FILE = "profile.parquet"

# name -> (arrow type, meaning): the profile's one source of truth (docs/profile.md lists it)
COLUMNS: dict[str, tuple[pa.DataType, str]] = {
    "role": (pa.string(), "'target' or 'drafter'"),
    "model": (pa.string(), "architecture as given (alias, config path, hub id) or 'ngram'"),
    "measure": (
        pa.string(),
        "'verify' (target forward verifying `tokens` tokens per sequence), 'draft_step' "
        "(drafter forward over 1 token) or 'propose' (model-free proposal of `tokens` tokens)",
    ),
    "batch": (pa.int64(), "sequences decoded together (B)"),
    "context": (pa.int64(), "tokens already in the KV cache per sequence (c)"),
    "tokens": (
        pa.int64(),
        "'verify': verify_tokens, the tokens one target forward verifies per sequence (γ + 1 "
        "for a chain); 'draft_step': 1; 'propose': γ, the draft length asked",
    ),
    "repeats": (pa.int64(), "timed calls"),
    "median_s": (pa.float64(), "median seconds of one call"),
    "q1_s": (pa.float64(), "first quartile, s"),
    "q3_s": (pa.float64(), "third quartile, s"),
    "iqr_s": (pa.float64(), "interquartile range q3 - q1, s"),
    "min_s": (pa.float64(), "fastest call, s"),
    "mean_s": (pa.float64(), "mean, s"),
    "times_s": (pa.list_(pa.float64()), "every timed call, s, in order"),
    "weight_bytes": (pa.int64(), "weight bytes one forward streams (0 for model-free drafters)"),
    "kv_bytes": (pa.int64(), "KV-cache bytes one forward reads: 2·layers·kv_heads·head_dim·bytes·B·(c+tokens)"),
    "weight_gb_s": (pa.float64(), "weight_bytes ÷ median, GB/s"),
    "effective_gb_s": (pa.float64(), "(weight_bytes + kv_bytes) ÷ median, GB/s"),
    "peak_fraction": (pa.float64(), "effective_gb_s ÷ the device's peak bandwidth (run.json 'bandwidth')"),
    "memory_bytes": (pa.int64(), "CUDA max allocated in this (batch, context) block, or the CPU peak RSS so far"),
    "memory_kind": (pa.string(), "'cuda_max_allocated' or 'cpu_max_rss'"),
    "device_name": (pa.string(), "device the cell ran on"),
    "dtype": (pa.string(), "weights and cache dtype"),
}
SCHEMA = pa.schema([pa.field(name, typ) for name, (typ, _) in COLUMNS.items()])


@dataclass
class Profile:
    """A measured profile: one row per cell (`COLUMNS`) and what it ran on (run.json)."""

    frame: pd.DataFrame
    info: dict

    @property
    def target(self) -> str:
        return self.info["target"]["name"]

    @property
    def drafters(self) -> list[str]:
        return [d["name"] for d in self.info.get("drafters", [])]

    def rows(self, *, role: str | None = None, model: str | None = None, measure: str | None = None) -> pd.DataFrame:
        frame = self.frame
        for column, value in (("role", role), ("model", model), ("measure", measure)):
            if value is not None:
                frame = frame[frame[column] == value]
        return frame


def write_profile(folder: str | Path, profile: Profile) -> Path:
    """Store a profile: ``profile.parquet`` first, then ``run.json`` (its presence marks a complete profile)."""

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    frame = profile.frame.reindex(columns=list(COLUMNS))
    table = pa.Table.from_pandas(frame, schema=SCHEMA, preserve_index=False)
    atomic_write_parquet(folder / PROFILE_FILE, table)
    write_json(folder / RUN_INFO, profile.info)
    return folder


def load_profile(folder: str | Path) -> Profile:
    """Read a profile folder, refusing what is not one (one-line `SpecbenchError`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SpecbenchError(f"cost profile folder not found: {folder}")
    if not (folder / RUN_INFO).is_file():
        raise SpecbenchError(f"{folder} is not a cost profile (no {RUN_INFO}); take one with `specbench profile`")
    info = read_json(folder / RUN_INFO, "cost profile file")
    if not isinstance(info, dict) or info.get("kind") != PROFILE_KIND:
        raise SpecbenchError(
            f"{folder} is not a cost profile ({RUN_INFO} is not of kind '{PROFILE_KIND}'; "
            "a results folder goes first, the profile after --cost-profile)"
        )
    try:
        frame = pq.read_table(folder / PROFILE_FILE).to_pandas()
    except (OSError, pa.ArrowException) as exc:
        raise SpecbenchError(f"broken profile file {folder / PROFILE_FILE}: {exc}") from None
    missing = [c for c in ("role", "model", "measure", "batch", "context", "tokens", "median_s") if c not in frame]
    if missing:
        raise SpecbenchError(f"{folder / PROFILE_FILE} lacks column(s) {', '.join(missing)}")
    return Profile(frame=frame, info=info)


def summary_frame(profile: Profile) -> pd.DataFrame:
    """One row per (model, batch, context): the time at the smallest and largest ``tokens`` (for
    'verify' rows: verify_tokens), their ratio, GB/s and share of the peak at the smallest, and memory."""
    rows = []
    for (role, model, measure, batch, context), cell in profile.frame.groupby(
        ["role", "model", "measure", "batch", "context"], sort=False
    ):
        cell = cell.sort_values("tokens")
        first, last = cell.iloc[0], cell.iloc[-1]
        rows.append(
            {
                "role": role,
                "model": model,
                "measure": measure,
                "batch": int(batch),
                "context": int(context),
                "tokens_min": int(first["tokens"]),
                "tokens_max": int(last["tokens"]),
                "ms_tokens_min": 1e3 * first["median_s"],
                "iqr_ms_tokens_min": 1e3 * first["iqr_s"],
                "ms_tokens_max": 1e3 * last["median_s"],
                "ratio": last["median_s"] / first["median_s"] if first["median_s"] > 0 else float("nan"),
                "gb_s": first["effective_gb_s"],
                "peak_fraction": first["peak_fraction"],
                "memory_bytes": int(cell["memory_bytes"].max()),
                "memory_kind": first["memory_kind"],
            }
        )
    return pd.DataFrame(rows)

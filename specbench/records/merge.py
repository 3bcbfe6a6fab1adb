"""Combining results folders (shards of one sweep, or parts measured on several machines)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specbench.errors import SpecbenchError
from specbench.records.lock import FolderLock
from specbench.records.store import ResultsStore, load_records, load_run_info


def merge_folders(sources: list[Path], out: Path, *, force: bool = False) -> int:
    """Union of the records of ``sources`` (and of ``out`` if it exists) into ``out``.

    All folders must hold the same sweep spec (same spec hash) measured on the same device;
    ``force`` accepts different devices. Returns the number of distinct records.
    """
    if not sources:
        raise SpecbenchError("nothing to merge: give at least one results folder")
    with FolderLock(out):
        return _merge_locked(sources, out, force)


def _merge_locked(sources: list[Path], out: Path, force: bool) -> int:
    store = ResultsStore(out)
    existing = store.run_info()
    infos = [load_run_info(s) for s in sources] + ([existing] if existing else [])
    hashes = sorted({str(i.get("spec_hash")) for i in infos})
    if len(hashes) > 1:
        raise SpecbenchError(f"cannot merge results of different sweep specs ({', '.join(hashes)})")
    devices = sorted({str(i.get("device_name")) for i in infos})
    if len(devices) > 1 and not force:
        raise SpecbenchError(f"results were measured on different devices ({', '.join(devices)}); "
                             "their timings do not compare (use --force to merge anyway)")
    frames = [load_records(s) for s in sources] + ([load_records(out)] if existing else [])
    merged = pd.concat(frames, ignore_index=True).drop_duplicates("unit_id", keep="last")
    info = dict(infos[0])
    info["shards"] = sorted({tuple(s) for i in infos for s in i.get("shards", [])})
    info["created"] = min(i.get("created", "") for i in infos)
    info["updated"] = max(i.get("updated", "") for i in infos)
    info["models"] = {k: v for i in infos if isinstance(i.get("models"), dict) for k, v in i["models"].items()}
    info["merged_from"] = sorted({str(s) for s in sources} | set((existing or {}).get("merged_from", [])))
    store.write_run_info(info)
    store.replace_records(merged)
    return len(merged)

"""Combining results folders (shards of one sweep, or parts measured on several machines).

Every source is checked before anything is written, by the one check of what folders are and which may go
together (`specbench.records.identity.check_together`): it must be a sweep's results folder, a shard or a merge
(a cost profile is refused, and so is a confirmation, whose fresh prompts are never a shard; and an output folder
that holds either), of the same sweep spec, on the same device (``force`` accepts different devices), with a
well-formed ``shards`` list in its run.json. The merged run.json records its role, ``merged``. An adaptive sweep's shards
carry their stopping histories (``adaptive.json``, `specbench.records.adaptive_history`); a merge combines
them (`merge_histories`) so that `recommend` judges the merged records the way the looks were planned —
a mix of adaptive and fixed-grid folders is refused.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specbench.errors import SpecbenchError
from specbench.records.adaptive_history import read_history, write_history
from specbench.records.identity import MERGED, check_together, identify
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


def _shards(info: dict, folder: Path) -> list[tuple[int, int]]:
    """The run.json's ``shards`` as (index, count) pairs; a malformed list is one line naming the folder."""
    raw = info.get("shards")
    if raw is None:
        return []
    pairs = []
    if isinstance(raw, list):
        for item in raw:
            if (
                isinstance(item, (list, tuple))
                and len(item) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in item)
                and 0 <= item[0] < item[1]
            ):
                pairs.append((int(item[0]), int(item[1])))
            else:
                break
        else:
            return pairs
    raise SpecbenchError(f"{folder}/run.json: 'shards' must be a list of [index, count] pairs, got {str(raw)[:80]}")


def _merge_locked(sources: list[Path], out: Path, force: bool) -> int:
    store = ResultsStore(out)
    existing = store.run_info()
    folders = [Path(s) for s in sources] + ([Path(out)] if existing else [])
    infos = [load_run_info(s) for s in sources] + ([existing] if existing else [])
    identities = [identify(folder, info) for folder, info in zip(folders, infos)]
    if existing is not None:  # the output first: a profile there is named as the output, not as a spec mismatch
        check_together("merge", identities[-1])
    check_together("merge", *identities, force=force)
    shards = {pair for folder, info in zip(folders, infos) for pair in _shards(info, folder)}
    histories = [read_history(folder) for folder in folders]
    if any(h is not None for h in histories) and not all(h is not None for h in histories):
        adaptive = [str(f) for f, h in zip(folders, histories) if h is not None]
        raise SpecbenchError(
            f"cannot merge adaptive and fixed-grid results: only {', '.join(adaptive)} hold a "
            "stopping history (adaptive.json)"
        )
    frames = [load_records(s) for s in sources] + ([load_records(out)] if existing else [])
    merged = pd.concat(frames, ignore_index=True)
    _check_unit_ids(merged)
    merged = merged.drop_duplicates("unit_id", keep="last")
    info = dict(infos[0])
    info["shards"] = sorted(shards)
    info["role"] = MERGED
    info["created"] = _earliest_or_latest(infos, "created", min)
    info["updated"] = _earliest_or_latest(infos, "updated", max)
    info["models"] = {k: v for i in infos if isinstance(i.get("models"), dict) for k, v in i["models"].items()}
    info["merged_from"] = sorted({str(s) for s in sources} | set((existing or {}).get("merged_from", [])))
    store.write_run_info(info)
    store.replace_records(merged)
    found = [h for h in histories if h is not None]
    if histories and len(found) == len(histories):  # adaptive shards (a mix is refused before anything is written)
        write_history(out, merge_histories(found))
    return len(merged)


def _check_unit_ids(records: pd.DataFrame) -> None:
    """A unit id names one unit: the same id under two targets would make the merge keep one and drop the other
    (parts of a target set written before their ids carried the target's type): refused in one line."""
    if records.empty or "target" not in records.columns:
        return
    targets = records.groupby("unit_id")["target"].nunique()
    if (targets > 1).any():
        raise SpecbenchError(
            f"{int((targets > 1).sum())} unit id(s) appear under different targets "
            f"({', '.join(sorted(map(str, records['target'].unique())))}): measure each part again with this version "
            "(its unit ids carry the target's type) before merging"
        )


def _earliest_or_latest(infos: list[dict], key: str, pick) -> str | None:
    """The earliest (``min``) or latest (``max``) of the sources' ``key`` dates; a source without one (null, absent,
    not text) does not count, and none at all gives null — never the text "None"."""
    dates = [i[key] for i in infos if isinstance(i.get(key), str) and i[key]]
    return pick(dates) if dates else None


def _summed(lists: list[list[int]]) -> list[int]:
    """Element-wise sums of per-look counts; a shard that planned fewer looks counts its last one further."""
    lists = [list(x) for x in lists if x]
    if not lists:
        return []
    looks = max(len(x) for x in lists)
    return [sum(x[min(i, len(x) - 1)] for x in lists) for i in range(looks)]


def merge_histories(histories: list[dict]) -> dict:
    """One stopping history for the shards' union: per workload the planned prompts of each look — the unsharded
    sweep's plan each shard recorded (``planned_whole``: a shard plans its share of each of those looks), else the
    shards' planned prompts summed — the plan `recommend` adjusts its verdict for; calibration prompts summed; the
    dropped
    configurations united, and per look the prompts and seconds summed, each shard's own answer kept under
    ``shards``. ``finished`` when every shard finished; ``elapsed_s`` the longest shard's."""
    merged: dict = {
        "plan": histories[0].get("plan"),
        "elapsed_s": max(float(h.get("elapsed_s") or 0.0) for h in histories),
        "finished": all(bool(h.get("finished")) for h in histories),
        "merged_shards": len(histories),
        "workloads": {},
    }
    names = list(dict.fromkeys(name for h in histories for name in (h.get("workloads") or {})))
    for name in names:
        entries = [h["workloads"][name] for h in histories if name in (h.get("workloads") or {})]
        statuses = list(dict.fromkeys(str(e.get("status", "open")) for e in entries))
        looks = []
        for i in range(max(len(e.get("looks") or []) for e in entries)):
            parts = [e["looks"][i] for e in entries if len(e.get("looks") or []) > i]
            looks.append(
                {
                    "look": i + 1,
                    "prompts": sum(int(p.get("prompts") or 0) for p in parts),
                    "calibration_prompts": sum(int(p.get("calibration_prompts") or 0) for p in parts) or None,
                    "seconds": sum(float(p.get("seconds") or 0.0) for p in parts),
                    "answer": parts[0].get("answer")
                    if len({str(p.get("answer")) for p in parts}) == 1
                    else "shards differ",
                    "dropped": sorted({d for p in parts for d in (p.get("dropped") or [])}),
                    "shards": parts,
                }
            )
        wholes = {tuple(e.get("planned_whole") or ()) for e in entries}
        whole = list(wholes.pop()) if len(wholes) == 1 and () not in wholes else None
        merged["workloads"][name] = {
            # the unsharded sweep's plan where the shards name it (each planned its share of it), else their sum
            "planned": whole or _summed([e.get("planned") or [] for e in entries]),
            "calibration": _summed([e.get("calibration") or [] for e in entries]),
            "status": statuses[0] if len(statuses) == 1 else " / ".join(statuses),
            "dropped": sorted({d for e in entries for d in (e.get("dropped") or [])}),
            "seconds": sum(float(e.get("seconds") or 0.0) for e in entries),
            "looks": looks,
        }
    return merged

"""Content of an earlier spec or kind, set aside by ``--force``; and what a results run.json must hold.

``sweep --force`` on a folder holding another sweep spec moves its record files into
``records/old-SPEC_HASH/`` (under the writer lock) instead of pooling them with the new spec's.
Readers list ``records/*.parquet`` only, so they see the current spec's records alone, and
`note_set_aside` tells on stderr how many records were set aside.

``--force`` across kinds — ``profile`` over a sweep's folder, ``sweep`` over a profile's — moves
the whole earlier content (run.json, records/, profile.parquet, backend.json, reports, ...) into
``old-KIND-TAG/`` beside it (`set_aside_folder`), so that neither kind's run.json is overwritten
by the other and nothing measured is lost.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq

from specbench.errors import SpecbenchError, note

ARCHIVE_PREFIX = "old-"
_noted: set[str] = set()


def archive_folder(records_dir: Path, spec_hash: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9]", "", str(spec_hash))[:32] or "unknown"
    return records_dir / f"{ARCHIVE_PREFIX}{safe}"


def archive_records(records_dir: Path, files: list[Path], spec_hash: str) -> int:
    """Move record ``files`` into ``records_dir/old-SPEC_HASH/``; returns the records moved."""
    if not files:
        return 0
    rows = count_rows(files)
    target = archive_folder(records_dir, spec_hash)
    target.mkdir(parents=True, exist_ok=True)
    for path in files:
        destination = target / path.name
        n = 1
        while destination.exists():  # a second --force of the same old spec: keep both
            destination = target / f"{path.stem}.{n}{path.suffix}"
            n += 1
        path.rename(destination)
    return rows


def set_aside_folder(folder: str | Path, kind: str, tag: str, keep: tuple[str, ...] = ()) -> Path | None:
    """Move every entry of ``folder`` but ``keep`` and earlier ``old-*`` folders into
    ``folder/old-KIND-TAG/`` (a new name when that exists); returns it, or None when nothing moved."""
    folder = Path(folder)
    entries = [p for p in sorted(folder.iterdir()) if p.name not in keep and not p.name.startswith(ARCHIVE_PREFIX)]
    if not entries:
        return None
    name = re.sub(r"[^A-Za-z0-9]", "", str(kind))[:20] or "run"
    base = f"{ARCHIVE_PREFIX}{name}-{re.sub(r'[^A-Za-z0-9]', '', str(tag))[:32] or 'unknown'}"
    target, n = folder / base, 1
    while target.exists():
        target, n = folder / f"{base}.{n}", n + 1
    target.mkdir()
    for path in entries:
        path.rename(target / path.name)
    return target


def count_rows(files: list[Path]) -> int:
    total = 0
    for path in files:
        try:
            total += pq.ParquetFile(path).metadata.num_rows
        except Exception:  # noqa: BLE001 - a damaged archived file still counts as set aside
            continue
    return total


def set_aside(folder: str | Path) -> int:
    """Records of earlier specs kept in ``records/old-*/`` (not read)."""
    records = Path(folder) / "records"
    try:
        files = sorted(records.glob(f"{ARCHIVE_PREFIX}*/*.parquet"))
    except OSError:
        return 0
    return count_rows(files) if files else 0


def note_set_aside(folder: str | Path) -> None:
    """Say once per folder and process how many records of earlier specs a reader leaves out."""
    key = str(Path(folder).resolve())
    if key in _noted:
        return
    _noted.add(key)
    count = set_aside(folder)
    if count:
        note(
            f"{count} record(s) of an earlier sweep spec are set aside in "
            f"{Path(folder) / 'records' / (ARCHIVE_PREFIX + '*')} and not counted"
        )


def check_run_info(info, path: Path) -> dict:
    """A results run.json: a mapping with a spec hash and a sweep mapping (or a cost profile's kind)."""
    if not isinstance(info, dict):
        raise SpecbenchError(
            f"{path} holds {type(info).__name__} {str(info)[:40]!r}, not a specbench run.json "
            "mapping; remove it or use another folder"
        )
    if info.get("kind") == "specbench-cost-profile":
        return info
    if "sweep" not in info:
        raise SpecbenchError(
            f"{path} is not a specbench results run.json (it lacks sweep); remove it or use another folder"
        )
    if not isinstance(info["sweep"], (dict, str)) or not isinstance(info.get("spec_hash", ""), str):
        raise SpecbenchError(
            f"{path} is not a specbench results run.json (malformed sweep or spec_hash); remove "
            "it or use another folder"
        )
    return info

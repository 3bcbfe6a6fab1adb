"""What the readers of prepared-data workloads share: a `Row`, the `DataSource` (a prepared folder or the
hub, with the one-line "how to get it" when neither is here) and turning a record's prompt into turns.
The readers are ``workload_speed_bench`` and ``workload_speculator_benchmarks``; `workload_prepared` picks
one by the workload's layout and makes prompts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.models.resolve import hub_reachable
from specbench.workloads.readers.prepared_spec import PreparedSpec
from specbench.workloads.readers.sources import SourceUnavailable, read_hf


@dataclass(frozen=True)
class Row:
    """One prompt record of a prepared set."""

    id: str  # stable within its config (a question id, or file and row number)
    category: str
    turns: tuple[str, ...]


class DataSource:
    """Where one workload's data is read from: a folder (``folder`` set) or the hub; its ``missing`` line
    says how to get the data."""

    def __init__(self, spec: PreparedSpec):
        self.spec = spec
        self.folder, named_by = spec.folder()
        if self.folder is not None and not self.folder.is_dir():
            raise SpecbenchError(
                f"workload {spec.name}: the data folder {self.folder} (from {named_by}) does not exist; {spec.get}"
            )
        if self.folder is None and (spec.hub_dataset is None or not hub_reachable()):
            raise SpecbenchError(
                self.missing(f"no data folder ({spec.folder_variable} is not set) and the hub is not reachable")
            )

    def missing(self, what: str) -> str:
        return f"workload {self.spec.name}: {what}; {self.spec.get}"

    def hub_rows(self, config: str | None = None, data_files: str | None = None) -> list[dict]:
        """Rows of the hub dataset (``config`` one of its configs, ``data_files`` one of its files)."""
        try:
            return read_hf(self.spec.hub_dataset, self.spec.hub_split, config=config, data_files=data_files)
        except SourceUnavailable as exc:
            raise SpecbenchError(self.missing(str(exc))) from None

    def describe_hub(self, part: str) -> str:
        return f"hf:{self.spec.hub_dataset}:{part}"


def turns_of(value, where: str) -> tuple[str, ...]:
    """User turns from a text, a list of texts or a list of chat messages (``{role, content}``: the user's)."""
    if isinstance(value, str):
        turns = (value,)
    elif isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
        turns = tuple(value)
    elif isinstance(value, (list, tuple)) and all(isinstance(m, dict) for m in value):
        # a message without text (content null, or a list of parts) is no turn, never the text "None"
        turns = tuple(
            m["content"] for m in value if m.get("role", "user") == "user" and isinstance(m.get("content"), str)
        )
    else:
        raise SpecbenchError(
            f"{where}: the prompt must be a text, a list of texts or chat messages, got {type(value).__name__}"
        )
    return tuple(t for t in turns if t.strip())


def folder_files(folder: Path, pattern: str) -> list[Path]:
    return sorted(p for p in folder.glob(pattern) if p.is_file())

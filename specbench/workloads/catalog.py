"""Workloads: named prompt sets (``workloads/*.yaml``, user files, ``jsonl:`` / ``hf:`` sources).

`load_workload` reads a workload's records, turns them into `Prompt`s, keeps one partition
(``eval`` for sweeps, ``train`` for drafter training, or ``all``) and samples a subset:

* the partition is a pure function of the prompt id: a prompt is ``train`` when
  ``sha256(prompt_id)`` falls in the first ``train_percent`` of 100 buckets, so the two sides
  never overlap and never move when the source grows;
* sampling ranks prompts by ``sha256(f"{seed}:{prompt_id}")`` and keeps the first ``count``,
  so it is deterministic and nested: a smaller count is a prefix of a larger one.

`encode_turn` builds the token ids of one turn through `specbench.models.prompting`, the same code
path the engine uses for text prompts.

A long-context workload (a YAML with a ``long_context`` section, `specbench.workloads.long_context`)
has one prompt per (document, task) and length bin: partition and sampling pick (document, task)
pairs, then every chosen pair is asked in every bin, and `encode_turn` cuts its document to the
bin with the target's tokenizer. A name may select bins and tasks: ``long-context:bin=4k``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench.errors import SpecbenchError, did_you_mean
from specbench.models.prompting import encode_conversation
from specbench.workloads import long_context
from specbench.workloads.long_context_spec import LongContextSpec, select
from specbench.workloads.prompt import Prompt
from specbench.workloads.readers import prepared_spec
from specbench.workloads.readers.prepared import prepared_prompts
from specbench.workloads.readers.prepared_spec import PreparedSpec
from specbench.workloads.readers.sources import read_records
from specbench.workloads.spec import (
    WorkloadSpec,
    builtin_names,
    builtin_spec,
    is_user_source,
    parse_user_source,
    read_spec_file,
)
from specbench.workloads.stream import StreamSpec, refuse_inner_streams, stream_prompts

SPLITS = ("eval", "train", "all")
TRAIN_BUCKETS = 100


@dataclass
class Workload:
    """A loaded prompt set, ready for a sweep."""

    name: str
    description: str
    source: str  # where the prompts were read from (package==version:file, hf:..., jsonl:...)
    chat: bool  # apply the tokenizer's chat template
    max_new_tokens: int
    prompts: list[Prompt]

    @property
    def n_turns(self) -> int:
        """Total number of user turns over all prompts."""
        return sum(len(p.turns) for p in self.prompts)

    @property
    def categories(self) -> list[str]:
        return sorted({p.category for p in self.prompts})


def workload_names() -> list[str]:
    """Names of the built-in workloads."""
    return builtin_names()


def load_workload(
    name_or_source: str, *, count: int | None = None, seed: int | None = None, split: str = "eval"
) -> Workload:
    """Load a workload: a built-in name, a workload YAML file, ``jsonl:PATH[:...]`` or ``hf:DATASET[:SPLIT][:...]``.

    ``count`` and ``seed`` default to the workload's ``sampling``; a ``count`` of None keeps
    every prompt of the split in source order, a count keeps that many (at most all) in
    sample order. ``split`` is ``eval`` (what sweeps use), ``train`` or ``all``.
    """
    if split not in SPLITS:
        raise SpecbenchError(
            f"unknown split '{split}'{did_you_mean(split, list(SPLITS))} (splits: {', '.join(SPLITS)})"
        )
    if count is not None and count < 1:
        raise SpecbenchError(f"count must be at least 1, got {count}")
    spec = resolve_spec(name_or_source)
    if isinstance(spec, StreamSpec):  # other workloads' prompts in a fixed order: their own sampling and split
        prompts, source = stream_prompts(spec, count, seed, split, load_workload)
        return Workload(
            name=spec.name,
            description=spec.description,
            source=source,
            chat=spec.chat,
            max_new_tokens=spec.max_new_tokens,
            prompts=prompts,
        )
    if isinstance(spec, LongContextSpec):
        prompts, source = long_context.pair_prompts(spec)  # (document, task) pairs: binned after sampling
    elif isinstance(spec, PreparedSpec):
        prompts, source = prepared_prompts(spec)  # a folder other projects' scripts prepared, or the hub
    else:
        records, source = read_records(spec)
        prompts = records_to_prompts(records, spec)
    if not prompts:
        raise SpecbenchError(f"workload {spec.name}: {source} yields no prompts")
    prompts = [p for p in prompts if split == "all" or (split == "train") == in_train(p.prompt_id, spec.train_percent)]
    if not prompts:
        raise SpecbenchError(
            f"workload {spec.name} has no prompts in split '{split}' (train_percent is {spec.train_percent})"
        )
    count = spec.count if count is None else count
    if count is not None:
        prompts = sample(prompts, count, spec.seed if seed is None else seed)
    if isinstance(spec, LongContextSpec):
        prompts = long_context.in_bins(prompts, spec)
    return Workload(
        name=spec.name,
        description=spec.description,
        source=source,
        chat=spec.chat,
        max_new_tokens=spec.max_new_tokens,
        prompts=prompts,
    )


def resolve_spec(name_or_source: str) -> WorkloadSpec | LongContextSpec | PreparedSpec | StreamSpec:
    """The spec behind a workload name, YAML path or user source string (`_spec_of`); a stream's segments are
    resolved too, and one that is a stream itself is refused (`specbench.workloads.stream.refuse_inner_streams`)."""
    spec = _spec_of(name_or_source)
    return refuse_inner_streams(spec, _spec_of) if isinstance(spec, StreamSpec) else spec


def _spec_of(name_or_source: str) -> WorkloadSpec | LongContextSpec | PreparedSpec | StreamSpec:
    """The spec behind a workload name, YAML path or user source string.

    A built-in name or YAML path may end in ``:key=value`` options: a long-context workload's bins and
    tasks (``long-context:bin=4k``, `specbench.workloads.long_context_spec.select`), a prepared-data
    workload's configs, categories and data folder (``speed-bench:category=coding:data=DIR``,
    `specbench.workloads.readers.prepared_spec.select`); other workloads take none.
    """
    text = str(name_or_source).strip()
    if not text:
        raise SpecbenchError("empty workload name")
    if is_user_source(text):
        return parse_user_source(text)
    base, options = split_options(text)
    if options:
        spec = _spec_of(base)
        if isinstance(spec, PreparedSpec):
            return prepared_spec.select(spec, options, text)
        if not isinstance(spec, LongContextSpec):
            raise SpecbenchError(
                f"workload {spec.name} takes no options ('{text}'); only long-context and "
                "prepared-data workloads do (e.g. long-context:bin=4k, speed-bench:category=coding)"
            )
        return select(spec, options, text)
    names = builtin_names()
    if text in names:
        return builtin_spec(text)
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml"):
        return read_spec_file(path)
    if path.suffix in (".jsonl", ".gz", ".json", ".parquet", ".csv") and path.exists():
        raise SpecbenchError(f"'{text}' is a data file: use jsonl:{text} (JSON lines) or hf:{text}")
    raise SpecbenchError(
        f"unknown workload '{text}'{did_you_mean(text, names)} (built-in: {', '.join(names)}; "
        "or a workload .yaml file, jsonl:PATH, hf:DATASET)"
    )


def split_options(text: str) -> tuple[str, dict[str, str]]:
    """``name:key=value:key=value`` → (name, options); a text without ``=`` parts is a name alone."""
    parts = text.split(":")
    options: dict[str, str] = {}
    while len(parts) > 1 and "=" in parts[-1]:
        key, _, value = parts.pop().partition("=")
        if key.strip() in options:
            raise SpecbenchError(f"option '{key.strip()}' given twice in '{text}'")
        options[key.strip()] = value.strip()
    return ":".join(parts), dict(reversed(list(options.items())))


# ----------------------------------------------------------------------------- records → prompts


def records_to_prompts(records: list[dict], spec: WorkloadSpec) -> list[Prompt]:
    """Map records through ``spec.fields``; drop turns outside the length bounds, repeated ids and repeated texts."""
    prompts: list[Prompt] = []
    seen_ids: set[str] = set()
    seen_texts: set[tuple[str, ...]] = set()
    for index, record in enumerate(records):
        turns = _turns_of(record, spec, index)
        if not all(_length_ok(t, spec) for t in turns):
            continue
        record_id = index if spec.fields.id is None else _field(record, spec.fields.id, spec, index)
        prompt_id = spec.id_format.format(workload=spec.name, id=record_id)
        text_key = tuple(" ".join(t.split()) for t in turns)
        if prompt_id in seen_ids or text_key in seen_texts:
            continue
        seen_ids.add(prompt_id)
        seen_texts.add(text_key)
        category = (
            spec.category if spec.fields.category is None else str(_field(record, spec.fields.category, spec, index))
        )
        prompts.append(Prompt(workload=spec.name, prompt_id=prompt_id, category=category, turns=turns))
    return prompts


def _field(record: dict, name: str, spec: WorkloadSpec, index: int) -> Any:
    if name not in record:
        fields = [str(k) for k in record]
        raise SpecbenchError(
            f"workload {spec.name}: record {index} has no field '{name}'{did_you_mean(name, fields)}"
            f" (fields: {', '.join(fields)})"
        )
    return record[name]


def _turns_of(record: dict, spec: WorkloadSpec, index: int) -> tuple[str, ...]:
    value = _field(record, spec.fields.turns, spec, index)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(isinstance(t, str) for t in value):
        return tuple(value)
    raise SpecbenchError(
        f"workload {spec.name}: field '{spec.fields.turns}' of record {index} must be a text "
        f"or a list of texts, got {type(value).__name__}"
    )


def _length_ok(turn: str, spec: WorkloadSpec) -> bool:
    n = len(turn.strip())
    return n >= spec.min_chars and (spec.max_chars is None or n <= spec.max_chars)


# ----------------------------------------------------------------------------- partition and sampling


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def in_train(prompt_id: str, train_percent: int) -> bool:
    """Whether a prompt belongs to the training partition (stable across runs and machines)."""
    return _digest(prompt_id) % TRAIN_BUCKETS < train_percent


def sample(prompts: list[Prompt], count: int, seed: int) -> list[Prompt]:
    """``count`` prompts (at most all of them) ranked by a seeded hash of their id."""
    return sorted(prompts, key=lambda p: _digest(f"{seed}:{p.prompt_id}"))[:count]


# ----------------------------------------------------------------------------- tokenization


def encode_turn(
    tokenizer,
    workload: Workload,
    prompt: Prompt,
    turn: int,
    previous_answers: list[str],
    *,
    token_limit: int | None = None,
) -> list[int]:
    """Token ids asking for the answer to ``prompt.turns[turn]`` (0-based).

    ``previous_answers`` holds the model's own answers to the earlier turns, one per turn
    (MT-Bench asks turn 2 after the model's turn-1 answer). The chat template is applied
    when the workload says so and the tokenizer has one. A long-context prompt's document is
    cut to its bin, and to ``token_limit`` (the context window less max_new_tokens) when given.
    """
    if not 0 <= turn < len(prompt.turns):
        raise ValueError(f"{prompt.prompt_id} has {len(prompt.turns)} turn(s); turn {turn} does not exist")
    if len(previous_answers) != turn:
        raise ValueError(f"turn {turn} needs {turn} previous answer(s), got {len(previous_answers)}")
    if prompt.context is not None:
        return long_context.encode_long_context(tokenizer, prompt, chat=workload.chat, token_limit=token_limit)
    chat = workload.chat if prompt.chat is None else prompt.chat  # a stream's prompts keep their workload's
    return encode_conversation(tokenizer, list(prompt.turns[: turn + 1]), list(previous_answers), chat=chat)

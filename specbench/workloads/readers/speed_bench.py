"""SPEED-Bench (NVIDIA; hub dataset ``nvidia/SPEED-Bench``) read from a prepared folder or the hub.

SPEED-Bench's configs: ``qualitative`` (880 prompts, 80 in each of 11 categories: coding, humanities,
math, multilingual, qa, rag, reasoning, roleplay, stem, summarization, writing) and the throughput
splits ``throughput_1k`` … ``throughput_32k`` (1,536 prompts each at about 1k … 32k input tokens, 512 in
each entropy tier: low_entropy, mixed, high_entropy — the tier is the row's ``category``). Many prompts
cannot be redistributed: the hub rows of those hold a placeholder, and NVIDIA's ``prepare.py`` (in
NVIDIA-NeMo/Skills, ``nemo_skills/dataset/speed-bench/prepare.py``) fetches their sources and writes the
whole set. The folder layouts read here, both as those scripts write them:

* NVIDIA's ``prepare.py --output_dir DIR`` — one JSON-lines file per config, ``DIR/<config>.jsonl``, a
  record per prompt with ``question_id``, ``category``, ``sub_category`` and ``messages`` (the user turns as
  chat messages; older copies: ``turns``). Row ids are the question ids; every turn is kept.
* the speculators project's ``scripts/evaluate/prepare_speedbench.py --data-dir DIR`` (run after the
  above, or with ``--download``) — that file split per category, ``DIR/<config>_<category>.jsonl``
  (qualitative) and ``DIR/<config>_<tier>__<sub_category>.jsonl`` (throughput), each row only
  ``{"turns": <first turn>}``. Row ids are ``<file key>/<row number>``; the category is the part before
  ``__``. Where a folder has both, the flat file is read (it keeps ids and every turn).

A prompt still holding the placeholder means the folder was not materialised: one line says so. From the
hub (where the machine is online, no folder) only the rows with their text are kept.
"""

from __future__ import annotations

from specbench.errors import SpecbenchError
from specbench.workloads.readers.prepared_rows import DataSource, Row, folder_files, turns_of
from specbench.workloads.readers.prepared_spec import PreparedConfig
from specbench.workloads.readers.sources import read_jsonl

PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE"  # SPEED-Bench's text of a held-back prompt
TIER_SEPARATOR = "__"  # prepare_speedbench.py's file key: <tier>__<sub_category>


def _flat_row(record: dict, index: int, where: str) -> Row:
    turns = turns_of(
        record.get("messages") if record.get("messages") is not None else record.get("turns"), f"{where} row {index}"
    )
    return Row(id=str(record.get("question_id", index)), category=str(record.get("category") or "unknown"), turns=turns)


def _held_back(rows: list[Row]) -> int:
    return sum(1 for row in rows if any(PLACEHOLDER in turn for turn in row.turns))


def read(source: DataSource, config: PreparedConfig, categories) -> tuple[list[Row], str]:
    """Rows of one SPEED-Bench config and where they came from."""
    if source.folder is None:
        rows = [_flat_row(r, i, source.describe_hub(config.name)) for i, r in enumerate(source.hub_rows(config.name))]
        kept = [row for row in rows if not any(PLACEHOLDER in turn for turn in row.turns)]
        if not kept:
            raise SpecbenchError(
                source.missing(f"every {config.name} prompt on the hub is held back (placeholder text)")
            )
        return kept, f"{source.describe_hub(config.name)} ({len(rows) - len(kept)} held-back prompts left out)"
    flat = source.folder / f"{config.name}.jsonl"
    if flat.is_file():
        rows = [_flat_row(r, i, str(flat)) for i, r in enumerate(read_jsonl(flat))]
        described = str(flat)
    else:
        files = folder_files(source.folder, f"{config.name}_*.jsonl")
        if not files:
            raise SpecbenchError(
                source.missing(f"{source.folder} has neither {config.name}.jsonl nor {config.name}_*.jsonl")
            )
        rows = []
        for path in files:
            key = path.stem[len(config.name) + 1 :]
            category = key.split(TIER_SEPARATOR)[0]
            rows.extend(
                Row(id=f"{key}/{i}", category=category, turns=turns_of(r.get("turns"), f"{path} row {i}"))
                for i, r in enumerate(read_jsonl(path))
            )
        described = f"{source.folder}/{config.name}_*.jsonl ({len(files)} files)"
    held = _held_back(rows)
    if held:
        raise SpecbenchError(
            source.missing(
                f"{described} holds {held} prompts still held back (placeholder text): the folder was not materialised"
            )
        )
    return rows, described

"""speculator_benchmarks (the speculators project's evaluation set; hub dataset ``RedHatAI/speculator_benchmarks``)
read from a folder or the hub.

The set is nine subsets — HumanEval, math_reasoning, qa, question, rag, summarization, tool_call,
translation, writing — one JSON-lines file each, ``<subset>.jsonl``, whose ``prompt`` column holds the
prompt (the speculators project's ``scripts/evaluate/evaluate.py`` loads them with
``load_dataset(dataset, data_files="<subset>.jsonl", split="train")`` and maps ``prompt`` to the request
text). A local copy is that repository's files in one folder, as the hub's own client writes them::

    huggingface-cli download RedHatAI/speculator_benchmarks --repo-type dataset --local-dir DIR

Each subset is a category; row ids are ``<subset>/<row number>``. A prompt may also be a list of texts
or chat messages (the user turns are kept).
"""

from __future__ import annotations

from specbench.errors import SpecbenchError
from specbench.workloads.readers.prepared_rows import DataSource, Row, turns_of
from specbench.workloads.readers.prepared_spec import PreparedConfig
from specbench.workloads.readers.sources import read_jsonl

PROMPT_FIELD = "prompt"


def _rows(records: list[dict], subset: str, where: str) -> list[Row]:
    rows = []
    for i, record in enumerate(records):
        if PROMPT_FIELD not in record:
            raise SpecbenchError(
                f"{where} row {i} has no '{PROMPT_FIELD}' field (fields: {', '.join(map(str, record))})"
            )
        rows.append(Row(id=f"{subset}/{i}", category=subset, turns=turns_of(record[PROMPT_FIELD], f"{where} row {i}")))
    return rows


def read(source: DataSource, config: PreparedConfig, categories) -> tuple[list[Row], str]:
    """Rows of the selected subsets (all of the config's when ``categories`` is None)."""
    subsets = [s for s in config.categories if categories is None or s in categories]
    rows = []
    if source.folder is None:
        for subset in subsets:
            file = f"{subset}.jsonl"
            rows.extend(_rows(source.hub_rows(data_files=file), subset, source.describe_hub(file)))
        return rows, source.describe_hub(f"{{{','.join(subsets)}}}.jsonl")
    missing = [s for s in subsets if not (source.folder / f"{s}.jsonl").is_file()]
    if missing:
        raise SpecbenchError(source.missing(f"{source.folder} has no {', '.join(s + '.jsonl' for s in missing)}"))
    for subset in subsets:
        path = source.folder / f"{subset}.jsonl"
        rows.extend(_rows(read_jsonl(path), subset, str(path)))
    return rows, f"{source.folder}/{{{','.join(subsets)}}}.jsonl"

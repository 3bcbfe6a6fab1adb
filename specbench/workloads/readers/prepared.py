"""Prompts of a prepared-data workload (`specbench.workloads.readers.prepared_spec`): a folder other projects'
scripts prepared, or the Hugging Face hub where the machine is online.

Where the data comes from, in order: the folder a name gives (``speed-bench:data=DIR``), the folder the
workload's variable names (``SPECBENCH_SPEED_BENCH``), ``<cache>/datasets/<workload>`` when it exists,
then the hub dataset when the hub is reachable. Without any, loading stops with one line saying how to
get the data (the workload file's ``get``). A folder that is named but missing is an error too, not a
reason to go to the hub.

A reader per layout turns one config of the set into rows (`Row`: a stable id within the config, the
category, the user turns) and says which files it read; prompt ids are
``<workload>/<config>/<row id>`` (``<workload>/<row id>`` for a set without configs), each prompt keeps
its category (per-category α: ``specbench fit --by category``; per-category recommendations: one
workload per category, ``speed-bench:category=coding``), and a config with a length bin gives its
prompts that ``context_bin`` (SPEED-Bench's throughput splits: ``specbench fit`` then shows acceptance by
context length).
"""

from __future__ import annotations

from specbench.errors import SpecbenchError, note
from specbench.workloads.prompt import Prompt
from specbench.workloads.readers import speculator_benchmarks as workload_speculator_benchmarks
from specbench.workloads.readers import speed_bench as workload_speed_bench
from specbench.workloads.readers.prepared_rows import DataSource
from specbench.workloads.readers.prepared_spec import PreparedSpec

# layout (the workload file's prepared.layout) -> reader(source, config, categories) -> (rows, what was read)
READERS = {"speed-bench": workload_speed_bench.read, "speculator-benchmarks": workload_speculator_benchmarks.read}


def prepared_prompts(spec: PreparedSpec) -> tuple[list[Prompt], str]:
    """Every prompt of the selected configs and categories, and a description of what was read."""
    reader = READERS.get(spec.layout)
    if reader is None:
        raise SpecbenchError(
            f"workload {spec.origin}: prepared: unknown layout '{spec.layout}' (layouts: {', '.join(sorted(READERS))})"
        )
    source = DataSource(spec)
    prompts, read, seen, empty, repeated = [], [], set(), 0, 0
    for config in spec.configs:
        rows, description = reader(source, config, spec.categories)
        read.append(description)
        for row in rows:
            if spec.categories is not None and row.category not in spec.categories:
                continue
            prompt_id = "/".join(p for p in (spec.id_prefix, config.name, row.id) if p)
            if not row.turns:
                empty += 1
                continue
            if prompt_id in seen:
                repeated += 1
                continue
            seen.add(prompt_id)
            prompts.append(
                Prompt(workload=spec.name, prompt_id=prompt_id, category=row.category, turns=row.turns, bin=config.bin)
            )
    if empty:
        note(f"workload {spec.name}: {empty} prompt(s) without any text (an empty or null turn) left out")
    if repeated:
        note(f"workload {spec.name}: {repeated} prompt(s) repeating an earlier id left out")
    return prompts, "; ".join(read)

"""A results folder whose verdict is known (synthetic sweep records) and whose spec runs for real (the tiny random
models): what `specbench confirm` needs to be tested end to end in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from specbench.measure.grid.sweep import build_spec
from specbench.measure.run.runner import run_info
from specbench.workloads.catalog import load_workload
from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records, write_results

SWEEP_PROMPTS = 8


def prompt_file(folder: Path, count: int = 40) -> Path:
    path = folder / "fresh.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"q{i:03d}", "text": f"Tell a short story numbered {i} about the sea."}) + "\n"
            for i in range(count)
        )
    )
    return path


def decided_results(
    folder: Path,
    *,
    alpha: float = 0.9,
    gamma: int = 2,
    max_new_tokens: int = 12,
    adaptive: dict | None = None,
    source: str | None = None,
) -> Path:
    """RESULTS whose sweep (ngram at γ, the tiny random target, a JSONL workload of 40 prompts of which the sweep
    used 8) says "confident yes" for ngram γ=``gamma``; its records are synthetic, its spec runs. ``source`` names
    another workload (a built-in one: "humaneval") in place of the JSONL. With ``adaptive``
    the sweep is an adaptive one (its pool: the first ``max_prompts`` of the workload, of which it measured 8)."""
    folder.mkdir(parents=True, exist_ok=True)
    source = source or f"jsonl:{prompt_file(folder)}:field=text:id=id"
    raw = {
        "name": "decided",
        "target": "tiny-random-llama",
        "ignore_eos": True,
        "max_new_tokens": max_new_tokens,
        "drafters": [{"type": "ngram"}],
        "gammas": [gamma],
        "temperatures": [0.0],
        "timing": {"order": "bracket", "warmup_s": 0, "retries": 0},
        "workloads": [{"name": source} if adaptive else {"name": source, "count": SWEEP_PROMPTS}],
    }
    if adaptive:
        raw["adaptive"] = adaptive
    (folder / "sweep.yaml").write_text(yaml.safe_dump(raw))
    spec = build_spec(raw)
    pool = load_workload(source, count=SWEEP_PROMPTS, seed=spec.seed)
    drafter = SyntheticDrafter(
        name="ngram", params={}, model_free=True, alpha=alpha, gammas=(gamma,), draft_fixed_s=0.0005
    )
    records = make_records(
        [drafter],
        n_prompts=SWEEP_PROMPTS,
        workload=pool.name,
        target="tiny-random-llama",
        costs=SyntheticCosts(noise=0.02),
        max_new_tokens=max_new_tokens,
        seed=1,
    )
    ids = [p.prompt_id for p in pool.prompts]
    for record in records:
        record["prompt_id"] = ids[int(record["prompt_id"][1:])]
    results = folder / "results"
    write_results(results, records, run_info(spec, None, (0, 1)))
    return results

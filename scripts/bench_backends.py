#!/usr/bin/env python
"""The same small sweep on the own engine, vLLM and llama.cpp: α, τ and tokens/s side by side.

    python scripts/bench_backends.py                       # make bench-backends
    python scripts/bench_backends.py --prompts 1 --max-new-tokens 32 --concurrency 1,8
    python scripts/bench_backends.py --json bench-backends.json

SmolLM2-135M (fp32, CPU), greedy, ``--prompts`` prompts from each of mt-bench and humaneval,
``--max-new-tokens`` tokens each (fixed length), the target-only baseline, ngram (n 1..3) and
draft_model — SmolLM2-135M drafting for itself, the only same-vocabulary drafter vLLM can load
here, so its α is 1 by construction and its speedup shows the cost of a drafter as large as the
target — at γ 2 and 4. The own engine runs concurrency 1 only (it measures one request at a
time); vLLM runs each ``--concurrency`` level with that many requests in flight.

Printed per (backend, concurrency, configuration): α = Σ accepted / Σ drafted, τ = Σ decode
tokens / Σ rounds, the mean per-request decode tokens/s and its ratio to the same backend's
baseline at the same concurrency, plus the 1-minute load average before and after (timings on a
shared machine are noisy). Needs `make install-vllm`.

llama.cpp (``llamacpp``, needs `make install-llamacpp`) runs twice on the same prompts: ``llamacpp-fp32`` on
the GGUF dequantized to fp32 (the very weights the own engine and vLLM compute with:
`specbench.models.gguf_convert`) and ``llamacpp-q4`` on the GGUF as shipped (Q4_1, llama.cpp's native
quantized path). llama.cpp runs no specbench ``ngram``; its closest, ``ngram-simple`` with size_n 2, takes that
row (a different matcher: its α is not comparable, its speed is). The closing lines give every engine's
target-only tokens/s at concurrency 1 as a ratio to llama.cpp fp32 — the CPU speed anchor — with the CPU named.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

# engine label -> (backend name, backend options): the rows of the table
ENGINES = {
    "own": ("own", {}),
    "vllm": ("vllm", {"max_model_len": 1024}),
    "llamacpp-fp32": ("llamacpp-server", {"weights": "dtype"}),
    "llamacpp-q4": ("llamacpp-server", {"weights": "gguf"}),
}
GROUPS = {"own": ["own"], "vllm": ["vllm"], "llamacpp": ["llamacpp-fp32", "llamacpp-q4"]}
ANCHOR = "llamacpp-fp32"


def sweep_spec(engine: str, concurrency: list[int], prompts: int, tokens: int) -> dict:
    backend, options = ENGINES[engine]
    ngram = (
        {"type": "ngram-simple", "params": {"size_n": 2}}
        if backend == "llamacpp-server"
        else {"type": "ngram", "params": {"n_min": 1, "n_max": 3}}
    )
    if backend == "llamacpp-server":
        options = {**options, "parallel": max(concurrency)}
    return {
        "name": f"bench-backends-{engine}",
        "target": "smollm2-135m",
        "dtype": "fp32",
        "seed": 0,
        "max_new_tokens": tokens,
        "ignore_eos": True,
        "gammas": [2, 4],
        "temperatures": [0.0],
        "drafters": [ngram, {"type": "draft-model", "params": {"model": "smollm2-135m"}}],
        "workloads": [{"name": "mt-bench", "count": prompts}, {"name": "humaneval", "count": prompts}],
        "backend": {"name": backend, **options},
        "concurrency": concurrency,
    }


def run(raw: dict, out: Path) -> tuple[float, object]:
    from specbench.cli.views.progress_lines import LineProgress
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner
    from specbench.records.store import load_records

    start = time.perf_counter()
    print(f"  [{raw['backend']['name']}] sweep into {out}", flush=True)
    with LineProgress(sys.stdout) as progress:  # a line per unit while it runs, a heartbeat on a long one
        SweepRunner(build_spec(raw), out, observer=progress).run()
    return time.perf_counter() - start, load_records(out)


def table(frame) -> list[dict]:
    rows = []
    keys = ["backend", "concurrency", "drafter_label", "gamma"]
    base = {}
    for key, group in frame.groupby(keys, sort=True):
        row = dict(zip(keys, key))
        drafted, accepted = int(group["drafted"].sum()), int(group["accepted"].sum())
        row["alpha"] = accepted / drafted if drafted else float("nan")
        row["tau"] = float(group["decode_tokens"].sum() / group["rounds"].sum())
        row["tokens_per_s"] = float(group["tokens_per_s"].mean())
        row["units"] = len(group)
        if row["gamma"] == 0:
            base[(row["backend"], row["concurrency"])] = row["tokens_per_s"]
        rows.append(row)
    for row in rows:
        row["speedup"] = row["tokens_per_s"] / base.get((row["backend"], row["concurrency"]), float("nan"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4, help="prompts per workload (mt-bench, humaneval)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--concurrency", default="1,8", help="vLLM concurrency levels")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--backends",
        default="own,vllm,llamacpp",
        help="which to run: own, vllm, llamacpp (its fp32 and Q4 rows), e.g. llamacpp alone",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="keep the results folders here (DIR/own, DIR/vllm, DIR/llamacpp-fp32, ...; a rerun "
        "resumes and the table covers every engine found there) instead of a temporary folder",
    )
    args = parser.parse_args()
    import pandas as pd

    from specbench.engine.cpu.cpu_info import describe_cpu

    levels = [int(x) for x in args.concurrency.split(",")]
    load_before = os.getloadavg()[0]
    frames, walls = [], {}
    wanted = [engine for group in args.backends.split(",") for engine in GROUPS.get(group.strip(), [])]
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        root = args.out or Path(tmp)
        for engine in wanted:
            concurrency = [1] if engine == "own" else levels
            print(f"{engine}: concurrency {concurrency}", flush=True)
            walls[engine], frame = run(
                sweep_spec(engine, concurrency, args.prompts, args.max_new_tokens), root / engine
            )
            frames.append(frame.assign(backend=engine))
        if args.out is not None:  # the other engines' folders, run separately
            from specbench.records.store import load_records

            frames += [
                load_records(root / e).assign(backend=e)
                for e in ENGINES
                if e not in wanted and (root / e / "records").exists()
            ]
    rows = table(pd.concat(frames, ignore_index=True))
    load_after = os.getloadavg()[0]
    print(
        f"\nSmolLM2-135M fp32 CPU, greedy, {args.prompts} prompts × 2 workloads (mt-bench, humaneval), "
        f"{args.max_new_tokens} tokens; own engine: concurrency 1 only; llamacpp-q4: the shipped Q4_1 GGUF"
    )
    print(f"{'engine':13} {'conc':>4}  {'configuration':34} {'γ':>2} {'α':>6} {'τ':>6} {'tok/s':>8} {'speedup':>7}")
    for r in rows:
        print(
            f"{r['backend']:13} {r['concurrency']:>4}  {r['drafter_label'][:34]:34} {r['gamma']:>2} "
            f"{'-' if r['alpha'] != r['alpha'] else format(r['alpha'], '.3f'):>6} {r['tau']:6.3f} {r['tokens_per_s']:8.2f} {r['speedup']:7.2f}"
        )
    anchors = {r["backend"]: r["tokens_per_s"] for r in rows if r["gamma"] == 0 and r["concurrency"] == 1}
    if ANCHOR in anchors:
        ratios = ", ".join(f"{engine} {tps / anchors[ANCHOR]:.2f}×" for engine, tps in anchors.items())
        print(f"target-only tokens/s at concurrency 1 ÷ llama.cpp fp32's ({anchors[ANCHOR]:.2f} tok/s): {ratios}")
    print(f"CPU: {describe_cpu()}")
    print(
        "wall: "
        + ", ".join(f"{b} {s:.0f} s" for b, s in walls.items())
        + f"; load average (1 min) {load_before:.1f} before, {load_after:.1f} after"
    )
    if args.json:
        finite = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in rows]
        args.json.write_text(
            json.dumps(
                {
                    "rows": finite,
                    "wall_s": walls,
                    "load_before": load_before,
                    "load_after": load_after,
                    "argv": sys.argv[1:],
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Linear-weight layouts on the CPU: forward time over k new tokens, as the engine runs a step.

Times, in one process and interleaved (each repeat stores the weights in every layout in turn):
  * row-major, no copies — every weight as torch stores it, computed by the engine's `linear` (weight-first
                    for 2–64 rows, x · Wᵀ otherwise), LM head row-major, no single-row copies;
  * column-major  — the previous engine layout (`prefer_column_major`, an NN GEMM);
  * engine        — `apply_cpu_layout`: row-major, weight-first products (W · xᵀ) for k ≥ 2, the LM
                    head column-major and column-major single-row copies of wide matrices.
A step is one forward of k = 1, 2, 3, 5, 8 new tokens after a 256-token cached prefix without logits,
plus the LM head over one row (the row the lazy verifier always computes; decode's only row); the
512-token prefill too. Median of --repeats. See docs/bench-engine-steps.md ("Engine speed, third step").

    python scripts/bench_weight_layout.py                                  # SmolLM2-135M, 2 threads
    python scripts/bench_weight_layout.py --model qwen2.5-coder-1.5b --repeats 3
    python scripts/bench_weight_layout.py --profile   # + where a verify(5) step's time goes
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from specbench.cli.views.progress_lines import Steps
from specbench.engine.cpu.weight_layout import apply_cpu_layout, prefer_column_major, prefer_row_major
from specbench.engine.decoder import NativeDecoder
from specbench.models.resolve import load_model

CONTEXT = 256
K_VALUES = (1, 2, 3, 5, 8)
LAYOUTS = {
    "row-major, no copies": prefer_row_major,
    "column-major (previous)": prefer_column_major,
    "engine (apply_cpu_layout)": apply_cpu_layout,
}


def step_ms(decoder: NativeDecoder, ids: torch.Tensor) -> float:
    """ms of one forward over ids [1, k] after CONTEXT cached tokens plus one LM head row."""
    start = time.perf_counter()
    out = decoder.forward(ids, logits="none")
    decoder.head(out.hidden[:, :1])
    elapsed = time.perf_counter() - start
    decoder.truncate(CONTEXT)
    return 1000 * elapsed


def prefill_ms(decoder: NativeDecoder, prompt: torch.Tensor) -> float:
    decoder.reset(1, 640)
    start = time.perf_counter()
    decoder.forward(prompt, logits="last")
    elapsed = time.perf_counter() - start
    decoder.reset(1, 640)
    decoder.forward(torch.randint(100, 1000, (1, CONTEXT)), logits="none")
    return 1000 * elapsed


def measure(model, decoder: NativeDecoder, repeats: int, steps: Steps | None = None) -> dict[str, dict]:
    """{layout: {k: median ms, "prefill 512": median ms}}, layouts interleaved per repeat; ``steps`` hears of
    each (repeat, layout) block."""
    ids = {k: torch.randint(100, 1000, (1, k)) for k in K_VALUES}
    prompt = torch.randint(100, 1000, (1, 512))
    decoder.reset(1, 640)
    decoder.forward(torch.randint(100, 1000, (1, CONTEXT)), logits="none")
    times = {name: {k: [] for k in (*K_VALUES, "prefill 512")} for name in LAYOUTS}
    for repeat in range(repeats):
        for name, store in LAYOUTS.items():
            if steps is not None:
                steps.update(None, f"repeat {repeat + 1}/{repeats} · {name}")
            store(model)
            for k in K_VALUES:
                step_ms(decoder, ids[k])  # warm-up after the re-layout
                times[name][k] += [step_ms(decoder, ids[k]) for _ in range(2)]
            times[name]["prefill 512"].append(prefill_ms(decoder, prompt))
    return {name: {k: statistics.median(v) for k, v in row.items()} for name, row in times.items()}


def profile_step(decoder: NativeDecoder, k: int = 5, steps: int = 5) -> str:
    """torch.profiler table (self CPU time by operator) of ``steps`` forwards over k new tokens."""
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(100, 1000, (1, k))
    decoder.reset(1, 640)
    decoder.forward(torch.randint(100, 1000, (1, CONTEXT)), logits="none")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            out = decoder.forward(ids, logits="none")
            decoder.head(out.hidden[:, :1])
            decoder.truncate(CONTEXT)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="also profile verify(5) in every layout")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with Steps(
        "bench-layout", total=args.repeats * len(LAYOUTS) + (len(LAYOUTS) if args.profile else 0), stream=sys.stdout
    ) as steps:
        steps.say(f"loading {args.model}")
        model = load_model(args.model).model
        decoder = NativeDecoder(model)
        rows = measure(model, decoder, args.repeats, steps)
        profiles = {}
        if args.profile:
            for name, store in LAYOUTS.items():
                steps.update(None, f"profiling verify(5) · {name}")
                store(model)
                profiles[name] = profile_step(decoder)
    keys = list(rows["row-major, no copies"])
    print(f"{args.model}, {torch.get_num_threads()} thread(s), context {CONTEXT}; ms (ratio to k=1)")
    print("| weights | " + " | ".join(f"k={k}" if isinstance(k, int) else k for k in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, row in rows.items():
        cells = [f"{row[k]:.1f} ({row[k] / row[1]:.2f}×)" if isinstance(k, int) else f"{row[k]:.0f}" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")
    previous, engine = rows["column-major (previous)"], rows["engine (apply_cpu_layout)"]
    print("| engine ÷ previous | " + " | ".join(f"{engine[k] / previous[k]:.2f}" for k in keys) + " |")
    for name, table in profiles.items():
        print(f"\nverify(5), {name} weights, 5 steps:\n{table}")


if __name__ == "__main__":
    main()

"""Row-major vs column-major linear weights on the CPU: forward time over k new tokens.

Times one forward of k = 1, 2, 3, 5, 8 new tokens after a 256-token cached prefix with the
weights as torch stores them (row-major W [out, in]) and then re-stored column-major
(`specbench.engine.weight_layout`), in one process, median of --repeats, and the 512-token
prefill for both. See docs/benchmarks.md ("Roofline: what the profile showed").

    python scripts/bench_weight_layout.py --model smollm2-135m --threads 1
    python scripts/bench_weight_layout.py --threads 1 --profile   # + where a verify(5) step's time goes
"""

from __future__ import annotations

import argparse
import time

import torch

from specbench.engine.decoder import NativeDecoder
from specbench.engine.weight_layout import prefer_column_major
from specbench.models.resolve import load_model

CONTEXT = 256
K_VALUES = (1, 2, 3, 5, 8)


def row_major(model) -> None:
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight.data = module.weight.data.contiguous()


def median_ms(fn, repeats: int, reset=lambda: None) -> float:
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        reset()
    return 1000 * sorted(times[1:])[repeats // 2]


def measure(decoder: NativeDecoder, repeats: int) -> dict:
    ids = {k: torch.randint(100, 1000, (1, k)) for k in K_VALUES}
    decoder.reset(1, 640)
    decoder.forward(torch.randint(100, 1000, (1, CONTEXT)), logits="none")
    out = {k: median_ms(lambda k=k: decoder.forward(ids[k], logits="all"), repeats,
                        lambda: decoder.truncate(CONTEXT)) for k in K_VALUES}
    prompt = torch.randint(100, 1000, (1, 512))

    def prefill():
        decoder.reset(1, 640)
        decoder.forward(prompt, logits="last")

    out["prefill 512"] = median_ms(prefill, max(1, repeats // 3))
    return out


def profile_step(decoder: NativeDecoder, k: int = 5, steps: int = 5) -> str:
    """torch.profiler table (self CPU time by operator) of ``steps`` forwards over k new tokens."""
    from torch.profiler import ProfilerActivity, profile

    ids = torch.randint(100, 1000, (1, k))
    decoder.reset(1, 640)
    decoder.forward(torch.randint(100, 1000, (1, CONTEXT)), logits="none")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            decoder.forward(ids, logits="all")
            decoder.truncate(CONTEXT)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--profile", action="store_true", help="also profile verify(5) in both layouts")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model(args.model).model
    decoder = NativeDecoder(model)  # stores the weights column-major on the CPU
    row_major(model)
    rows = {"row-major": measure(decoder, args.repeats)}
    profiles = {"row-major": profile_step(decoder)} if args.profile else {}
    prefer_column_major(model)
    rows["column-major"] = measure(decoder, args.repeats)
    if args.profile:
        profiles["column-major"] = profile_step(decoder)
    keys = list(rows["row-major"])
    print(f"{args.model}, {torch.get_num_threads()} thread(s), context {CONTEXT}; ms (ratio to k=1)")
    print("| weights | " + " | ".join(f"k={k}" if isinstance(k, int) else k for k in keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, row in rows.items():
        cells = [f"{row[k]:.1f} ({row[k] / row[1]:.2f}×)" if isinstance(k, int) else f"{row[k]:.0f}" for k in keys]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name, table in profiles.items():
        print(f"\nverify(5), {name} weights, 5 steps:\n{table}")


if __name__ == "__main__":
    main()

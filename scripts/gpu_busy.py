"""GPU busy time per step of specbench's own decoder: how much of a decode / verify step the GPU computes.

For a random-weight architecture (a folder with config.json), bf16 on CUDA, batch 1, a prefilled cache of
``--context`` tokens, it times the native decoder's k-token steps (k = 1: decode; k = γ + 1: verify):

    wall ms    torch.cuda.Event around the step (median over --steps steps)
    GPU ms     the CUDA kernels' time in the same step (torch.profiler over --steps steps, per step)
    busy       GPU ms ÷ wall ms; well below 1 the step waits on the host launching kernels

eagerly, and with ``--compile`` also through `NativeDecoder.compile_steps` (torch.compile,
mode="reduce-overhead": CUDA graphs). Rows print as they are measured, so a run cut short keeps the
finished ones. Without a CUDA device it says so and exits with code 2 (it never runs on the CPU).

    python scripts/gpu_busy.py scripts/gpu_configs/llama-3.2-1b --compile
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch


def step_times(decoder, context: int, k: int, steps: int, vocab: int) -> tuple[float, float]:
    """(median wall ms, GPU kernel ms per step) of forwards over k new tokens after ``context`` cached."""
    tokens = torch.randint(0, vocab, (1, k), device="cuda")

    def one_step() -> None:
        decoder.forward(tokens, logits="last")
        decoder.truncate(context)

    for _ in range(3):  # warm-up: first calls, graph capture
        one_step()
    torch.cuda.synchronize()
    walls = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        one_step()
        end.record()
        torch.cuda.synchronize()
        walls.append(start.elapsed_time(end))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            one_step()
        torch.cuda.synchronize()
    kernel_us = sum(event.self_device_time_total for event in prof.key_averages())
    return statistics.median(walls), kernel_us / 1000.0 / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config_dir")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--verify-tokens", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--compile", action="store_true", help="also the compiled (CUDA graph) steps")
    parser.add_argument("--json", default=None, help="write the rows here too")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_busy: needs a CUDA device (torch sees none)", file=sys.stderr)
        return 2
    from transformers import AutoConfig, AutoModelForCausalLM

    from specbench.engine.decoder import NativeDecoder

    config = AutoConfig.from_pretrained(args.config_dir)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    decoder = NativeDecoder(model)
    prompt = torch.randint(0, config.vocab_size, (1, args.context), device="cuda")
    rows = []
    print(f"{torch.cuda.get_device_name(0)}; {args.config_dir}; bf16, batch 1, context {args.context}")
    print("| path | k | wall ms | GPU ms | busy |")
    print("|---|---:|---:|---:|---:|")
    for path in ("eager", "cuda graphs") if args.compile else ("eager",):
        try:
            if path == "cuda graphs":
                decoder.compile_steps()
            decoder.reset(1, args.context + args.verify_tokens + 8)
            decoder.forward(prompt, logits="none")
            for k in (1, args.verify_tokens):
                wall, gpu = step_times(decoder, args.context, k, args.steps, config.vocab_size)
                row = {
                    "path": path,
                    "k": k,
                    "wall_ms": round(wall, 3),
                    "gpu_ms": round(gpu, 3),
                    "busy": round(gpu / wall, 3),
                }
                rows.append(row)
                print(f"| {path} | {k} | {wall:.2f} | {gpu:.2f} | {gpu / wall:.0%} |", flush=True)
        except Exception as exc:  # noqa: BLE001 — report the failed path, keep the measured rows
            print(f"| {path} | - | failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120]} | | |", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {"device": torch.cuda.get_device_name(0), "config": args.config_dir, "rows": rows}, handle, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

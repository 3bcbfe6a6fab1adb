"""How much of one eager decode/verify forward is GPU work, and how much is the host launching it.

For a random-weight architecture (a folder with config.json), bf16 on CUDA, batch 1, a 512-token
prefilled cache, it times k-token forwards (k = 1 and 8) three ways:

    wall ms      torch.cuda.Event around the forward (what specbench's profile measures)
    kernel ms    the sum of CUDA kernel time in torch.profiler for the same forward
    busy         kernel ms ÷ wall ms: below ~0.5 the step is bound by the host's kernel launches,
                 not by the GPU's memory bandwidth, and a CUDA graph (or a serving engine that uses
                 one, as vLLM does) would remove most of the gap

and the bandwidth bound, weight bytes ÷ the measured copy bandwidth.

    python scripts/gpu_launch_overhead.py scripts/gpu_configs/llama-3.1-8b [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config_dirs", nargs="+")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("gpu_launch_overhead: needs a CUDA device", file=sys.stderr)
        return 2
    from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

    rows = []
    copy_gbs = _copy_bandwidth()
    for folder in args.config_dirs:
        config = AutoConfig.from_pretrained(folder)
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        prompt = torch.randint(0, config.vocab_size, (1, args.context), device="cuda")
        for k in (1, 8):
            wall, kernel = [], []
            for rep in range(args.reps + 3):
                cache = DynamicCache()
                with torch.no_grad():
                    model(prompt, past_key_values=cache, use_cache=True)
                    step = torch.randint(0, config.vocab_size, (1, k), device="cuda")
                    torch.cuda.synchronize()
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    if rep == args.reps + 2:  # the last one under the profiler (its own overhead is not timed)
                        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                            model(step, past_key_values=cache, use_cache=True)
                            torch.cuda.synchronize()
                        kernel.append(sum(e.self_device_time_total for e in prof.key_averages()) / 1000.0)
                        continue
                    start.record()
                    model(step, past_key_values=cache, use_cache=True)
                    end.record()
                    torch.cuda.synchronize()
                    if rep >= 2:
                        wall.append(start.elapsed_time(end))
            wall_ms = statistics.median(wall)
            row = {
                "model": folder,
                "k": k,
                "wall_ms": round(wall_ms, 3),
                "kernel_ms": round(kernel[0], 3),
                "busy": round(kernel[0] / wall_ms, 3),
                "bandwidth_bound_ms": round(weight_bytes / (copy_gbs * 1e9) * 1e3, 3),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        del model
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"device": torch.cuda.get_device_name(0), "copy_GBps": copy_gbs, "rows": rows}, handle, indent=1)
    return 0


def _copy_bandwidth() -> float:
    """Device-to-device copy of 4 GiB, bytes read + written ÷ time, in GB/s."""
    source = torch.empty(2**31, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    target.copy_(source)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        target.copy_(source)
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000 / 5
    return 2 * source.numel() / seconds / 1e9


if __name__ == "__main__":
    sys.exit(main())

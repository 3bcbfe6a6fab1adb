#!/usr/bin/env python
"""`make bench-strategies`: the three system-level strategies of docs/strategies.md, from one run.

    python scripts/bench_strategies.py                          # all three, default sizes
    python scripts/bench_strategies.py --parts nested,moe --prompts 2 --new-tokens 32

Each part is its own script, run here one after the other in a fresh process (so that each
sets torch's threads and loads its models alone) and printed under its heading:

* nested — nested vs sequential speculation: tokens/s, hit rate, drafting hidden
  (`scripts/bench_strategy_nested.py`);
* schedule — dynamic verify-length schedules (heuristic, threshold, dspark) vs the best fixed γ,
  with recommend's verdict (`scripts/bench_strategy_schedule.py`);
* moe — expert-aware vs plain dynamic tree on the upcycled SmolLM2 MoE target: experts per
  verify, τ, predicted tokens/s from the MoE cost model (`scripts/bench_strategy_moe.py`).

Every part prints the load average it ran at: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# part -> (script, its flag for new tokens per turn)
PARTS = {
    "nested": ("bench_strategy_nested.py", "--new-tokens"),
    "schedule": ("bench_strategy_schedule.py", "--new-tokens"),
    "moe": ("bench_strategy_moe.py", "--max-new-tokens"),
}


def command(part: str, prompts: int | None, new_tokens: int | None) -> list[str]:
    script, tokens_flag = PARTS[part]
    argv = [sys.executable, str(HERE / script)]
    if prompts is not None:
        argv += ["--prompts", str(prompts)]
    if new_tokens is not None:
        argv += [tokens_flag, str(new_tokens)]
    return argv


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"which, comma-separated ({', '.join(PARTS)})")
    parser.add_argument(
        "--prompts", type=int, default=None, help="prompts per workload for every part (default: each part's)"
    )
    parser.add_argument(
        "--new-tokens", type=int, default=None, help="new tokens per turn for every part (default: each part's)"
    )
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        print(f"bench_strategies: unknown part(s) {unknown}: choose from {', '.join(PARTS)}", file=sys.stderr)
        return 2
    failed = []
    for part in parts:
        argv = command(part, args.prompts, args.new_tokens)
        print(f"\n=== {part}: {' '.join(Path(a).name if i < 2 else a for i, a in enumerate(argv))}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(argv)
        print(
            f"=== {part}: {'done' if code == 0 else f'FAILED (exit {code})'} in {time.perf_counter() - start:.0f} s",
            flush=True,
        )
        if code != 0:
            failed.append(part)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

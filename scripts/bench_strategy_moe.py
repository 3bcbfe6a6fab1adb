#!/usr/bin/env python
"""Expert-aware vs plain dynamic tree on an MoE target: τ, experts per verify, predicted tokens/s.

    python scripts/bench_strategy_moe.py                          # sweeps/strategies-moe.yaml, SmolLM2-MoE
    python scripts/bench_strategy_moe.py --prompts 1 --max-new-tokens 16   # quicker
    python scripts/bench_strategy_moe.py --results results/strategies-moe  # table of an existing folder
    python scripts/bench_strategy_moe.py --drafters '[{"type": "draft-model", "params": {"model": "smollm2-135m-exit8"}}]'

Runs the sweep (default: SmolLM2-135M-MoE with the shipped EAGLE drafter) — a real
`specbench.measure.run.runner.SweepRunner`, into ``--out`` or a temporary folder — and prints, per configuration, from its records (`specbench.analysis.cost.moe.expert_aware_table`):
τ, distinct experts per layer per verify, expert MB read per verify and per emitted token, the
measured decode tokens/s on this machine (the upcycled target computes each MLP once, so its timings
do not pay for experts), and the tokens/s the expert-aware cost model predicts when every verify
streams its distinct experts, with the speedup over target-only decoding. Greedy identity of every
configuration with the baseline is checked and printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SWEEP = ROOT / "sweeps" / "strategies-moe.yaml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=DEFAULT_SWEEP, help="sweep YAML (default: strategies-moe)")
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: a temporary one)")
    parser.add_argument("--results", type=Path, default=None, help="print the table of this folder; run nothing")
    parser.add_argument("--prompts", type=int, default=None, help="prompts per workload (default: the sweep's)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="new tokens per turn (default: the sweep's)")
    parser.add_argument("--target", default=None, help="override the sweep's target")
    parser.add_argument(
        "--drafters",
        default=None,
        help='override the sweep\'s drafters, a JSON list like [{"type": "draft-model", '
        '"params": {"model": "smollm2-135m-exit8"}}]',
    )
    return parser.parse_args(argv)


def sweep_spec(args: argparse.Namespace) -> dict:
    """The sweep file with the command line's overrides."""
    from specbench.errors import SpecbenchError
    from specbench.measure.grid.sweep import load_spec_file

    raw = load_spec_file(args.sweep)
    if args.prompts is not None:
        raw["workloads"] = [{**w, "count": args.prompts} for w in raw["workloads"]]
    if args.max_new_tokens is not None:
        raw["max_new_tokens"] = args.max_new_tokens
    if args.target is not None:
        raw["target"] = args.target
    if args.drafters is not None:
        try:
            raw["drafters"] = json.loads(args.drafters)
        except json.JSONDecodeError as exc:
            raise SpecbenchError(f"--drafters: not a JSON list ({exc.msg})") from None
    return raw


def greedy_identical(records) -> bool:
    """Whether every configuration's output equals the baseline's on every (workload, prompt, turn)."""
    keys = ["workload", "prompt_id", "turn"]
    base = records[records["gamma"] == 0][keys + ["output_sha1"]]
    both = records[records["gamma"] > 0].merge(base, on=keys, suffixes=("", "_base"))
    return bool(len(both)) and bool((both["output_sha1"] == both["output_sha1_base"]).all())


def table_text(records) -> str:
    from specbench.analysis.cost.moe import expert_aware_table

    frame = expert_aware_table(records)
    header = (
        f"{'drafter':<38} {'tree':<34} {'γ':>2} {'τ':>5} {'experts/verify':>14} {'MB/verify':>9} "
        f"{'MB/token':>8} {'tok/s here':>10} {'tok/s MoE':>9} {'speedup MoE':>11}"
    )
    lines = [header, "-" * len(header)]
    for _, r in frame.iterrows():
        lines.append(
            f"{r['drafter'][:38]:<38} {r['tree'][:34]:<34} {r['gamma']:>2} {r['tau']:>5.2f} "
            f"{r['experts_per_verify']:>14.2f} {r['expert_mb_per_verify']:>9.1f} "
            f"{r['expert_mb_per_token']:>8.1f} {r['tokens_per_s']:>10.2f} "
            f"{r['predicted_tokens_per_s']:>9.2f} {r['predicted_speedup']:>10.2f}x"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    """Run the sweep (unless ``--results``) and return the printed table."""
    from specbench.cli.views.progress_lines import LineProgress
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner
    from specbench.records.store import load_records

    lines = [f"load average {os.getloadavg()[0]:.2f} before"]
    folder = args.results
    with tempfile.TemporaryDirectory() as tmp:
        if folder is None:
            folder = args.out or Path(tmp) / "strategies-moe"
            start = time.perf_counter()
            with LineProgress(sys.stderr) as progress:  # a line per unit while the sweep runs
                SweepRunner(build_spec(sweep_spec(args)), folder, observer=progress).run()
            lines.append(f"sweep {args.sweep.name} into {folder}: {time.perf_counter() - start:.0f} s")
        records = load_records(folder)
        lines.append(
            f"target {records['target'].iloc[0]}: {int(records['moe_experts'].iloc[0])} experts per layer, "
            f"top-{int(records['moe_top_k'].iloc[0])}; {records['prompt_id'].nunique()} prompts, "
            f"{int(records['new_tokens'].max())} new tokens"
        )
        lines.append(table_text(records))
        lines.append(f"greedy output identical to target-only in every configuration: {greedy_identical(records)}")
    lines.append(f"load average {os.getloadavg()[0]:.2f} after")
    return "\n".join(lines)


if __name__ == "__main__":
    from specbench.errors import SpecbenchError

    try:
        print(run(parse_args(sys.argv[1:])))
    except SpecbenchError as exc:
        print(f"bench_strategy_moe: error: {exc}", file=sys.stderr)
        sys.exit(2)

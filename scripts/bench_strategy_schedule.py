"""Dynamic verify-length schedules vs the best fixed γ on SmolLM2-135M (docs/strategies.md, DSpark section).

Runs sweeps/strategies-schedule.yaml through the sweep runner (timing protocol included), cut to
``--prompts`` prompts per workload and ``--new-tokens`` tokens: fixed γ at every swept γ, and the
dynamic schedules (heuristic, threshold, dspark) at the largest γ only, their cap. Prints, per
workload, each configuration's decode tokens/s, speedup over the target alone, τ (tokens per
target forward) and the mean draft length its rounds chose (Σ drafted ÷ rounds), then
`specbench recommend`'s verdict on the best dynamic schedule against the best fixed γ (tokens/s
ratio with its interval), and the load average before and after.

    python scripts/bench_strategy_schedule.py                     # 3 prompts per workload, 32 tokens
    python scripts/bench_strategy_schedule.py --prompts 5 --new-tokens 64 --out /tmp/sched
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from specbench.analysis.recommendation.recommend import recommend
from specbench.cli.views.progress_lines import LineProgress
from specbench.measure.grid.sweep import build_spec, load_spec_file
from specbench.measure.run.runner import SweepRunner
from specbench.records.store import load_records
from specbench.records.summary import configuration_table

SWEEP = Path(__file__).resolve().parents[1] / "sweeps" / "strategies-schedule.yaml"


def schedule_spec(prompts: int, new_tokens: int, name: str = "bench-strategy-schedule"):
    """The shipped sweep, cut down: fewer prompts and tokens, dynamic schedules at the cap γ only."""
    raw = load_spec_file(SWEEP)
    raw.update(name=name, max_new_tokens=new_tokens, workloads=[{**w, "count": prompts} for w in raw["workloads"]])
    spec = build_spec(raw, str(SWEEP))
    cap = max(spec.gammas)
    spec.configs = [c for c in spec.configs if c.is_baseline or c.schedule.is_fixed or c.gamma == cap]
    return spec


def table(records) -> str:
    """Per workload and configuration: tokens/s, speedup, τ, mean chosen draft length."""
    configs = configuration_table(records[records["mode"] == "live"])
    lines = [f"{'workload':<10} {'configuration':<34} {'tok/s':>7} {'speedup':>8} {'tau':>5} {'mean drafted':>13}"]
    for _, row in configs.sort_values(["workload", "schedule", "gamma"]).iterrows():
        if row["gamma"] == 0:
            name = "target only"
        elif row["schedule"] == "fixed":
            name = f"fixed γ={row['gamma']}"
        else:
            name = f"{row['schedule']} (cap γ={row['gamma']})"
        rounds = records[
            (records["workload"] == row["workload"])
            & (records["gamma"] == row["gamma"])
            & (records["schedule"] == row["schedule"])
            & (records["mode"] == "live")
        ]
        mean = rounds["drafted"].sum() / max(rounds["rounds"].sum(), 1)
        lines.append(
            f"{row['workload']:<10} {name:<34} {row['tokens_per_s']:>7.2f} {row['speedup']:>7.2f}× "
            f"{row['tau']:>5.2f} {mean:>13.2f}"
        )
    return "\n".join(lines)


def verify_costs(records) -> str:
    """Mean verify and draft time of a round by draft length, over every live round: what one more
    drafted token costs on this machine (the trade-off the schedules weigh)."""
    live = records[(records["mode"] == "live") & (records["gamma"] > 0)]
    drafted = np.concatenate([np.asarray(v, dtype=int) for v in live["round_drafted"]])
    verify = np.concatenate([np.asarray(v, dtype=float) for v in live["round_verify_s"]])
    draft = np.concatenate([np.asarray(v, dtype=float) for v in live["round_draft_s"]])
    parts = [
        f"k={k}: verify {1e3 * verify[drafted == k].mean():.1f} ms, draft {1e3 * draft[drafted == k].mean():.1f} ms"
        f" ({int((drafted == k).sum())} rounds)"
        for k in sorted(set(drafted.tolist()))
    ]
    return "per round by drafted tokens k: " + "; ".join(parts)


def run(args) -> str:
    """Run the cut-down sweep and return the printed report (the table and the verdicts)."""
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench-schedule-"))
    load_before = os.getloadavg()
    spec = schedule_spec(args.prompts, args.new_tokens)
    with LineProgress(sys.stderr) as progress:  # a line per unit while the sweep runs
        SweepRunner(spec, out, observer=progress).run()
    load_after = os.getloadavg()
    records = load_records(out)
    title = (
        f"SmolLM2-135M + EAGLE chain, greedy; {args.prompts} prompts per workload, {args.new_tokens} new tokens; "
        f"results in {out}"
    )
    lines = [title, table(records), verify_costs(records), ""]
    for rec in recommend(records, n_boot=200):
        verdict = rec.schedules["text"] if rec.schedules is not None else "no dynamic schedule measured"
        lines.append(f"{rec.keys['workload']}: {verdict}")
    lines.append(
        f"load average (1, 5, 15 min) before {load_before[0]:.1f} {load_before[1]:.1f} {load_before[2]:.1f}, "
        f"after {load_after[0]:.1f} {load_after[1]:.1f} {load_after[2]:.1f} on {os.cpu_count()} cores"
    )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=3, help="prompts per workload (default 3)")
    parser.add_argument("--new-tokens", type=int, default=32, help="new tokens per turn (default 32)")
    parser.add_argument("--out", default=None, help="results folder (default: a new temporary folder)")
    print(run(parser.parse_args(argv)))


if __name__ == "__main__":
    main()

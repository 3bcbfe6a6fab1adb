"""Quiet vs. loaded: the same small sweep twice, the second beside a CPU hog (`make bench-noise`).

    .venv/bin/python scripts/bench_noise.py                    # humaneval, 8 prompts, n-gram γ 1..4
    .venv/bin/python scripts/bench_noise.py --prompts 12 --hog-procs 2

The sweep: SmolLM2-135M, prompt lookup replayed at γ 1..4 on every prompt, costs timed on the
first 3 prompts by the timing protocol (baseline · configurations · baseline). The loaded run
starts ``--hog-procs`` busy-loop processes (default: one per core) before the sweep and stops
them after it. Printed side by side per γ: the predicted speedup (acceptance × cost) with its
interval, the measured end-to-end speedup on the calibration prompts, and how many live units
each run flagged as disturbed. The load average is printed before each run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HOG = "import time\nt = time.time()\nwhile time.time() - t < {seconds}: pass\n"


def run_sweep(out: Path, prompts: int, workload: str, hog_procs: int) -> tuple[float, float, object, list[str], dict]:
    from specbench.analysis.cost.predicted_speedup import predicted_table
    from specbench.cli.views.progress_lines import LineProgress
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner
    from specbench.records.store import load_records

    raw = {
        "name": "noise",
        "target": "smollm2-135m",
        "max_new_tokens": 64,
        "mode": "replay",
        "calibration": {"gammas": [1, 4], "prompts": 3},
        "timing": {"order": "bracket", "warmup_s": 2},
        "drafters": [{"type": "ngram", "params": {"n_min": 1, "n_max": 3}}],
        "gammas": [1, 2, 3, 4],
        "workloads": [{"name": workload, "count": prompts}],
    }
    load_before = os.getloadavg()[0]
    hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(seconds=900)]) for _ in range(hog_procs)]
    start = time.perf_counter()
    try:
        with LineProgress(sys.stderr) as progress:  # a line per unit while the sweep runs
            SweepRunner(build_spec(raw), out, observer=progress).run()
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    seconds = time.perf_counter() - start
    records = load_records(out)
    table, notes = predicted_table(records)
    live = records[records["mode"] == "live"]
    state = {
        "disturbed": int((~live["timing_ok"]).sum()),
        "live": len(live),
        "other_cores": float(live["other_cores"].median()),
        "load_end": os.getloadavg()[0],
    }
    return load_before, seconds, table, notes, state


def cell(point, lo, hi) -> str:
    return f"{point:.2f}× [{lo:.2f}, {hi:.2f}]" if lo == lo else f"{point:.2f}×"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--workload", default="humaneval")
    parser.add_argument("--hog-procs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-noise-"))
    try:
        runs = {}
        for name, procs in (("quiet", 0), ("loaded", args.hog_procs)):
            runs[name] = run_sweep(work / name, args.prompts, args.workload, procs)
            load, seconds, _, notes, state = runs[name]
            print(
                f"{name}: load average {load:.2f} before, {state['load_end']:.2f} after; {seconds:.0f} s; "
                f"{state['disturbed']} of {state['live']} live units disturbed; other processes kept "
                f"{state['other_cores']:.2f} cores busy (median)" + (f" [{procs} hog processes]" if procs else "")
            )
            for note in notes:
                print(f"  note: {note}")
        quiet, loaded = runs["quiet"][2], runs["loaded"][2]
        print(
            f"\n{args.workload}, {args.prompts} prompts, prompt lookup; predicted = acceptance (replay, every prompt) "
            "× cost (timed on 3 prompts); measured = end-to-end on the 3 calibration prompts\n"
        )
        print("| γ | predicted, quiet | predicted, loaded | measured, quiet | measured, loaded |")
        print("|---|---|---|---|---|")
        for (_, q), (_, ld) in zip(quiet.iterrows(), loaded.iterrows()):
            print(
                f"| {q['gamma']} | {cell(q['predicted'], q['lo'], q['hi'])} | {cell(ld['predicted'], ld['lo'], ld['hi'])} "
                f"| {cell(q['measured'], q['measured_lo'], q['measured_hi'])} "
                f"| {cell(ld['measured'], ld['measured_lo'], ld['measured_hi'])} |"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""One replay sweep with 1 and with 2 local Ray workers: wall time, its ratio, and the records compared.

    python scripts/bench_scale.py                        # sweeps/bench-scale.yaml, workers 1 then 2
    python scripts/bench_scale.py --workers 1,2,4 --json bench-scale.json

Each run is ``specbench sweep SWEEP --workers N`` in a fresh temporary folder, as a user would type it
(a local Ray instance: N workers sharing the machine's cores, each loading the models). Printed per
run: the whole command's wall time, and the part after every worker had loaded its models (run.json
appears then), i.e. the pieces of work themselves. The speedup of N workers is the 1-worker time ÷
the N-worker time, for both. The records of every run are compared with the 1-worker run's in every
non-timing column, unit for unit (``scripts/compare_records.py``): they must be identical.

The machine's CPU and its load average before and after are printed beside the figures: a busy machine
lowers the ratio (the workers share fewer free cores), so rerun it on a quiet one before quoting it.
The figure the Ray executor aims at is >= 1.6x with 2 workers on 2 cores (docs/bench-scale-out.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from compare_records import compare  # noqa: E402

from specbench.engine.device import cpu_name  # noqa: E402
from specbench.records.store import load_records  # noqa: E402

TARGET_RATIO = 1.6


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def timed_sweep(sweep: Path, out: Path, workers: int) -> dict:
    """Run the sweep with ``workers`` local Ray workers; wall seconds, and seconds after the workers were ready."""
    cmd = [sys.executable, "-m", "specbench", "sweep", str(sweep), "--workers", str(workers), "--out", str(out)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    ready = None
    while proc.poll() is None:
        if ready is None and (out / "run.json").exists():
            ready = time.perf_counter()
        time.sleep(0.05)
    ended = time.perf_counter()
    if proc.returncode != 0:
        raise SystemExit(
            f"bench-scale: the {workers}-worker sweep failed ({proc.returncode}): {proc.stderr.read().strip()[-500:]}"
        )
    ready = ready or ended
    records = load_records(out)
    replayed = records[records["mode"] == "replay"]
    live = records[records["mode"] == "live"]
    return {
        "workers": workers,
        "wall_s": ended - started,
        "start_s": ready - started,
        "work_s": ended - ready,
        "units": int(len(records)),
        "replayed": int(len(replayed)),
        "replayed_timed": int(replayed["decode_s"].notna().sum()),
        "live_flagged": int((~live["timing_ok"].astype(bool)).sum()),
        "live": int(len(live)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=ROOT / "sweeps" / "bench-scale.yaml")
    parser.add_argument("--workers", default="1,2", help="worker counts, the first is the reference (default 1,2)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",")]
    print(f"bench-scale: {args.sweep.name} with {', '.join(map(str, counts))} local Ray worker(s)")
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average before: {load()}")
    runs, notes = [], []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        folders = {n: Path(tmp) / f"workers-{n}" for n in counts}
        for n in counts:
            run = timed_sweep(args.sweep, folders[n], n)
            runs.append(run)
            print(
                f"  {n} worker(s): {run['wall_s']:.1f} s in all ({run['start_s']:.1f} s starting Ray and loading "
                f"models, {run['work_s']:.1f} s of pieces), {run['units']} units; load average now {load()}"
            )
            print(
                f"    live units with timing flagged: {run['live_flagged']} of {run['live']}; replayed units with "
                f"modelled timings: {run['replayed_timed']} of {run['replayed']} (a flagged calibration leaves "
                "the cost model without data: acceptance only)"
            )
        base = runs[0]
        reference = load_records(folders[counts[0]])
        for run in runs[1:]:
            result = compare(reference, load_records(folders[run["workers"]]))
            run["identical_units"], run["compared_columns"] = result["matched"], result["compared_columns"]
            run["differences"] = {k: [list(u) for u in v[:3]] for k, v in result["differ"].items()}
            run["speedup_wall"] = base["wall_s"] / run["wall_s"]
            run["speedup_work"] = base["work_s"] / run["work_s"] if run["work_s"] > 0 else float("nan")
            same = (
                result["matched"] == result["units"] == len(reference)
                and not result["only_before"]
                and not result["only_after"]
            )
            print(
                f"  {run['workers']} vs {base['workers']} worker(s): {run['speedup_wall']:.2f}x faster in all, "
                f"{run['speedup_work']:.2f}x on the pieces; records "
                + (
                    f"identical in {result['compared_columns']} non-timing columns ({result['matched']} units)"
                    if same
                    else f"DIFFER: {result['matched']} of {len(reference)} units identical, {run['differences']}"
                )
            )
            if not same:
                notes.append("records differ")
            if run["workers"] == 2 and run["speedup_wall"] < TARGET_RATIO:
                notes.append(
                    f"2 workers gave {run['speedup_wall']:.2f}x, under the {TARGET_RATIO}x aimed at "
                    "(a busy machine lowers it: see the load average)"
                )
    print(f"load average after: {load()}")
    for note in notes:
        print(f"note: {note}")
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu_name(), "cores": os.cpu_count(), "runs": runs}, indent=2))
    return 1 if any(n == "records differ" for n in notes) else 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the running sweep got the Ctrl-C too: it saved its units and stopped its workers
        print("bench-scale: interrupted", file=sys.stderr)
        raise SystemExit(130) from None

#!/usr/bin/env python
"""Live γ sweep vs replay sweep on the same prompts: wall time and the largest τ difference.

    python scripts/bench_replay.py                                  # SmolLM2-135M, humaneval, 3 prompts
    python scripts/bench_replay.py --prompts 2 --max-new-tokens 48  # quicker
    python scripts/bench_replay.py --json bench-replay.json

Two real sweeps (`specbench.measure.run.runner.SweepRunner`) in temporary folders, greedy, the same prompts:

* live: the baseline and every drafter at γ = 1..8 through the engine;
* replay: the baseline, the calibration units (``--calibration-gammas`` on
  ``--calibration-prompts`` prompts per drafter), and every drafter × γ replayed.

Printed: each sweep's wall time (models loaded once per sweep, included), the replay sweep split
into baseline / calibration / replay, the mean time of one live γ run (one drafter at one γ
over all prompts), the ratios of the replay sweep to it with and without the calibration units,
and the largest |τ live − τ replay| over configurations (0 when greedy replay is exact). The CPU
load (1-minute average) before and after is printed too: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from specbench.cli.views.progress_lines import LineProgress


class PhaseClock(LineProgress):
    """A sweep observer: wall time of baseline units, live speculative units (per configuration) and
    the replay phase (from the last live unit's end to the last replayed unit's end: trajectories,
    traces, walks, cost fits and writing); and, as `LineProgress`, a line per unit on stderr while it runs."""

    def __init__(self):
        super().__init__(sys.stderr)
        self.seconds = {"baseline": 0.0, "live": 0.0, "replay": 0.0}
        self.per_config: dict[str, float] = {}
        self._started: dict[str, float] = {}
        self._last_live: float | None = None

    def unit_started(self, unit):
        super().unit_started(unit)
        self._started[unit.unit_id] = time.perf_counter()

    def unit_done(self, unit, record):
        super().unit_done(unit, record)
        now = time.perf_counter()
        if unit.mode == "replay":
            self.seconds["replay"] = now - self._last_live
            return
        self._last_live = now
        spent = now - self._started.pop(unit.unit_id)
        kind = "baseline" if unit.config.is_baseline else "live"
        self.seconds[kind] += spent
        if kind == "live":
            self.per_config[unit.config.label] = self.per_config.get(unit.config.label, 0.0) + spent


def run_sweep(raw: dict, folder: Path) -> tuple[float, PhaseClock]:
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import SweepRunner

    clock = PhaseClock()
    runner = SweepRunner(build_spec(raw), folder, observer=clock)
    start = time.perf_counter()
    with clock:  # the heartbeat while a unit runs long
        runner.run()
    return time.perf_counter() - start, clock


def largest_tau_difference(live_folder: Path, replay_folder: Path) -> tuple[float, str]:
    from specbench.records.store import load_records
    from specbench.records.summary import configuration_table

    keys = ["drafter_label", "gamma", "temperature", "workload"]
    live = configuration_table(load_records(live_folder)).query("gamma > 0")
    replay = configuration_table(load_records(replay_folder)).query("gamma > 0 and mode == 'replay'")
    both = live.merge(replay, on=keys, suffixes=("_live", "_replay"))
    diff = (both["tau_live"] - both["tau_replay"]).abs()
    worst = both.loc[diff.idxmax()]
    return float(diff.max()), f"{worst['drafter_label']} γ={worst['gamma']} ({len(both)} configurations compared)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="smollm2-135m")
    parser.add_argument(
        "--drafter",
        action="append",
        default=None,
        help="TYPE or TYPE:key=value (repeatable; default ngram and the early-exit draft model)",
    )
    parser.add_argument("--workload", default="humaneval")
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--max-gamma", type=int, default=8)
    parser.add_argument("--calibration-gammas", default="1,8")
    parser.add_argument("--calibration-prompts", type=int, default=1)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("SPECBENCH_THREADS", "2")))
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures to this JSON file.")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    drafters = args.drafter or ["ngram", "draft-model:model=smollm2-135m-exit8"]
    gammas = list(range(1, args.max_gamma + 1))
    raw = {
        "name": "bench-replay",
        "target": args.target,
        "max_new_tokens": args.max_new_tokens,
        "drafters": drafters,
        "gammas": gammas,
        "temperatures": [0.0],
        "workloads": [{"name": args.workload, "count": args.prompts}],
    }
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        live_wall, live = run_sweep({**raw, "mode": "live"}, Path(tmp) / "live")
        calibration = {
            "gammas": [int(g) for g in args.calibration_gammas.split(",")],
            "prompts": args.calibration_prompts,
        }
        replay_wall, replay = run_sweep({**raw, "mode": "replay", "calibration": calibration}, Path(tmp) / "replay")
        tau_diff, where = largest_tau_difference(Path(tmp) / "live", Path(tmp) / "replay")
    load_after = os.getloadavg()[0]

    single = sum(live.per_config.values()) / len(live.per_config)
    proper = replay.seconds["baseline"] + replay.seconds["replay"]
    figures = {
        "target": args.target,
        "drafters": drafters,
        "workload": args.workload,
        "prompts": args.prompts,
        "max_new_tokens": args.max_new_tokens,
        "gammas": gammas,
        "threads": args.threads,
        "load_1min_before": load_before,
        "load_1min_after": load_after,
        "live_sweep_wall_s": live_wall,
        "live_baseline_s": live.seconds["baseline"],
        "live_speculative_s": live.seconds["live"],
        "single_live_gamma_run_s": single,
        "replay_sweep_wall_s": replay_wall,
        "replay_baseline_s": replay.seconds["baseline"],
        "replay_calibration_s": replay.seconds["live"],
        "replay_compute_s": replay.seconds["replay"],
        "replay_vs_single_run": proper / single,
        "replay_with_calibration_vs_single_run": (proper + replay.seconds["live"]) / single,
        "max_tau_difference": tau_diff,
        "max_tau_difference_at": where,
    }
    print(
        f"target {args.target}, {args.workload} × {args.prompts} prompts, {args.max_new_tokens} new tokens, "
        f"greedy, γ 1..{args.max_gamma}, drafters: {', '.join(drafters)}; {args.threads} threads; "
        f"load {load_before:.2f} → {load_after:.2f}"
    )
    print(
        f"live sweep    {live_wall:8.1f} s wall: baseline {live.seconds['baseline']:.1f} s, "
        f"{len(live.per_config)} speculative configurations {live.seconds['live']:.1f} s"
    )
    print(
        f"replay sweep  {replay_wall:8.1f} s wall: baseline {replay.seconds['baseline']:.1f} s, calibration "
        f"{replay.seconds['live']:.1f} s, replay of {len(live.per_config)} configurations "
        f"{replay.seconds['replay']:.1f} s"
    )
    print(f"one live γ run (mean over configurations): {single:.1f} s")
    print(
        f"replay (baseline + replay) ÷ one live γ run: {figures['replay_vs_single_run']:.2f}× "
        f"(target ≤ 1.5×); with calibration: {figures['replay_with_calibration_vs_single_run']:.2f}×"
    )
    print(f"largest |τ live − τ replay|: {tau_diff:.3g} at {where}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

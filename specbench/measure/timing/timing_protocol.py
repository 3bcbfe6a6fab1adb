"""How a sweep times units on a machine it shares: warm-up, interleaving, interference, re-timing.

The rule (docs/results-schema.md, "Timing protocol", says the same; the sweep's ``timing`` key is read by
`specbench.measure.grid.timing`):

1. **Warm-up.** Before the first timed unit, untimed, every configuration of the block is built
   and run through every shape its timed units will meet (`specbench.engine.warm_up`: verify
   sizes 1 … γ + 1 after a short and the longest context, the KV cache sized for it, the draft
   and sampling paths), then the target decodes for ``warmup_s`` seconds (caches, allocator,
   CPU clock). run.json's ``warm_up`` records what ran.
2. **Blocks.** The live units of one prompt turn form a block: the target-only baseline and
   that prompt's speculative configurations. They are timed back to back, in the block's
   ``order``:

   * ``once``: baseline, c1 … cn (each unit timed once);
   * ``bracket`` (default): baseline, c1 … cn, baseline — the baseline is timed before and after
     its configurations, so a slow moment shows on both sides of the comparison;
   * ``abba``: baseline, c1 … cn, cn … c1, baseline — every unit timed twice, symmetric about
     the block's middle, so a linear drift of the machine's speed cancels in every ratio.

   A block holding only a baseline (replay sweeps' other prompts) is timed once.
3. **Machine state.** Every timed attempt records the load average, the CPU time other
   processes used during it and the CPU clock (`specbench.measure.timing.machine_state`).
4. **Interference.** An attempt is *disturbed* when other processes kept more than
   ``free + max_other_cores`` cores busy on average while it ran, where ``free`` = CPU cores −
   the torch threads this sweep uses (cores the sweep leaves idle may be used by others
   without harm); or, when a unit was timed more than once, when it took more than
   ``OUTLIER_RATIO`` × the unit's fastest attempt.
5. **Re-timing.** The disturbed units of a block are timed once more at the block's end
   (``retries`` passes), except when *every* attempt of the block was disturbed: the load was
   then sustained and a re-timing would meet it again.
6. **What is kept.** A unit's timings (every ``*_s`` column and the per-round timings) are the
   mean over its undisturbed attempts. A unit with no undisturbed attempt keeps the mean of all
   its attempts and gets ``timing_ok = false``: it is left out of every timing fit (cost model,
   measured speedups, modelled replay timings) unless no undisturbed unit is left, in which case
   all are used and the output says the timing was disturbed. Acceptance figures (α, τ, rounds,
   tokens) never depend on time and are always used.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specbench.measure.grid.timing import TIMED_LISTS, TIMED_SCALARS, TimingProtocol
from specbench.measure.grid.units import Unit
from specbench.measure.timing.energy import energy_columns, meter
from specbench.measure.timing.machine_state import MachineState

OUTLIER_RATIO = 1.3


# ----------------------------------------------------------------------------- schedule


def schedule(n_units: int, has_baseline: bool, order: str) -> list[int]:
    """Indices (into a block whose unit 0 is the baseline when ``has_baseline``) in timing order."""
    if n_units <= 1 or order == "once":
        return list(range(n_units))
    configs = list(range(1 if has_baseline else 0, n_units))
    head = [0] if has_baseline else []
    if order == "bracket":
        return head + configs + head if has_baseline else configs
    return head + configs + configs[::-1] + head  # abba


def free_cores(n_cpus: int, threads: int) -> float:
    return float(max(n_cpus - threads, 0))


def disturbed(state: MachineState, threads: int, protocol: TimingProtocol) -> bool:
    """Rule 4 (OS part): other processes used more than the idle cores + the tolerance."""
    busy = state.other_cores
    return bool(not math.isnan(busy) and busy > free_cores(state.n_cpus, threads) + protocol.max_other_cores)


@dataclass
class Attempt:
    record: dict  # the full record this timed run produced
    state: MachineState
    disturbed: bool


def run_block(
    units: list[Unit], measure: Callable[[Unit], tuple[dict, MachineState]], protocol: TimingProtocol, threads: int
) -> list[tuple[Unit, list[Attempt]]]:
    """Time a block's units (baseline first, if present) by the protocol; ``measure(unit)`` runs
    one unit and returns (record, MachineState). Returns each unit with its attempts."""
    has_baseline = bool(units) and units[0].config.is_baseline
    attempts: list[list[Attempt]] = [[] for _ in units]
    for i in schedule(len(units), has_baseline, protocol.order):
        record, state = measure(units[i])
        attempts[i].append(Attempt(record, state, disturbed(state, threads, protocol)))
    _mark_outliers(attempts)
    everything_disturbed = all(a.disturbed for unit in attempts for a in unit)
    for _ in range(protocol.retries if not everything_disturbed else 0):
        again = [i for i, unit in enumerate(attempts) if not any(not a.disturbed for a in unit)]
        if not again:
            break
        for i in again:
            record, state = measure(units[i])
            attempts[i].append(Attempt(record, state, disturbed(state, threads, protocol)))
        _mark_outliers(attempts)
    return list(zip(units, attempts))


def _mark_outliers(attempts: list[list[Attempt]]) -> None:
    """Rule 4 (relative part): an attempt slower than OUTLIER_RATIO × the unit's fastest."""
    for unit in attempts:
        if len(unit) < 2:
            continue
        per_token = [a.record["decode_s"] / max(a.record["decode_tokens"], 1) for a in unit]
        fastest = min(per_token)
        for a, t in zip(unit, per_token):
            if fastest > 0 and t > OUTLIER_RATIO * fastest:
                a.disturbed = True


def combine(attempts: list[Attempt]) -> dict:
    """The unit's record: acceptance from its first attempt, timings averaged over the kept ones
    (rule 6), and the machine-state columns."""
    kept = [a for a in attempts if not a.disturbed] or list(attempts)
    record = dict(kept[0].record)
    same_rounds = all(a.record["round_drafted"] == record["round_drafted"] for a in kept)
    if not same_rounds:  # not the same rounds (should not happen: seeded): keep the least disturbed attempt
        kept = [
            min(
                kept,
                key=lambda a: (
                    a.state.other_cores if a.state.other_cores == a.state.other_cores else 0.0,
                    a.record["decode_s"],
                ),
            )
        ]
        record = dict(kept[0].record)
    for key in TIMED_SCALARS:
        record[key] = float(np.mean([a.record[key] for a in kept]))
    for key in TIMED_LISTS:
        if record[key]:
            record[key] = np.mean([np.asarray(a.record[key], dtype=float) for a in kept], axis=0).tolist()
    record["tokens_per_s"] = record["decode_tokens"] / record["decode_s"] if record["decode_s"] > 0 else 0.0
    ok = any(not a.disturbed for a in attempts)
    record.update(machine_columns(attempts, kept, ok))
    record.update(
        energy_columns(
            float(np.mean([timed_energy(a) for a in kept])),
            record.get("new_tokens", 0),
            record.get("accepted", 0),
            meter(),
        )
    )
    return record


def timed_energy(attempt: Attempt) -> float:
    """Joules above idle of an attempt's timed generation: the power above idle averaged over the probed call ×
    its timed seconds (prefill + decode). The call also builds a configuration's engine the first time, which its
    timings leave out; so does its energy."""
    state, timed = attempt.state, attempt.record.get("prefill_s", 0.0) + attempt.record["decode_s"]
    if not state.wall_s > 0 or not timed >= 0:
        return state.energy_j
    return state.energy_j * min(1.0, timed / state.wall_s)


def machine_columns(attempts: list[Attempt], kept: list[Attempt], ok: bool) -> dict:
    def mean(values):
        values = [v for v in values if v == v]
        return float(np.mean(values)) if values else float("nan")

    states = [a.state for a in kept]
    flags = sum(a.disturbed for a in attempts)
    if ok:
        flag = "" if flags == 0 else f"{flags} of {len(attempts)} attempts disturbed, re-timed"
    else:
        flag = f"disturbed: all {len(attempts)} attempt(s) under interference"
    return {
        "timing_ok": ok,
        "timing_flag": flag,
        "timing_attempts": len(attempts),
        "timing_kept": len(kept),
        "attempt_decode_s": [float(a.record["decode_s"]) for a in attempts],
        "attempt_other_cores": [float(a.state.other_cores) for a in attempts],
        "load_1m": mean(s.load_1m for s in states),
        "other_cpu_s": float(sum(s.other_cpu_s for s in states)),
        "other_cores": mean(s.other_cores for s in states),
        "cpu_mhz": mean(s.cpu_mhz for s in states),
    }


def warm_up(generate, seconds: float, max_rounds: int = 50) -> int:
    """Call ``generate()`` (an untimed decode) until ``seconds`` have passed; returns the calls."""
    start, calls = time.perf_counter(), 0
    while calls < max_rounds and (calls == 0 or time.perf_counter() - start < seconds):
        generate()
        calls += 1
    return calls if seconds > 0 else 0

"""One batch of a serving-engine sweep: its requests, their arrivals, the machine while it ran.

A batch is every unit of one (configuration, load, workload turn) — `specbench.measure.serving.groups` forms
them. Here a batch

1. gets its requests: closed loop, all ready at once and kept ``concurrency`` in flight; open loop
   (a request rate), each with its arrival time from `specbench.measure.serving.arrivals`, drawn from a seed
   that depends on the load and the prompts, not the configuration (the baseline and every
   configuration at one rate meet the same arrivals);
2. has its engine started and warmed up (`ServingBackend.prepare`), untimed;
3. runs through `Backend.generate_batch` inside a `MachineProbe` whose own CPU includes the engine's
   process sessions (`ServingBackend.timing_scope`);
4. gives every record the batch's columns — ``batch_id``, ``batch_requests``,
   ``batch_output_tokens``, ``batch_wall_s`` (first arrival to last token), from which system output
   tokens/s is Σ output tokens ÷ wall time — and the machine-state columns of the timing protocol.
   Interference is judged by rule 4 with the cores the engine itself keeps busy; a disturbed batch
   is flagged (``timing_ok`` false), not re-timed: repeating a whole batch under sustained load
   would meet the same load (docs/results-schema.md, "Timing protocol");
5. shares the batch's energy above idle (`specbench.measure.timing.energy`; none without a counter) among its
   requests by their time in flight, E_i = E · latency_i ÷ Σ latency (`share_batch_energy`): the
   shares add up to the batch's energy, and a ratio of sums over any set of prompts,
   Σ E_i ÷ Σ tokens_i = [E ÷ Σ latency] · [Σ latency_i ÷ Σ tokens_i], varies with the prompts as the
   system tokens/s does (docs/results-schema.md, "Energy").
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence

from specbench.backends.base import Request
from specbench.measure.serving.arrivals import arrival_offsets, batch_seed
from specbench.measure.timing.energy import energy_columns, meter
from specbench.measure.timing.machine_state import MachineProbe
from specbench.measure.timing.timing_protocol import Attempt, TimingProtocol, disturbed, machine_columns


def batch_requests(spec, group, prompt_ids: list[list[int]]) -> list[Request]:
    """The requests of ``group`` (a `specbench.measure.serving.groups.Group`), with arrivals under a request rate."""
    units = group.units
    arrivals: Sequence[float | None] = [None] * len(units)  # None: all at once (no request rate)
    if group.request_rate is not None:
        prompts = sorted(f"{u.workload.name}/{u.prompt.prompt_id}/{u.repeat}" for u in units)
        seed = batch_seed(spec.seed, group.request_rate, spec.arrivals, group.turn, *prompts)
        arrivals = arrival_offsets(len(units), group.request_rate, spec.arrivals, seed)
    return [
        Request(ids, u.max_new_tokens, u.seed, not spec.ignore_eos, arrival)
        for u, ids, arrival in zip(units, prompt_ids, arrivals)
    ]


def run_batch(backend, config, requests: list[Request], concurrency: int, protocol: TimingProtocol):
    """Run one batch: (results, the columns every record of the batch shares)."""
    prepare = getattr(backend, "prepare", None)
    if prepare is not None:
        prepare(config, requests)
    scope = backend.timing_scope() if hasattr(backend, "timing_scope") else None
    probe = MachineProbe(scope.sessions if scope is not None else ())
    results = backend.generate_batch(config, requests, concurrency)
    state = probe.stop()
    starts = [r.arrival_s for r in results if r.arrival_s is not None]
    ends = [r.finish_s for r in results if r.finish_s is not None]
    wall = max(ends) - min(starts) if starts and ends else math.nan
    columns = {
        "batch_id": uuid.uuid4().hex[:16],
        "batch_requests": len(results),
        "batch_output_tokens": int(sum(len(r.tokens) for r in results)),
        "batch_wall_s": float(wall),
    }
    hit = scope is not None and disturbed(state, scope.cores, protocol)
    attempt = Attempt({"decode_s": math.nan}, state, hit)
    machine = machine_columns([attempt], [attempt], not hit)
    machine["timing_flag"] = (
        f"disturbed: the batch ran beside other processes ({state.other_cores:.2f} cores busy)" if hit else ""
    )
    return results, {**columns, **machine, "energy_j": state.energy_j}


def share_batch_energy(records: list[dict], batch_joules: float) -> None:
    """Give each record of one batch its energy columns: the batch's joules above idle shared by time in
    flight (module docstring, step 5); null columns without a counter."""
    latencies = [r.get("latency_s") for r in records]
    known = [v for v in latencies if v is not None and math.isfinite(v) and v >= 0]
    in_flight = known if len(known) == len(records) and sum(known) > 0 else [1.0] * len(records)  # else equal
    for record, latency in zip(records, in_flight):
        share = batch_joules * (latency / sum(in_flight))
        record.update(energy_columns(share, record["new_tokens"], record["accepted"], meter()))

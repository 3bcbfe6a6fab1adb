"""Serving-engine sweeps: units run a (configuration, load) group at a time.

The own engine measures one request at a time, prompt by prompt (`specbench.measure.runner`).
A serving engine (``backend: vllm``, ...) is started once per speculative configuration and
measures many requests in flight, so its units are grouped: every unit of one configuration,
concurrency and turn goes to `Backend.generate_batch` together, which keeps ``concurrency``
requests in flight. Groups run configuration by configuration (baselines first: turn 2 of a
conversation continues the baseline's turn-1 answer), so an engine starts once per
configuration. Each unit's record is written as soon as its group returns: a worker that dies
mid-sweep loses only the group in flight, and a rerun resumes with the groups not yet done. A
group's load is its concurrency, or its request rate (open loop); one group is one batch
(`specbench.measure.batches`: arrivals, the engine's start, the machine state, the batch's columns).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from specbench.measure.batches import batch_requests, run_batch
from specbench.measure.spec import RunConfig, SweepSpec
from specbench.measure.units import Unit, make_record
from specbench.records.store import atomic_write_json

BACKEND_FILE = "backend.json"


@dataclass
class Group:
    config: RunConfig
    concurrency: int
    turn: int
    units: list[Unit]
    request_rate: float | None = None  # open loop: requests per second (None: closed loop)


def uses_groups(spec: SweepSpec) -> bool:
    """Whether a sweep's live units run in groups (every backend but specbench's own engine)."""
    return spec.backend != "own"


def group_units(units: list[Unit]) -> list[Group]:
    """Live units grouped by (configuration, load, workload, turn), in the order they should run: baselines
    first, then configurations in grid order; within one, load, then workload, then turn. One workload per
    group, so that a batch's wall time (system throughput) belongs to one workload."""
    groups: dict[tuple, Group] = {}
    first_seen: dict[RunConfig, int] = {}
    workloads: dict[str, int] = {}
    for unit in units:
        if unit.mode != "live":
            continue
        first_seen.setdefault(unit.config, len(first_seen))
        workloads.setdefault(unit.workload.name, len(workloads))
        key = (unit.config, unit.concurrency, unit.request_rate, unit.workload.name, unit.turn)
        if key not in groups:
            groups[key] = Group(unit.config, unit.concurrency, unit.turn, [], unit.request_rate)
        groups[key].units.append(unit)
    return sorted(groups.values(), key=lambda g: (not g.config.is_baseline, first_seen[g.config], g.concurrency,
                                                  g.request_rate or 0.0, workloads[g.units[0].workload.name], g.turn))


def warm_first(groups: list[Group], is_warm) -> list[Group]:
    """Baselines first (turn 2 continues their turn-1 answers), then the configurations whose engine is
    still running (a kept engine of a serving backend), then the rest, each in its own order."""
    if is_warm is None:
        return groups
    warm = {id(g): is_warm(g.config) for g in groups}
    return sorted(groups, key=lambda g: (not g.config.is_baseline, not warm[id(g)]))


def run_groups(runner, units: list[Unit]) -> int:
    """Run the live ``units`` through ``runner.backend.generate_batch``; returns how many were measured."""
    spec, measured = runner.spec, 0
    for group in warm_first(group_units(units), getattr(runner.backend, "is_warm", None)):
        requests = batch_requests(spec, group, [runner.prompt_ids(u) for u in group.units])
        load = f"concurrency {group.concurrency}" if group.request_rate is None else \
            f"{group.request_rate:g} requests/s (at most {group.concurrency} in flight)"
        runner.observer.status(f"{group.config.label} · {load} · {len(requests)} requests")
        for unit in group.units:
            runner.observer.unit_started(unit)
        results, shared = run_batch(runner.backend, group.config, requests, group.concurrency, spec.timing)
        for unit, result in zip(group.units, results):
            record = make_record(unit, result, spec, runner.device_name)
            record.update(shared, attempt_decode_s=[record["decode_s"]])
            runner.store.write_unit(record)
            if unit.config.is_baseline and unit.turn == 1:
                runner._answers[unit.group] = [runner.backend.tokenizer.decode(result.tokens,
                                                                               skip_special_tokens=True)]
            measured += 1
            runner.observer.unit_done(unit, record)
        write_backend_file(runner)
    return measured


def write_backend_file(runner) -> None:
    """``backend.json`` in the results folder: what the engine ran — its version and, per
    configuration, the exact engine settings (vLLM: the ``speculative_config``) — merged over reruns."""
    described = getattr(runner.backend, "describe", None)
    if described is None:
        return
    path = runner.store.folder / BACKEND_FILE
    try:
        old = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        old = {}
    new = described()
    scope = getattr(runner.backend, "timing_scope", None)
    if scope is not None:
        new["machine_state"] = scope().observed  # what the records' machine-state columns cover
    new["configs"] = {**old.get("configs", {}), **new.get("configs", {})}
    atomic_write_json(path, {**old, **new})

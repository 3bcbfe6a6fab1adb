"""Serving-engine sweeps: units run a (configuration, load) group at a time.

The own engine measures one request at a time, prompt by prompt (`specbench.measure.run.runner`).
A serving engine (``backend: vllm``, ...) is started once per speculative configuration and
measures many requests in flight, so its units are grouped: every unit of one configuration,
concurrency and turn goes to `Backend.generate_batch` together, which keeps ``concurrency``
requests in flight. Groups run configuration by configuration (baselines first: turn 2 of a
conversation continues the baseline's turn-1 answer), so an engine starts once per
configuration. A group is one piece of work for an executor (`specbench.measure.executors.pieces`): each unit's
record is written as soon as its group returns, so a worker that dies mid-sweep loses only the group in
flight, and a rerun resumes with the groups not yet done. A group's load is its concurrency, or its
request rate (open loop); one group is one batch (`specbench.measure.serving.batches`: arrivals, the engine's
start, the machine state, the batch's columns).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specbench.backends import registry as backends
from specbench.errors import SpecbenchError
from specbench.measure.grid.sweep_spec import RunConfig, SweepSpec
from specbench.measure.grid.units import Unit, UnitOutput, make_record
from specbench.measure.serving.batches import batch_requests, run_batch, share_batch_energy
from specbench.measure.work_context import WorkContext
from specbench.safe_files import read_json, write_json

BACKEND_FILE = "backend.json"


@dataclass
class Group:
    config: RunConfig
    concurrency: int
    turn: int
    units: list[Unit]
    request_rate: float | None = None  # open loop: requests per second (None: closed loop)


def uses_groups(spec: SweepSpec) -> bool:
    """Whether a sweep's live units run in groups (a backend measuring many requests in flight)."""
    return backends.get(spec.backend).concurrent


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
    return sorted(
        groups.values(),
        key=lambda g: (
            not g.config.is_baseline,
            first_seen[g.config],
            g.concurrency,
            g.request_rate or 0.0,
            workloads[g.units[0].workload.name],
            g.turn,
        ),
    )


def warm_first(groups: list[Group], is_warm) -> list[Group]:
    """Baselines first (turn 2 continues their turn-1 answers), then the configurations whose engine is
    still running (a kept engine of a serving backend), then the rest, each in its own order."""
    if is_warm is None:
        return groups
    warm = {id(g): is_warm(g.config) for g in groups}
    return sorted(groups, key=lambda g: (not g.config.is_baseline, not warm[id(g)]))


def load_label(concurrency: int, request_rate: float | None) -> str:
    """A group's load in words: its concurrency, or its request rate and in-flight cap."""
    if request_rate is None:
        return f"concurrency {concurrency}"
    return f"{request_rate:g} requests/s (at most {concurrency} in flight)"


def group_outputs(context: WorkContext, piece):
    """Run one group (a `specbench.measure.executors.pieces.Piece` of kind group) as one batch on ``context.backend``
    (`specbench.measure.serving.batches`); yields each unit's `UnitOutput` once the batch returns."""
    spec, first = context.spec, piece.units[0]
    group = Group(first.config, piece.concurrency, first.turn, piece.units, piece.request_rate)
    requests = batch_requests(spec, group, [context.prompt_ids(u, piece.answers) for u in group.units])
    context.observer.status(
        f"{group.config.label} · {load_label(group.concurrency, group.request_rate)} · {len(requests)} requests"
    )
    for unit in group.units:
        context.observer.unit_started(unit)
    results, shared = run_batch(context.backend, group.config, requests, group.concurrency, spec.timing)
    records = []
    for unit, result in zip(group.units, results):
        record = make_record(unit, result, spec, context.device_name)
        record.update(shared, attempt_decode_s=[record["decode_s"]])
        records.append(record)
    share_batch_energy(records, shared["energy_j"])
    for unit, record in zip(group.units, records):
        yield UnitOutput(unit, record)


def write_backend_file(folder, described: dict | None) -> None:
    """``backend.json`` in the results folder: what the engine ran — its version and, per
    configuration, the exact engine settings (vLLM: the ``speculative_config``) — merged over reruns
    and over the workers that ran the groups."""
    if described is None:
        return
    path = Path(folder) / BACKEND_FILE
    try:
        old = read_json(path, "backend file") if path.exists() else {}
    except SpecbenchError:
        old = {}
    old = old if isinstance(old, dict) else {}
    new = dict(described)
    new["configs"] = {**old.get("configs", {}), **new.get("configs", {})}
    write_json(path, {**old, **new})

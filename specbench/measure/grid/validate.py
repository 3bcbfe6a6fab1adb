"""Checks that run before any work: grid size, device, context windows, output paths.

The rule: whatever a sweep or a run would trip over later is refused up front, in one line,
before a model loads where possible and always before run.json or a record is written. Value
checks of the spec itself live in `specbench.measure.grid.values` (re-exported here).
"""

from __future__ import annotations

import os
from pathlib import Path

from specbench.backends import registry as backends
from specbench.catalogue import gguf_types
from specbench.errors import SpecbenchError
from specbench.measure.grid.estimate import forward_cost, human_duration, model_shape, prompt_tokens
from specbench.measure.grid.values import (  # noqa: F401
    GAMMA_LIMIT,
    MAX_CONFIGS,
    check_config_count,
    check_name,
    strict_bool,
)
from specbench.models.limits import check_context, check_window, context_window  # noqa: F401
from specbench.models.resolve import locate_model, resolve_device
from specbench.records.lock import is_writable_dir
from specbench.workloads.catalog import encode_turn

MAX_UNITS = 5_000  # units without --yes
HARD_MAX_UNITS = 1_000_000  # units even with --yes


def check_device(device: str) -> str:
    """The device exists here (cuda on a CPU-only machine is refused before anything loads)."""
    return resolve_device(device)


def model_names(spec) -> list[tuple[str, str]]:
    """(role, name) of every model a sweep's run resolves by name: the target (or, for a serving backend, the
    ``tokenizer`` option that replaces it) and each configuration's draft model."""
    names = [("target", spec.backend_options.get("tokenizer") or spec.target)]
    for config in spec.configs:
        drafter = config.drafter
        if drafter is not None and drafter.params_dict.get("model") is not None:
            names.append((f"drafter {drafter.type}", drafter.params_dict["model"]))
    return list(dict.fromkeys(names))


def check_models(spec, *, ask_hub: bool = False) -> None:
    """Every model the sweep names resolves (`specbench.models.resolve.locate_model`: the rule the loaders
    apply), else one line naming its role — asked by the run and by ``--dry-run`` alike, before anything
    loads; ``ask_hub``: also ask a reachable hub, once, whether it has a hub id."""
    for role, name in model_names(spec):
        try:
            base, kind = gguf_types.split(name)  # ``alias@Q8_0``: the alias at a GGUF type llama-quantize writes
            if kind is not None and not backends.get(spec.backend).gguf_types:
                raise SpecbenchError(
                    f"model '{name}' names a GGUF type: backend {spec.backend} does not run GGUF files as they are "
                    f"(use {', '.join(backends.names(gguf_types=True))})"
                )
            locate_model(base, ask_hub=ask_hub)
        except SpecbenchError as exc:
            raise SpecbenchError(f"{role}: {exc}") from None


def grid_prompts(spec, workloads, shard: tuple[int, int] = (0, 1), in_shard=None):
    """(prompt, max new tokens, units per turn, generations per turn) of every prompt of the grid (one shard
    of it), by arithmetic: nothing is expanded. A generation is a unit run live (a replayed one generates
    nothing); each counts every repeat.

    ``in_shard(prompt_id, workload_name, shard)`` says which prompts the shard holds (the runner's rule).
    """
    speculative = [c for c in spec.configs if not c.is_baseline]
    per_t = {t: [c for c in speculative if c.temperature == t] for t in spec.temperatures}
    cal = spec.calibration
    for workload in workloads:
        max_new = spec.max_new_tokens_for(workload)
        prompts = [p for p in workload.prompts if in_shard is None or in_shard(p.prompt_id, workload.name, shard)]
        for index, prompt in enumerate(prompts):
            units = generations = 0
            for configs in per_t.values():
                if spec.runs_live:
                    live = len(configs)
                elif cal is not None and index < cal.prompts:
                    live = sum(1 for c in configs if c.gamma in cal.gammas)
                else:
                    live = 0
                units += 1 + live + (len(configs) if spec.replays else 0)
                generations += 1 + live
            yield prompt, max_new, units * spec.repeats, generations * spec.repeats


def count_units(spec, workloads, shard: tuple[int, int] = (0, 1), in_shard=None) -> tuple[int, int]:
    """(units, generated-token bound) of the grid (`grid_prompts`)."""
    units = tokens = 0
    for prompt, max_new, per_turn, generations in grid_prompts(spec, workloads, shard, in_shard):
        units += per_turn * len(prompt.turns)
        tokens += generations * max_new * len(prompt.turns)
    return units, tokens


def check_grid_size(spec, workloads, shard: tuple[int, int] = (0, 1), *, yes: bool = False, in_shard=None) -> int:
    """Refuse a grid over `MAX_UNITS` units without --yes (with the estimate), or over `HARD_MAX_UNITS`."""
    units, tokens = count_units(spec, workloads, shard, in_shard)
    if units > HARD_MAX_UNITS:
        raise SpecbenchError(
            f"the grid has {units:,} units, over the hard limit of {HARD_MAX_UNITS:,}; "
            "split the sweep (--shard, fewer prompts or configurations)"
        )
    if units > MAX_UNITS and not yes:
        cost = forward_cost(spec, model_shape(spec.target))
        hint = ""
        if cost is not None:  # the dry-run estimate's prefill and decode at context (measure.grid.estimate)
            seconds = sum(
                generations * cost.unit_s(prompt_tokens(prompt, turn, max_new), max_new)
                for prompt, max_new, _, generations in grid_prompts(spec, workloads, shard, in_shard)
                for turn in range(1, len(prompt.turns) + 1)
            )
            hint = f", roughly {human_duration(seconds)} of generation on {spec.device}"
        raise SpecbenchError(
            f"the grid has {units:,} units (at most {tokens:,} generated tokens{hint}), over the "
            f"limit of {MAX_UNITS:,}; check it with --dry-run, then pass --yes to run it"
        )
    return units


def prompt_room(window: int | None, max_new_tokens: int) -> int | None:
    """Tokens a prompt may take so that max_new_tokens still fit the context window (None: window unknown)."""
    return None if window is None else window - max_new_tokens


def check_unit_lengths(backend, target: str, units) -> None:
    """First turns of every live unit fit the target's context window (later turns are checked when asked)."""
    seen: set = set()
    for unit in units:
        if unit.mode != "live" or unit.turn != 1:
            continue
        key = (unit.workload.name, unit.prompt.prompt_id, unit.max_new_tokens)
        if key in seen:
            continue
        seen.add(key)
        ids = encode_turn(
            backend.tokenizer,
            unit.workload,
            unit.prompt,
            0,
            [],
            token_limit=prompt_room(backend.context_window, unit.max_new_tokens),
        )
        check_window(
            backend.context_window,
            target,
            len(ids),
            unit.max_new_tokens,
            f"{unit.workload.name} {unit.prompt.prompt_id}",
        )


def check_output_file(path, flag: str) -> None:
    """A file we are about to write: not a directory, in an existing writable folder."""
    path = Path(path)
    try:
        if path.is_dir():
            raise SpecbenchError(f"{flag} {path} is a directory; give a file name")
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise SpecbenchError(f"{flag} {path}: folder {parent} does not exist")
        if path.exists() and not (os.access(path, os.W_OK) and path.stat().st_mode & 0o222):
            raise SpecbenchError(f"{flag} {path} is read-only")
        if not is_writable_dir(parent):
            raise SpecbenchError(f"{flag} {path}: folder {parent} is read-only")
    except OSError as exc:
        raise SpecbenchError(f"{flag} {path}: {exc.strerror or exc}") from None

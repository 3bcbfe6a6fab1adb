"""Checks that run before any work: names, strict values, grid size, device, context windows.

The rule: whatever a sweep or a run would trip over later is refused up front, in one line,
before a model loads where possible and always before run.json or a record is written.
"""

from __future__ import annotations

import math
import re

from specbench.errors import SpecbenchError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_GAMMA = 128
MAX_CONFIGS = 20_000  # configurations (drafter × γ × tree × temperature): never more, even with --yes
MAX_UNITS = 5_000  # units without --yes
HARD_MAX_UNITS = 1_000_000  # units even with --yes


def check_name(name: str, where: str) -> str:
    """A sweep name is a folder name: letters, digits, '.', '_', '-' (no '/', no '..', no leading dot)."""
    name = str(name)
    if not NAME_RE.match(name) or ".." in name:
        raise SpecbenchError(f"{where}: sweep name {name[:60]!r} is not allowed: use letters, digits, '.', '_' "
                             "and '-' (at most 100, not starting with '.' or '-', no '..')")
    return name


def strict_bool(value, where: str, key: str) -> bool:
    """true/false only: the string "false" is not true, 1 and 0 are not booleans."""
    if isinstance(value, bool):
        return value
    raise SpecbenchError(f"{where}: '{key}' must be true or false, got {value!r}")


def finite(value: float, where: str, key: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isfinite(value):
        raise SpecbenchError(f"{where}: '{key}' must be a finite number, got {value}")
    return value


def check_sampling(temperature: float, top_p: float, top_k: int, where: str = "run") -> None:
    """Sampling flags of `specbench run`: finite temperature >= 0, top-p in (0, 1], top-k >= 0."""
    finite(temperature, where, "--temperature")
    finite(top_p, where, "--top-p")
    if temperature < 0:
        raise SpecbenchError(f"{where}: '--temperature' must be >= 0, got {temperature}")
    if not 0 < top_p <= 1:
        raise SpecbenchError(f"{where}: '--top-p' must be in (0, 1], got {top_p}")
    if top_k < 0:
        raise SpecbenchError(f"{where}: '--top-k' must be >= 0, got {top_k}")


def check_device(device: str) -> str:
    """The device exists here (cuda on a CPU-only machine is refused before anything loads)."""
    from specbench.models.resolve import resolve_device

    return resolve_device(device)


def count_units(spec, workloads, shard: tuple[int, int] = (0, 1)) -> tuple[int, int]:
    """(units, generated-token bound) of the grid, by arithmetic: nothing is expanded."""
    from specbench.measure.runner import _in_shard

    speculative = [c for c in spec.configs if not c.is_baseline]
    per_t = {t: [c for c in speculative if c.temperature == t] for t in spec.temperatures}
    cal = spec.calibration
    units = tokens = 0
    for workload in workloads:
        max_new = spec.max_new_tokens or workload.max_new_tokens
        prompts = [p for p in workload.prompts if _in_shard(p.prompt_id, workload.name, shard)]
        for index, prompt in enumerate(prompts):
            per_turn = 0
            for t, configs in per_t.items():
                if spec.runs_live:
                    live = len(configs)
                elif cal is not None and index < cal.prompts:
                    live = sum(1 for c in configs if c.gamma in cal.gammas)
                else:
                    live = 0
                per_turn += 1 + live + (len(configs) if spec.replays else 0)
                tokens += (1 + live) * max_new * len(prompt.turns) * spec.repeats
            units += per_turn * len(prompt.turns) * spec.repeats
    return units, tokens


def check_config_count(counts: dict, where: str) -> None:
    """Axis lengths multiplied, before the configurations are expanded."""
    total = math.prod(max(1, n) for n in counts.values())
    if total > MAX_CONFIGS:
        axes = " × ".join(f"{n} {k}" for k, n in counts.items())
        raise SpecbenchError(f"{where}: {axes} = {total:,} configurations, over the limit of {MAX_CONFIGS:,}; "
                             "split the sweep")


def check_grid_size(spec, workloads, shard: tuple[int, int] = (0, 1), *, yes: bool = False) -> int:
    """Refuse a grid over `MAX_UNITS` units without --yes (with the estimate), or over `HARD_MAX_UNITS`."""
    units, tokens = count_units(spec, workloads, shard)
    if units > HARD_MAX_UNITS:
        raise SpecbenchError(f"the grid has {units:,} units, over the hard limit of {HARD_MAX_UNITS:,}; "
                             "split the sweep (--shard, fewer prompts or configurations)")
    if units > MAX_UNITS and not yes:
        from specbench.measure.estimate import parameter_count

        params = parameter_count(spec.target)
        hint = ""
        if params:
            from specbench.measure.estimate import BANDWIDTH_GUESS, BYTES_PER_PARAM

            kind = "cuda" if str(spec.device).startswith("cuda") else "cpu"
            hours = tokens * params * BYTES_PER_PARAM.get(spec.dtype, 4) / BANDWIDTH_GUESS[kind] / 3600
            hint = f", roughly ≤ {hours:,.1f} h on {spec.device}"
        raise SpecbenchError(f"the grid has {units:,} units (at most {tokens:,} generated tokens{hint}), over the "
                             f"limit of {MAX_UNITS:,}; check it with --dry-run, then pass --yes to run it")
    return units


def context_window(model) -> int | None:
    """Positions the model was trained for (``max_position_embeddings``), when its config says."""
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def check_context(model, name: str, prompt_tokens: int, max_new_tokens: int, what: str = "") -> None:
    """prompt + max_new_tokens must fit the context window; the message says by how much it does not."""
    window = context_window(model)
    if window is None:
        return
    need = int(prompt_tokens) + int(max_new_tokens)
    if need > window:
        where = f" ({what})" if what else ""
        raise SpecbenchError(f"prompt of {prompt_tokens} tokens + max_new_tokens {max_new_tokens} = {need} tokens "
                             f"exceeds the context window of '{name}' ({window} tokens) by {need - window}{where}; "
                             "lower --max-new-tokens or shorten the prompt")


def check_unit_lengths(runner, units) -> None:
    """First turns of every live unit fit the target's context window (later turns are checked when asked)."""
    seen: set = set()
    for unit in units:
        if unit.mode != "live" or unit.turn != 1:
            continue
        key = (unit.workload.name, unit.prompt.prompt_id, unit.max_new_tokens)
        if key in seen:
            continue
        seen.add(key)
        from specbench.measure.workloads import encode_turn

        ids = encode_turn(runner.target.tokenizer, unit.workload, unit.prompt, 0, [])
        check_context(runner.target.model, runner.spec.target, len(ids), unit.max_new_tokens,
                      f"{unit.workload.name} {unit.prompt.prompt_id}")


def check_output_file(path, flag: str) -> None:
    """A file we are about to write: not a directory, in an existing writable folder."""
    import os
    from pathlib import Path

    path = Path(path)
    try:
        if path.is_dir():
            raise SpecbenchError(f"{flag} {path} is a directory; give a file name")
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise SpecbenchError(f"{flag} {path}: folder {parent} does not exist")
        from specbench.records.lock import is_writable_dir

        if path.exists() and not (os.access(path, os.W_OK) and path.stat().st_mode & 0o222):
            raise SpecbenchError(f"{flag} {path} is read-only")
        if not is_writable_dir(parent):
            raise SpecbenchError(f"{flag} {path}: folder {parent} is read-only")
    except OSError as exc:
        raise SpecbenchError(f"{flag} {path}: {exc.strerror or exc}") from None

"""Sweep specifications: parse, validate and expand into a grid of units — no model needed.

A sweep is a YAML file (see ``sweeps/``) or the same axes given as CLI flags:

    name, target, device, dtype, seed, repeats, max_new_tokens (null: each workload's own),
    ignore_eos, drafters: [{type, params}], gammas, trees, temperatures, top_p, top_k,
    workloads: [{name, count, split, max_new_tokens}], mode, calibration: {gammas, prompts},
    timing: {order, warmup_s, max_other_cores, retries} (`specbench.measure.timing.timing_protocol`)

``max_new_tokens`` resolves per workload: the workload entry's own value, else the top-level one,
else the workload file's default.

The grid is every (drafter × γ × tree × temperature) configuration plus one target-only
baseline (γ = 0) per temperature, crossed with every workload prompt, turn and repeat.

``mode`` says how speculative configurations are obtained (docs/replay.md):

* ``live`` (default): every configuration runs through the engine on every prompt;
* ``replay``: the baseline runs on every prompt, and each configuration is *replayed* from the
  baseline's trajectory (`specbench.measure.replay.replayer`); only the ``calibration`` units run live, to fit the
  cost model that times the replayed rows: γ in ``calibration.gammas`` (default: the smallest
  and the largest swept γ) on the first ``calibration.prompts`` prompts of each workload
  (default 2), for every drafter and temperature;
* ``both``: every configuration runs live and is replayed (agreement check).

Mode and calibration choose which units exist, not what a unit measures: they are left out of
the spec hash, so a live sweep's folder can be extended with ``--mode both``.

``backend`` (default ``own``) names who generates: ``backend: vllm`` or ``backend: {name: vllm,
max_num_seqs: 16, ...}`` (each backend checks its options: `specbench.backends.registry.check_sweep`).
``concurrency: [1, 4, 16]`` (serving backends only) runs every configuration with that many requests in flight; like
mode, it chooses which units exist and stays out of the hash. Neither key changes the hash of a
spec that does not set it.

``request_rates: [1, 2, 4]`` (serving backends only; requests per second) is the open-loop load axis:
each configuration's requests arrive at that rate — ``arrivals: poisson`` (default: exponential gaps)
or ``constant`` — from a seeded schedule that every configuration at the same rate shares
(`specbench.measure.serving.arrivals`), whether or not earlier requests have finished. ``concurrency`` then
holds one value, the cap on requests in flight (default `OPEN_LOOP_MAX_IN_FLIGHT`). Like
concurrency, the rates choose which units exist: they stay out of the hash, and enter a unit's id
only when set.

``schedules`` (default ``[fixed]``) is the verify-length axis (`specbench.engine.strategies.schedule`): entries
``fixed``, ``heuristic``, ``{name: threshold, threshold: 0.4}``, ``{name: dspark}``; each drafter × γ ×
temperature configuration runs once per schedule, γ being the schedule's cap. A schedule other than
fixed needs chains (every tree of the sweep 'chain'), the own backend and mode live; threshold and
dspark need drafters with probabilities (not ngram). Like backend, the key enters the hash only when
set to something else than ``[fixed]``.

``threads`` and ``layout`` (own engine on the CPU): torch threads — a count or ``auto`` (measured,
`specbench.engine.cpu.threads`) — and the weight layout — ``auto`` (measured on this machine,
`specbench.engine.cpu.layout_probe`) or a layout name (`specbench.engine.cpu.weight_layout.LAYOUTS`); ``dtype:
auto`` measures the dtype too and keeps the fastest lossless one. Each enters the hash only when set; the
choices made are in run.json (``threads``, ``cpu_layout``).
"""

from __future__ import annotations

import json
from pathlib import Path

from specbench.backends import registry as backends
from specbench.backends.registry import DEFAULT as DEFAULT_BACKEND
from specbench.bounds import check as check_bound
from specbench.catalogue import drafters as catalogue
from specbench.catalogue import gguf_types
from specbench.engine.cpu.layout_probe import check_cpu_settings, parse_layout_setting
from specbench.engine.cpu.threads import parse_thread_setting
from specbench.engine.drafters import check_params
from specbench.engine.drafters.param_values import check_param_values
from specbench.engine.strategies.schedule import ScheduleSpec, check_schedule, parse_schedule
from specbench.engine.tree import parse_tree, tree_depth_limit
from specbench.errors import SpecbenchError, check_keys, check_text, did_you_mean
from specbench.measure.grid.adaptive import parse_adaptive
from specbench.measure.grid.executor import parse_executor
from specbench.measure.grid.flags import bound_of
from specbench.measure.grid.online_strategy import check_online
from specbench.measure.grid.strategy import check_nested, parse_strategies
from specbench.measure.grid.sweep_spec import (
    ARRIVALS,
    CALIBRATION_KEYS,
    CALIBRATION_PROMPTS,
    DEFAULTS,
    DRAFTER_KEYS,
    MODES,
    OPEN_LOOP_MAX_IN_FLIGHT,
    QUANTIZATION_KEYS,
    TOP_LEVEL_KEYS,
    WORKLOAD_KEYS,
    Calibration,
    DrafterConfig,
    RunConfig,
    SweepSpec,
    WorkloadChoice,
)
from specbench.measure.grid.timing import parse_timing
from specbench.measure.grid.values import check_config_count, check_name, strict_bool
from specbench.models.resolve import dtype_setting
from specbench.safe_files import load_yaml_file


def parse_params(items: list[str], drafter: str | None = None) -> dict:
    """KEY=VALUE strings -> dict (numbers become int/float, except for the text parameters of ``drafter``'s
    catalogue entry: ``model=007`` stays the text '007')."""
    declared = catalogue.get(drafter).params if drafter is not None and drafter in catalogue.names() else {}
    params: dict[str, str | int | float] = {}
    for item in items:
        if "=" not in item:
            raise SpecbenchError(f"--drafter-param expects KEY=VALUE, got '{item}'")
        key, value = item.split("=", 1)
        if key.strip() in declared and declared[key.strip()].kind == "str":
            params[key.strip()] = value
            continue
        parsed: str | int | float = value
        for cast in (int, float):
            try:
                parsed = cast(value)
                break
            except ValueError:
                continue
        params[key.strip()] = parsed
    return params


def _empty_grid_reason(spec: SweepSpec) -> str:
    """Why `expand_configs` left no speculative configuration: the axis combination that removed them all."""
    drafted = [g for g in spec.gammas if g > 0]
    if not spec.drafters or not drafted:
        return "empty grid: no drafter with a draft length γ > 0 (give drafters and gammas)"
    if "chain" not in spec.trees and all(s.nested for s in spec.strategies):
        return (
            f"empty grid: strategy nested speculates on chains, and trees {spec.trees} hold no chain "
            "(add 'chain' to 'trees', or a sequential strategy for the trees)"
        )
    if "chain" not in spec.trees and all(not s.is_fixed for s in spec.schedules):
        return (
            f"empty grid: schedules other than fixed choose a chain's length, and trees {spec.trees} hold no "
            "chain (add 'chain' to 'trees', or the schedule fixed)"
        )
    limits = {t: tree_depth_limit(t) for t in spec.trees}
    if limits and all(limit is not None and min(drafted) > limit for limit in limits.values()):
        deepest = max(limit for limit in limits.values() if limit is not None)
        return (
            f"empty grid: the trees {spec.trees} draft at most {deepest} deep, and every γ in {drafted} is deeper "
            f"(give gammas up to {deepest})"
        )
    return "empty grid: no drafter, γ, tree, strategy and schedule combine into a speculative configuration"


def _distinct(items: list) -> int:
    """How many different values ``items`` holds (mappings compared by their content)."""

    def key(item) -> str:
        try:
            return json.dumps(item, sort_keys=True, default=str)
        except TypeError:  # a mapping whose keys cannot be ordered (mixed types): its text stands for it
            return repr(item)

    return len({key(item) for item in items})


def _fail(where: str, message: str) -> None:
    raise SpecbenchError(f"{where}: {message}")


def _as_list(value, where: str, key: str) -> list:
    if value is None:
        return []
    if isinstance(value, (str, int, float, dict)):
        return [value]
    if not isinstance(value, list):
        _fail(where, f"'{key}' must be a list")
    return value


def _number(value, where: str, key: str, bound: str):
    """``value`` of spec key ``key`` checked against the bounds table's row ``bound`` (`specbench.bounds`)."""
    return check_bound(bound, value, where, key)


def _drafter(item, where: str) -> DrafterConfig:
    if not isinstance(item, dict):
        item = parse_drafter_flag(check_text(item, "drafters", where))
    if not isinstance(item, dict) or "type" not in item:
        _fail(where, f"each drafter needs a 'type' (e.g. {{type: ngram}}), got {item!r}")
    extra = set(item) - set(DRAFTER_KEYS)
    if extra:
        _fail(where, f"drafter entries take 'type' and 'params', not {sorted(map(str, extra))}")
    params = item.get("params") or {}
    if not isinstance(params, dict):
        _fail(where, f"'params' of drafter {item['type']} must be a mapping")
    kind = check_text(item["type"], "drafters: type", where)
    check_params(kind, params)
    params = check_param_values(kind, params, where)
    return DrafterConfig(type=kind, params=tuple(sorted(params.items())))


def parse_drafter_flag(text: str) -> dict:
    """``TYPE`` or ``TYPE:key=value,key=value`` -> {type, params}."""

    kind, _, rest = text.partition(":")
    params = parse_params([p for p in rest.split(",") if p], kind.strip()) if rest else {}
    return {"type": kind.strip(), "params": params}


def _workload(item, where: str) -> WorkloadChoice:
    if not isinstance(item, dict):
        item = {"name": check_text(item, "workloads", where)}
    if "name" not in item:
        _fail(where, f"each workload needs a 'name', got {item!r}")
    extra = set(item) - set(WORKLOAD_KEYS)
    if extra:
        _fail(where, f"workload entries take name, count, split and max_new_tokens, not {sorted(map(str, extra))}")
    count, max_new = item.get("count"), item.get("max_new_tokens")
    return WorkloadChoice(
        name=check_text(item["name"], "workloads: name", where),
        count=None if count is None else _number(count, where, "count", bound_of("workloads[].count")),
        split=check_text(item.get("split", "eval"), "workloads: split", where),
        max_new_tokens=None if max_new is None else _flagged(max_new, where, "max_new_tokens"),
    )


def _calibration(value, gammas: list[int], where: str) -> Calibration:
    """The ``calibration`` mapping of a replay sweep, defaults filled in and checked."""
    swept = [g for g in gammas if g > 0]
    value = {} if value is None else value
    if not isinstance(value, dict):
        _fail(where, "'calibration' must be a mapping, e.g. {gammas: [1, 8], prompts: 2}")
    extra = set(value) - set(CALIBRATION_KEYS)
    if extra:
        _fail(where, f"'calibration' takes gammas and prompts, not {sorted(map(str, extra))}")
    chosen = value.get("gammas")
    if chosen is None:
        chosen = sorted({min(swept), max(swept)}) if swept else []
    chosen = sorted(
        {
            _number(g, where, "calibration.gammas", bound_of("gammas"))
            for g in _as_list(chosen, where, "calibration.gammas")
        }
    )
    missing = [g for g in chosen if g not in swept]
    if missing:
        _fail(where, f"calibration γ {missing} not among the swept gammas {swept}")
    if not chosen:
        _fail(where, "calibration needs at least one γ: replayed timings come from live calibration units")
    prompts = _number(value.get("prompts", CALIBRATION_PROMPTS), where, "calibration.prompts", "prompts")
    return Calibration(gammas=tuple(chosen), prompts=prompts)


def _check_replayable(spec: SweepSpec, where: str) -> None:
    for tree in spec.trees:
        if tree != "chain":
            _fail(
                where, f"mode '{spec.mode}' replays chains only for now; tree '{tree}' needs a live sweep (mode: live)"
            )
    for d in spec.drafters:
        if catalogue.get(d.type).replay is None:
            _fail(
                where,
                f"mode '{spec.mode}': drafter '{d.type}' cannot be replayed yet "
                f"(replayable: {', '.join(catalogue.replayable())})",
            )


def build_spec(raw: dict, where: str = "sweep") -> SweepSpec:
    """Validate a raw mapping (YAML or flags merged) into a `SweepSpec` with its configurations."""

    data = _with_defaults(raw, where)
    spec = _grid_axes(data, where)
    _quantization(spec, data["quantization"], where)
    _run_settings(spec, data, where)
    spec.dtype = dtype_setting(spec.dtype, f"{where}: dtype")
    if not spec.workloads:
        _fail(where, "no workloads: give at least one (e.g. workloads: [mt-bench])")
    spec.configs = expand_configs(spec)
    if not any(not c.is_baseline for c in spec.configs):
        _fail(where, _empty_grid_reason(spec))
    if spec.replays:
        _check_replayable(spec, where)
    _backend(spec, data["backend"], data["concurrency"], where)
    if data["quantization"] and not backends.get(spec.backend).gguf_types:
        _fail(
            where,
            f"'quantization' names GGUF types: backend {spec.backend} does not run GGUF files as they are "
            f"(use {', '.join(backends.names(gguf_types=True))})",
        )
    _request_rates(spec, data["request_rates"], data["arrivals"], data["concurrency"], where)
    _check_engine_settings(spec, where)
    return spec


def _with_defaults(raw, where: str) -> dict:
    """The sweep's mapping, its keys checked, every key absent (or null) at its default; the grid's size checked
    before anything is expanded."""
    if not isinstance(raw, dict):
        _fail(where, "a sweep file must be a mapping of keys (name, target, drafters, gammas, ...)")
    check_keys(raw, TOP_LEVEL_KEYS, f"{where}: unknown key '{{key}}'")
    data = {**DEFAULTS, **{k: v for k, v in raw.items() if v is not None or k == "max_new_tokens"}}
    data["name"] = check_text(data["name"], "name", where, nullable=True)
    if not data["name"]:
        _fail(where, "the sweep needs a name (results go to results/<name>/)")
    check_name(data["name"], where)
    axes = {
        k: _distinct(_as_list(data[k], where, k))  # repeats collapse: 400,000 × γ 2 is one γ, not a huge grid
        for k in ("drafters", "gammas", "trees", "temperatures", "schedules")
    }
    check_config_count(axes, where)  # before anything is expanded
    return data


def _quantization(spec: SweepSpec, value, where: str) -> None:
    """``quantization: {target: TYPE, drafters: [TYPE, ...]}``: the target runs at one GGUF type (several types are
    one sweep each, `specbench.measure.run.target_set`), and every drafter
    with a draft model runs once per drafter type (``model: smollm2-135m`` → ``smollm2-135m@Q8_0``, ...), so each
    type is a drafter of its own in the records (`specbench.catalogue.gguf_types`)."""
    if value is None:
        return
    if not isinstance(value, dict):
        _fail(where, "'quantization' must be a mapping, e.g. {target: Q8_0, drafters: [Q8_0, Q4_K_M]}")
    check_keys(value, QUANTIZATION_KEYS, f"{where}: quantization: unknown key '{{key}}'")
    targets = gguf_types.named_types(value.get("target"), f"{where}: quantization.target")
    if len(targets) > 1:  # several types are several sweeps: the command runs one part per type
        _fail(where, "quantization.target names several types: run them with `specbench sweep` (one part per type)")
    if targets:
        spec.target = gguf_types.with_type(spec.target, targets[0])
    kinds = [
        gguf_types.check_type(k, f"{where}: quantization.drafters")
        for k in _as_list(value.get("drafters") or [], where, "quantization.drafters")
    ]
    if not kinds:
        return
    typed = [
        d for d in spec.drafters if catalogue.get(d.type).llamacpp_weights == "model" and d.params_dict.get("model")
    ]
    if not typed:
        _fail(
            where,
            "quantization.drafters needs a drafter with a draft model (e.g. {type: draft-model, params: {model: smollm2-135m}})",
        )
    spec.drafters = list(
        dict.fromkeys(
            DrafterConfig(
                d.type,
                tuple(sorted({**d.params_dict, "model": gguf_types.with_type(d.params_dict["model"], k)}.items())),
            )
            if d in typed
            else d
            for d in spec.drafters
            for k in (kinds if d in typed else [None])
        )
    )


def _flagged(value, where: str, key: str):
    """``value`` of key ``key`` checked against the bounds row its sweep flag names (`sweep_flags.bound_of`)."""
    return _number(value, where, key, bound_of(key))


def _grid_axes(data: dict, where: str) -> SweepSpec:
    """The spec's model, sampling and grid axes (drafters, γ, trees, temperatures, workloads), checked."""
    gammas = sorted({_flagged(g, where, "gammas") for g in _as_list(data["gammas"], where, "gammas")})
    temperatures = sorted(
        {_flagged(t, where, "temperatures") for t in _as_list(data["temperatures"], where, "temperatures")}
    )
    trees = [check_text(t, "trees", where) for t in _as_list(data["trees"], where, "trees")]
    if not trees:
        _fail(where, "'trees' needs at least one shape (e.g. [chain])")
    for tree in trees:
        parse_tree(tree)  # raises a one-line error for a bad shape
    top_p = _flagged(data["top_p"], where, "top_p")
    max_new_tokens = data["max_new_tokens"]
    spec = SweepSpec(
        name=data["name"],
        description=check_text(data["description"], "description", where, nullable=True) or "",
        target=check_text(data["target"], "target", where),
        device=check_text(data["device"], "device", where),
        dtype=check_text(data["dtype"], "dtype", where),
        seed=_flagged(data["seed"], where, "seed"),
        repeats=_flagged(data["repeats"], where, "repeats"),
        max_new_tokens=None if max_new_tokens is None else _flagged(max_new_tokens, where, "max_new_tokens"),
        ignore_eos=strict_bool(data["ignore_eos"], where, "ignore_eos"),
        drafters=list(dict.fromkeys(_drafter(d, where) for d in _as_list(data["drafters"], where, "drafters"))),
        gammas=gammas,
        trees=trees,
        temperatures=temperatures,
        top_p=top_p,
        top_k=_flagged(data["top_k"], where, "top_k"),
        workloads=[_workload(w, where) for w in _as_list(data["workloads"], where, "workloads")],
    )
    for d in spec.drafters:
        if not catalogue.get(d.type).trees and any(tree != "chain" for tree in trees):
            _fail(
                where,
                f"drafter '{d.type}' drafts chains only: the trees {[t for t in trees if t != 'chain']} "
                "need another drafter",
            )
    return spec


def _run_settings(spec: SweepSpec, data: dict, where: str) -> None:
    """How the grid runs: schedules, strategies, engine settings, timing, adaptive looks, executor, mode."""
    spec.schedules = _schedules(data["schedules"], spec, where)
    spec.compile = strict_bool(data["compile"], where, "compile")
    spec.strategies = parse_strategies(data["strategy"], where)
    spec.kernels = check_text(data["kernels"], "kernels", where)
    if spec.kernels not in ("auto", "triton", "torch"):
        _fail(where, f"'kernels' must be auto, triton or torch, got '{spec.kernels}'")
    spec.timing = parse_timing(data["timing"], where)
    spec.adaptive = parse_adaptive(data["adaptive"], where)
    spec.threads = parse_thread_setting(data["threads"], where)
    spec.layout = parse_layout_setting(data["layout"], where)
    spec.executor = parse_executor(data["executor"], where)
    if data.get("tolerance") is not None:
        spec.tolerance = float(_number(data["tolerance"], where, "tolerance", "tolerance"))
    if data["price_per_hour"] is not None:
        spec.price_per_hour = float(_number(data["price_per_hour"], where, "price_per_hour", "price_per_hour"))
    spec.mode = check_text(data["mode"], "mode", where)
    if spec.mode not in MODES:
        _fail(
            where, f"unknown mode '{spec.mode}'{did_you_mean(spec.mode, list(MODES))} (choose from: {', '.join(MODES)})"
        )
    calibration = _calibration(data["calibration"], spec.gammas, where) if spec.replays else None
    if spec.mode == "replay":  # mode both measures every unit live: calibration is checked, then unused
        spec.calibration = calibration


def _check_engine_settings(spec: SweepSpec, where: str) -> None:
    """Settings only specbench's own engine honours (threads, layout, schedules, strategies), against the
    backend, device and mode."""
    own_engine = backends.get(spec.backend).own_engine
    if spec.threads is not None and (not own_engine or spec.device != "cpu"):
        _fail(
            where,
            f"'threads' sets the CPU threads of specbench's own engine (backend own, device cpu), "
            f"not backend {spec.backend} on {spec.device}",
        )
    if (spec.layout is not None or spec.dtype == "auto") and not own_engine:
        _fail(
            where,
            f"'layout' and dtype auto choose the CPU weights of specbench's own engine, not of backend {spec.backend}",
        )
    try:
        check_cpu_settings(spec.device, spec.dtype, spec.layout, where)
    except SpecbenchError as exc:
        _fail(where, str(exc).removeprefix(f"{where}: "))
    check_nested(spec, where)
    check_online(spec, where)
    if any(not s.is_fixed for s in spec.schedules) and (not own_engine or spec.mode != "live"):
        _fail(
            where,
            f"schedules other than fixed run in specbench's own engine, live: backend {spec.backend}, "
            f"mode {spec.mode} cannot choose the verify length per round",
        )


def _schedules(value, spec: SweepSpec, where: str) -> list[ScheduleSpec]:
    """The ``schedules`` axis, parsed and checked against the sweep's trees and drafters."""
    schedules = list(
        dict.fromkeys(parse_schedule(s, f"{where}: schedules") for s in _as_list(value, where, "schedules"))
    )
    if not schedules:
        _fail(where, "'schedules' needs at least one value (e.g. [fixed, heuristic])")
    if any(not s.is_fixed for s in schedules) and "chain" not in spec.trees:
        _fail(where, "schedules other than fixed choose a chain's length: add 'chain' to 'trees' (trees run fixed)")
    for schedule in schedules:
        for d in spec.drafters:  # on the chains (a tree's configurations run the fixed schedule)
            check_schedule(schedule, chain=True, drafter=d.type, confident=catalogue.get(d.type).confident)
    return schedules


def _backend(spec: SweepSpec, value, concurrency, where: str) -> None:
    """``backend`` and ``concurrency``: parsed, and checked against the grid before anything starts."""
    if value is None:
        value = {"name": DEFAULT_BACKEND}
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict):
        _fail(where, "'backend' must be a name (own, vllm, ...) or a mapping {name: vllm, ...options}")
    options = dict(value)
    backend = backends.get(check_text(options.pop("name", DEFAULT_BACKEND), "backend: name", where))
    spec.backend = backend.name
    spec.backend_options = options
    concurrency = [1] if concurrency is None else concurrency
    spec.concurrency = sorted({_flagged(c, where, "concurrency") for c in _as_list(concurrency, where, "concurrency")})
    if not spec.concurrency:
        _fail(where, "'concurrency' needs at least one value (e.g. [1, 4, 16])")
    if spec.concurrency != [1] and not backend.concurrent:
        _fail(
            where,
            f"backend {spec.backend} runs one request at a time: concurrency {spec.concurrency} needs a "
            f"serving backend ({', '.join(backends.names(concurrent=True))})",
        )
    if not backend.own_drafters and spec.mode != "live":
        _fail(where, f"mode '{spec.mode}' replays specbench's own drafters: backend {spec.backend} needs mode: live")
    backends.check_sweep(spec.backend, options, spec.configs, where)  # fails here, not after an engine started


def _request_rates(spec: SweepSpec, rates, arrivals, concurrency, where: str) -> None:
    """``request_rates`` (open loop) and ``arrivals``: parsed, and checked against the backend and concurrency."""
    values = [float(_flagged(r, where, "request_rates")) for r in _as_list(rates, where, "request_rates")]
    spec.request_rates = sorted(set(values))
    if not spec.request_rates:
        if arrivals is not None:
            _fail(where, "'arrivals' describes open-loop load: give request_rates (e.g. request_rates: [1, 2, 4])")
        return
    if not backends.get(spec.backend).concurrent:
        _fail(
            where,
            f"backend {spec.backend} runs one request at a time: request_rates need a serving backend "
            f"({', '.join(backends.names(concurrent=True))})",
        )
    if spec.mode != "live":
        _fail(where, f"request_rates time live requests: mode '{spec.mode}' cannot replay them")
    spec.arrivals = check_text(arrivals, "arrivals", where, nullable=True) or "poisson"
    if spec.arrivals not in ARRIVALS:
        _fail(
            where,
            f"unknown arrivals '{spec.arrivals}'{did_you_mean(spec.arrivals, list(ARRIVALS))} (choose from: "
            f"{', '.join(ARRIVALS)})",
        )
    if concurrency is None:
        spec.concurrency = [OPEN_LOOP_MAX_IN_FLIGHT]
    elif len(spec.concurrency) > 1:
        _fail(
            where,
            f"request_rates are open-loop load: give at most one concurrency (the cap on requests in "
            f"flight), not {spec.concurrency}",
        )


def expand_configs(spec: SweepSpec) -> list[RunConfig]:
    """Baseline per temperature first, then drafter × γ × tree × temperature × strategy.

    γ = 0 is the baseline only; a static tree is cut to depth γ, so γ beyond its depth would
    repeat the full tree and is skipped. Nested speculation and the verify-length schedules other
    than fixed work on chains, one at a time: a tree runs sequential with the fixed schedule, a
    nested chain with the fixed schedule (it prepares full-γ drafts), so one sweep can hold all the
    strategy axes and compare each with the plain chain.
    """

    configs = [RunConfig(None, 0, "chain", t, spec.top_p, spec.top_k) for t in spec.temperatures]
    for t in spec.temperatures:
        for d in spec.drafters:
            for tree in spec.trees:
                limit = tree_depth_limit(tree)
                for g in spec.gammas:
                    if g > 0 and (limit is None or g <= limit):
                        configs.extend(
                            RunConfig(d, g, tree, t, spec.top_p, spec.top_k, s, schedule)
                            for s in spec.strategies
                            for schedule in spec.schedules
                            if (tree == "chain" or not s.nested and schedule.is_fixed)
                            and (schedule.is_fixed or not s.nested)
                        )
    return configs


def load_spec_file(path: str | Path) -> dict:

    path = Path(path)
    raw = load_yaml_file(path, "sweep file")  # size-limited, UTF-8, no YAML aliases
    if not isinstance(raw, dict):
        raise SpecbenchError(f"{path}: a sweep file must be a mapping of keys (name, target, drafters, ...)")
    raw.setdefault("name", path.stem)
    return raw

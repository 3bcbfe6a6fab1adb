"""Rough cost of a sweep before it runs: units, tokens, and a time estimate that includes the backend.

Generating one token costs about one target forward, priced as

    step_s = parameters × bytes per parameter ÷ bandwidth  +  layers × per-layer overhead

(weight streaming, plus the kernel launches and Python of a small-batch forward, which dominate
a small model on a CPU: SmolLM2-135M's 30 layers cost ~40 ms of its ~70 ms step on a 2-core
CPU). The timing protocol times each prompt turn's baseline twice (``order: bracket``). A backend
adds its start-up: the own engine loads the models once; a vLLM backend starts one engine per
configuration (its catalogue entry's ``start_s``, `specbench.backends.registry`: about 30 s for SmolLM2
on a 2-core CPU, minutes for a large target on a GPU), and an adaptive sweep may start an engine again in each look,
unless it is kept (``engines_kept``, where the entry ``keeps_engines``). Two more waits count: open-loop load
(``request_rates``) sends a batch's requests at their arrival times, so a batch of n requests at r requests/s lasts
at least n ÷ r seconds (at 0.001 requests/s, hours — "about 0 s" before); and online adaptation trains the drafter
between prompts, ``steps`` optimizer steps per update, each a forward and backward pass (≈ 3 forwards) of a drafter
layer over ``batch_tokens`` positions, priced as one target layer per position. These are orders of magnitude,
printed as "about": the sweep's own progress gives the real pace.
"""

from __future__ import annotations

from pathlib import Path

from specbench.backends import registry as backends
from specbench.measure.grid.sweep_spec import SweepSpec
from specbench.models import cache as model_cache
from specbench.models.hub import hub_config, hub_reachable, in_local_cache
from specbench.models.resolve import DTYPES, aliases

# effective weight-streaming bandwidth of a decode step, bytes/s (order of magnitude only)
BANDWIDTH_GUESS = {"cpu": 20e9, "cuda": 1.5e12}
BYTES_PER_PARAM = {
    name: {"float32": 4, "bfloat16": 2, "float16": 2}[torch_name]  # every name of models.resolve.DTYPES
    for name, torch_name in DTYPES.items()
    if torch_name != "auto"
}
LAYER_OVERHEAD_S = {"cpu": 1.3e-3, "cuda": 0.15e-3}  # per layer and forward: launches and Python, eager
TRAIN_PASSES = 3.0  # a training step: one forward and a backward (about two forwards)


def model_shape(target: str) -> tuple[int | None, int | None]:
    """(parameters, layers) of a target from its config alone (meta device: no weights are read)."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        if target in aliases():
            entry = aliases()[target]
            if entry["source"] == "random":
                cfg = dict(entry["config"])
                config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
            else:
                base = entry.get("base", target)
                folder = model_cache.entry_dir(base)
                if not (folder / "config.json").exists():
                    return None, None
                config = AutoConfig.from_pretrained(str(folder))
        elif Path(target).expanduser().is_dir():
            config = AutoConfig.from_pretrained(target)
        elif in_local_cache(target):
            config = AutoConfig.from_pretrained(target, local_files_only=True)
        else:  # a hub id: one request where the hub answers (never huggingface_hub's retries), else no estimate
            data = hub_config(target) if hub_reachable() else None
            if not data or not isinstance(data.get("model_type"), str):
                return None, None
            config = AutoConfig.for_model(data.pop("model_type"), **data)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        layers = getattr(config, "num_hidden_layers", None) or getattr(
            config.get_text_config(), "num_hidden_layers", None
        )
        return sum(p.numel() for p in model.parameters()), layers
    except Exception:  # noqa: BLE001 - an estimate is optional
        return None, None


def parameter_count(target: str) -> int | None:
    return model_shape(target)[0]


def engine_starts(spec: SweepSpec, looks: int = 1) -> int:
    """Engine starts of a serving backend over ``looks`` looks (0 for the own engine and a running server)."""
    backend = backends.get(spec.backend)
    if backend.start_s is None:
        return 0
    configs = len(spec.configs)
    kept = int(spec.backend_options.get("engines_kept", 1)) if backend.keeps_engines else 1
    later = configs if kept == 1 else max(configs - kept, 0)  # the kept ones (target-only first) need none
    return configs + (looks - 1) * later


def estimate(spec: SweepSpec, units, looks: int = 1) -> dict:
    """Units, generated tokens and seconds (generation + start-up) of ``units``; ``looks``: an adaptive sweep's
    largest number of looks per workload (engines may start again in each)."""
    tokens = sum(u.max_new_tokens for u in units)
    params, layers = model_shape(spec.target)
    kind = "cuda" if spec.device.startswith("cuda") else "cpu"
    blocks = {
        (u.workload.name, u.prompt.prompt_id, u.turn, u.repeat, u.config.temperature)
        for u in units
        if u.mode == "live" and not u.config.is_baseline
    }
    rebaseline = 0
    backend = backends.get(spec.backend)
    if spec.timing.order == "bracket" and not backend.concurrent:  # one request at a time: timed in blocks
        per_block = {
            (u.workload.name, u.prompt.prompt_id, u.turn, u.repeat, u.config.temperature): u.max_new_tokens
            for u in units
            if u.mode == "live" and u.config.is_baseline
        }
        rebaseline = sum(per_block.get(b, 0) for b in blocks)
    starts = engine_starts(spec, looks)
    arrival_s = arrival_wait_s(units)
    out = {
        "units": len(units),
        "configs": len(spec.configs),
        "max_new_tokens_total": tokens,
        "target_parameters": params,
        "target_layers": layers,
        "engine_starts": starts,
        "start_s": starts * _seconds(backend.start_s, spec.device) + _seconds(backend.load_s, spec.device),
        "arrival_s": arrival_s,
        "training_steps": training_steps(units),
        "training_s": None,
        "generation_s": None,
        "seconds": None,
        "seconds_upper": None,
    }
    if params:
        step = (
            params * BYTES_PER_PARAM.get(spec.dtype, 4) / BANDWIDTH_GUESS[kind] + (layers or 0) * LAYER_OVERHEAD_S[kind]
        )
        out["generation_s"] = (tokens + rebaseline) * step
        layer_s = step / max(layers or 1, 1)  # one target layer over one position: a drafter layer's forward
        out["training_s"] = sum(n * TRAIN_PASSES * layer_s * batch for n, batch in out["training_steps"].values())
        out["seconds"] = out["generation_s"] + out["start_s"] + out["training_s"] + arrival_s
        out["seconds_upper"] = out["seconds"]  # the former name, kept for readers of --json
    out["training_steps"] = sum(n for n, _ in out["training_steps"].values())
    return out


def arrival_wait_s(units) -> float:
    """Seconds open-loop batches spend waiting for their arrivals: each (configuration, request rate, workload,
    repeat) batch of n requests at r requests/s lasts at least n ÷ r."""
    batches: dict[tuple, int] = {}
    for u in units:
        rate = getattr(u, "request_rate", None)
        if rate:
            key = (id(u.config), rate, u.workload.name, u.repeat)
            batches[key] = batches.get(key, 0) + 1
    return float(sum(n / rate for (_, rate, _, _), n in batches.items()))


def training_steps(units) -> dict:
    """Online adaptation: (optimizer steps, positions per step) per online configuration over ``units`` — one
    update every ``every_prompts`` generations (or, by tokens, every ``every_tokens`` generated tokens)."""
    steps: dict = {}
    for u in units:
        strategy = u.config.strategy
        if not getattr(strategy, "is_online", False):
            continue
        plan = strategy.online
        key = (id(u.config), plan.batch_tokens)
        n, batch = steps.get(key, (0.0, plan.batch_tokens))
        per_unit = 1 / plan.every_prompts if plan.every_prompts else u.max_new_tokens / plan.every_tokens
        steps[key] = (n + per_unit * plan.steps, batch)
    return {key: (round(n), batch) for key, (n, batch) in steps.items()}


def describe(est: dict, spec: SweepSpec) -> str:
    """The estimate in one line."""
    if est["seconds"] is None:
        return ""
    line = (
        f"about {_minutes(est['seconds'])} on {spec.device}: {_minutes(est['generation_s'])} generating "
        f"({est['target_parameters'] / 1e6:.0f}M-parameter target, one forward per token)"
    )
    if est["engine_starts"]:
        each = _seconds(backends.get(spec.backend).start_s, spec.device)
        line += f" + {est['engine_starts']} {spec.backend} engine start(s) ≈ {_minutes(est['start_s'])} (~{each:.0f} s each)"
    if est.get("arrival_s"):
        line += f" + {_minutes(est['arrival_s'])} waiting for open-loop arrivals"
    if est.get("training_steps"):
        line += f" + {est['training_steps']} online training steps ≈ {_minutes(est['training_s'] or 0)}"
    return line


def _seconds(cost: backends.DeviceSeconds | None, device: str) -> float:
    return 0.0 if cost is None else cost.on(device)


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"

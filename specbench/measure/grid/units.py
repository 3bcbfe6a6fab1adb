"""The units of a sweep: one configuration on one prompt turn and repeat, and its record.

`expand_units` lays the grid out in execution order (one shard of it); `make_record` turns a
unit and the generation result a backend returned into one row of `specbench.records.store.COLUMNS`.
Live and replayed units are written by the same function, so their columns cannot drift apart.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial

from specbench.backends.registry import DEFAULT as DEFAULT_BACKEND
from specbench.catalogue import gguf_types
from specbench.engine.tree import shape_for
from specbench.errors import SpecbenchError
from specbench.measure.environment import now_utc
from specbench.measure.grid.sweep_spec import RunConfig, SweepSpec
from specbench.workloads.catalog import Prompt, Workload, load_workload


@dataclass(frozen=True)
class Unit:
    config: RunConfig
    workload: Workload
    prompt: Prompt
    turn: int  # 1-based
    repeat: int
    max_new_tokens: int
    base_seed: int
    mode: str = "live"  # 'live' (through the engine) or 'replay' (from the baseline's trajectory)
    concurrency: int = 1  # requests in flight while this unit ran (serving backends); under a request rate, the cap
    request_rate: float | None = None  # open loop: requests per second arriving (None: closed loop)
    backend: str = DEFAULT_BACKEND  # who generated it (specbench.backends.registry)
    stage: int | None = None  # adaptive sweep: the look of its workload it serves (not part of its identity)
    target_type: str | None = None  # the target's GGUF type when the sweep names one (`target_set`: parts merge)

    @property
    def group(self) -> tuple:
        """Units sharing a conversation context (turn 2 reuses the baseline's turn-1 answer)."""
        c = self.config
        return (self.workload.name, self.prompt.prompt_id, self.repeat, c.temperature, c.top_p, c.top_k)

    @property
    def seed(self) -> int:
        text = f"{self.base_seed}:{self.workload.name}:{self.prompt.prompt_id}:{self.turn}:{self.repeat}"
        return int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)

    @property
    def unit_id(self) -> str:
        c = self.config
        key = [
            c.drafter.type if c.drafter else "none",
            c.drafter.params_json if c.drafter else "{}",
            c.gamma,
            c.tree,
            c.temperature,
            c.top_p,
            c.top_k,
            self.workload.name,
            self.prompt.prompt_id,
            self.turn,
            self.repeat,
            self.max_new_tokens,
            self.base_seed,
        ] + (["replay"] if self.mode == "replay" else [])
        # Added only when not the default, so the ids of existing folders' units (own, concurrency 1) stay.
        key += (
            ([f"backend={self.backend}"] if self.backend != DEFAULT_BACKEND else [])
            + ([f"concurrency={self.concurrency}"] if self.concurrency != 1 else [])
            + ([f"request_rate={float(self.request_rate)!r}"] if self.request_rate is not None else [])
            + ([f"strategy={c.strategy.label}"] if not c.strategy.is_sequential else [])
            + ([f"schedule={c.schedule.name}:{c.schedule.params_json}"] if not c.schedule.is_fixed else [])
            + ([f"target_type={self.target_type}"] if self.target_type is not None else [])
        )
        return hashlib.sha1(repr(key).encode()).hexdigest()[:20]


@dataclass
class UnitOutput:
    """What running a unit gives the writer: its record and, for a replayed unit, its moments
    (``replay/unit-<id>.json``, written before the record)."""

    unit: Unit
    record: dict
    moments: dict | None = None


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 0, 1
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise SpecbenchError(f"--shard expects I/N (e.g. 0/4), got '{text}'") from None
    if count < 1 or not 0 <= index < count:
        raise SpecbenchError(f"--shard {text}: need 0 <= I < N")
    return index, count


def in_shard(prompt_id: str, workload: str, shard: tuple[int, int]) -> bool:
    digest = int(hashlib.sha1(f"{workload}:{prompt_id}".encode()).hexdigest()[:8], 16)
    return digest % shard[1] == shard[0]


def load_workloads(spec: SweepSpec) -> list[Workload]:
    """The sweep's workloads; an adaptive sweep loads its pool: up to ``adaptive.max_prompts`` per workload (its
    ``count`` caps it too), in sample order, so that each look's prompts extend the previous look's."""
    loaded = []
    for choice in spec.workloads:
        count = choice.count
        if spec.adaptive is not None:
            count = min(count or spec.adaptive.max_prompts, spec.adaptive.max_prompts)
        loaded.append(load_workload(choice.name, count=count, seed=spec.seed, split=choice.split))
    return loaded


def runs_live(spec: SweepSpec, config: RunConfig, prompt_index: int) -> bool:
    """Whether ``config`` runs live on the workload's ``prompt_index``-th prompt (0-based, in the shard).

    The baseline always does; in mode replay a speculative configuration only as a calibration unit.
    """
    if config.is_baseline or spec.runs_live:
        return True
    cal = spec.calibration
    return cal is not None and config.gamma in cal.gammas and prompt_index < cal.prompts


def expand_units(spec: SweepSpec, workloads: list[Workload], shard: tuple[int, int] = (0, 1)) -> list[Unit]:
    """Every unit of the grid in execution order (one shard of it); replayed units after each turn's live ones."""
    units: list[Unit] = []
    target_type = gguf_types.split(spec.target)[1]  # one sweep per target type: their units merge (ids differ)
    for workload in workloads:
        max_new = spec.max_new_tokens_for(workload)
        prompts = [p for p in workload.prompts if in_shard(p.prompt_id, workload.name, shard)]
        for index, prompt in enumerate(prompts):
            for repeat in range(spec.repeats):
                for temperature in spec.temperatures:
                    configs = [c for c in spec.configs if c.temperature == temperature]
                    for turn in range(1, len(prompt.turns) + 1):
                        unit = partial(  # what a turn's live and replayed units share
                            Unit,
                            workload=workload,
                            prompt=prompt,
                            turn=turn,
                            repeat=repeat,
                            max_new_tokens=max_new,
                            base_seed=spec.seed,
                            target_type=target_type,
                        )
                        for config in configs:  # the baseline comes first in spec.configs
                            if runs_live(spec, config, index):
                                units.extend(
                                    unit(config, concurrency=n, request_rate=rate, backend=spec.backend)
                                    for n, rate in spec.loads
                                )
                        if spec.replays:
                            units.extend(unit(c, mode="replay") for c in configs if not c.is_baseline)
    return units


def make_record(unit: Unit, result, spec: SweepSpec, device_name: str) -> dict:
    """A results row (every column of `specbench.records.store.COLUMNS`) for one measured or replayed unit."""

    c = unit.config
    nodes = shape_for(c.tree, c.gamma).num_nodes if c.gamma else 0
    attempts, accepts = result.position_counts(max(c.gamma, 1))
    rounds = result.rounds
    return {
        "unit_id": unit.unit_id,
        "sweep": spec.name,
        "mode": unit.mode,
        "target": spec.target,
        "drafter": c.drafter.type if c.drafter else "none",
        "drafter_params": c.drafter.params_json if c.drafter else "{}",
        "drafter_label": c.drafter_label,
        "tree": c.tree,
        "tree_nodes": nodes,
        "gamma": c.gamma,
        "schedule": c.schedule.label,
        "schedule_params": c.schedule.params_json,
        "temperature": c.temperature,
        "top_p": c.top_p,
        "top_k": c.top_k,
        "workload": unit.workload.name,
        "prompt_id": unit.prompt.prompt_id,
        "category": unit.prompt.category,
        "turn": unit.turn,
        "repeat": unit.repeat,
        "seed": unit.seed,
        "device": device_name,
        "dtype": spec.dtype_used or spec.dtype,
        "prompt_tokens": result.prompt_tokens,
        "new_tokens": result.new_tokens,
        "decode_tokens": result.decode_tokens,
        "rounds": result.target_forwards,
        "drafted": result.drafted,
        "accepted": result.accepted,
        "draft_steps": int(sum(rounds.draft_steps)) if rounds.observed else None,
        "alpha": result.alpha,
        "tau": result.tau,
        "accept_hist": result.accepted_length_histogram(c.gamma).tolist(),
        "pos_attempts": attempts.tolist()[: c.gamma],
        "pos_accepts": accepts.tolist()[: c.gamma],
        "round_drafted": list(rounds.drafted),
        "round_depth": list(rounds.depth),
        "round_accepted": list(rounds.accepted),
        "round_draft_steps": list(rounds.draft_steps),
        "round_draft_s": list(rounds.draft_s),
        "round_verify_s": list(rounds.verify_s),
        "prefill_s": result.prefill_s,
        "decode_s": result.decode_s,
        "draft_s": result.draft_s,
        "verify_s": result.verify_s,
        "overhead_s": result.overhead_s,
        "tokens_per_s": result.tokens_per_s,
        "peak_memory_bytes": result.peak_memory_bytes,
        "memory_kind": "cuda_max_allocated" if spec.device.startswith("cuda") else "cpu_max_rss",
        "stop_reason": result.stop_reason,
        "output_sha1": hashlib.sha1(str(result.tokens).encode()).hexdigest(),
        "output_ids": list(result.tokens),
        "timestamp": now_utc(),
        "weights_sha256": spec.weights_sha256,
        "backend": unit.backend,
        "concurrency": unit.concurrency,
        **serving_columns(unit, result),
        "ttft_s": result.prefill_s if getattr(result, "ttft_s", None) is None else result.ttft_s,
        "itl_s": _mean_itl(result) if getattr(result, "itl_s", None) is None else result.itl_s,
        **_moe_columns(result),
        "context_bin": unit.prompt.context_bin,
        "strategy": c.strategy.name,
        "prepared": c.strategy.prepared,
        "prepared_drafts": getattr(result, "prepared_drafts", None),
        "prepared_hits": getattr(result, "prepared_hits", None),
        "draft_hidden_s": getattr(result, "draft_hidden_s", None),
        "stage": unit.stage,
        "strategy_params": c.strategy.params_json,
        "stream_position": unit.prompt.stream_position,
        "stream_segment": unit.prompt.segment,
        **_online_columns(result),
    }


def _online_columns(result) -> dict:
    """The online-adaptation columns: the drafter's version and the updates of the unit (`GenerationResult.online`);
    null / NaN / [] for other strategies."""
    online = getattr(result, "online", None)
    if online is None:
        return {
            "drafter_version": None,
            "online_train_s": float("nan"),
            "online_train_tokens": None,
            "update_round": [],
            "update_s": [],
            "update_tokens": [],
            "update_loss": [],
            "update_reject_loss": [],
        }
    updates = online["updates"]
    return {
        "drafter_version": int(online["version"]),
        "online_train_s": float(sum(u["seconds"] for u in updates)),
        "online_train_tokens": int(sum(u["tokens"] for u in updates)),
        "update_round": [int(u["at_round"]) for u in updates],
        "update_s": [float(u["seconds"]) for u in updates],
        "update_tokens": [int(u["tokens"]) for u in updates],
        "update_loss": [float(u["loss"]) for u in updates],
        "update_reject_loss": [float(u["reject_loss"]) for u in updates],
    }


def serving_columns(unit: Unit, result) -> dict:
    """The load and request-timing columns (docs/results-schema.md, "Load"): the unit's request rate, when
    its request arrived and finished within its batch, its latency; null where the backend measured one
    request at a time (the own engine)."""
    arrival, finish = getattr(result, "arrival_s", None), getattr(result, "finish_s", None)
    latency = finish - arrival if arrival is not None and finish is not None else None
    return {"request_rate": unit.request_rate, "arrival_s": arrival, "finish_s": finish, "latency_s": latency}


def _moe_columns(result) -> dict:
    """The MoE columns of a record: the target's expert counts and the verify forwards' expert traffic
    (`specbench.engine.loop.expert_traffic`); null / NaN / [] for a dense target or a backend that
    cannot see routing."""
    moe = getattr(result, "moe", None)
    if not moe:
        return {
            "moe_experts": None,
            "moe_top_k": None,
            "round_experts": [],
            "experts_per_verify": float("nan"),
            "expert_bytes_per_verify": float("nan"),
            "expert_bytes_per_token": float("nan"),
            "moe_step_bytes": None,
        }
    return {
        "moe_experts": int(moe["experts"]),
        "moe_top_k": int(moe["top_k"]),
        "round_experts": [float(x) for x in result.rounds.experts],
        "experts_per_verify": result.experts_per_verify,
        "expert_bytes_per_verify": result.expert_bytes_per_verify,
        "expert_bytes_per_token": result.expert_bytes_per_token,
        "moe_step_bytes": moe.get("step_bytes"),
    }


def _mean_itl(result) -> float:
    """Mean inter-token latency of a request measured one round at a time: decode time ÷ decode tokens."""
    return result.decode_s / result.decode_tokens if result.decode_tokens else float("nan")

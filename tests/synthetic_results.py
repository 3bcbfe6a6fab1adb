"""Synthetic results folders with known truth: acceptance, costs, γ grid, prompts.

Every record has every column of `specbench.records.store.COLUMNS`, filled the way the engine fills
them (see `specbench.engine.loop` and `specbench.engine.stats`): a round drafts
k = min(γ, tokens left − 1) tokens (a model-free drafter may find no match: k = 0), accepts j of
them with per-position probability α_i = α · decay^i, emits j + 1; its timings are
draft = fixed + step · k (model drafters; model-free: the lookup, every round), verify = t(k+1)
with t(k) = a + b·k (+ b2·max(0, k − knee)), and a per-round overhead, each times mean-one
log-normal noise. Outputs are identical across configurations of a prompt (lossless decoding).

    from tests.synthetic_results import SyntheticDrafter, SyntheticCosts, write_synthetic_results
    folder = write_synthetic_results(tmp_path / "run", [SyntheticDrafter(alpha=0.8, gammas=(2, 4))], n_prompts=12)

`make_records` returns the records as dicts (fast, no files) for statistical tests over many
seeds; `write_results` stores any list of records as a results folder via `ResultsStore`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from specbench.records.store import COLUMNS, ResultsStore

MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")


@dataclass
class SyntheticDrafter:
    """One drafter of a synthetic sweep, with its true acceptance and cost."""

    name: str = "draft-model"
    params: dict = field(default_factory=lambda: {"model": "qwen2.5-coder-0.5b"})
    alpha: float = 0.7
    decay: float = 1.0  # α_i = alpha · decay^i (1: constant α)
    gammas: tuple[int, ...] = (1, 2, 4, 6)
    draft_step_s: float = 0.002  # per drafter forward (model drafters)
    draft_fixed_s: float = 0.0  # per proposal; model-free drafters: the lookup, paid every round
    model_free: bool = False
    no_match_rate: float = 0.0  # share of rounds a model-free drafter proposes nothing
    alpha_spread: float = 0.0  # sd of per-prompt α (Beta around alpha); 0: every prompt has alpha
    tree: str = "chain"
    nodes_per_depth: int = 1  # tree nodes verified per draft depth (chain: 1)

    @property
    def label(self) -> str:
        params = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.name}({params})" if params else self.name


@dataclass
class SyntheticCosts:
    """The target's costs (seconds) and the timing noise."""

    verify_a_s: float = 0.020
    verify_b_s: float = 0.001
    knee: float | None = None
    verify_b2_s: float = 0.0
    overhead_s: float = 0.0005
    prefill_s: float = 0.05
    noise: float = 0.02  # sd of log timing noise (mean-one log-normal)

    def verify(self, tokens: int) -> float:
        extra = self.verify_b2_s * max(tokens - self.knee, 0.0) if self.knee is not None else 0.0
        return self.verify_a_s + self.verify_b_s * tokens + extra


def _noise(rng: np.random.Generator, sd: float, size=None):
    return np.exp(sd * rng.standard_normal(size) - sd * sd / 2) if sd > 0 else np.ones(size or ())


def _prompt_alpha(drafter: SyntheticDrafter, rng: np.random.Generator) -> float:
    if drafter.alpha_spread <= 0 or drafter.alpha in (0.0, 1.0):
        return drafter.alpha
    a = drafter.alpha
    concentration = max(a * (1 - a) / drafter.alpha_spread**2 - 1, 1e-3)
    return float(rng.beta(a * concentration, (1 - a) * concentration))


def _generate(
    drafter: SyntheticDrafter | None,
    gamma: int,
    alpha: float,
    max_new_tokens: int,
    costs: SyntheticCosts,
    rng: np.random.Generator,
) -> dict:
    """Rounds of one generation: per-round lists and their timings."""
    r = {k: [] for k in ("drafted", "depth", "accepted", "steps", "draft_s", "verify_s", "overhead_s")}
    tokens = 1  # the prefill's token
    while tokens < max_new_tokens:
        k = min(gamma, max_new_tokens - tokens - 1)
        if drafter is not None and drafter.model_free and rng.random() < drafter.no_match_rate:
            k = 0
        j = 0
        if k > 0:
            rates = np.minimum(alpha * drafter.decay ** np.arange(k), 1.0)
            rejected = rng.random(k) >= rates
            j = int(np.argmax(rejected)) if rejected.any() else k
        nodes = k * (drafter.nodes_per_depth if drafter is not None else 1)
        if drafter is None:
            draft = 0.0
        elif drafter.model_free:
            draft = drafter.draft_fixed_s * float(_noise(rng, costs.noise))
        else:
            draft = (drafter.draft_fixed_s + drafter.draft_step_s * k) * float(_noise(rng, costs.noise)) if k else 0.0
        r["drafted"].append(nodes)
        r["depth"].append(k)
        r["accepted"].append(j)
        r["steps"].append(0 if drafter is None or drafter.model_free else k)
        r["draft_s"].append(draft)
        r["verify_s"].append(costs.verify(nodes + 1) * float(_noise(rng, costs.noise)))
        r["overhead_s"].append(costs.overhead_s * float(_noise(rng, costs.noise)))
        tokens += j + 1
    return r


def _record(
    *,
    drafter: SyntheticDrafter | None,
    gamma: int,
    rounds: dict,
    prompt: int,
    turn: int,
    repeat: int,
    output_ids: list[int],
    target: str,
    workload: str,
    category: str,
    temperature: float,
    sweep: str,
    prefill_s: float,
    prompt_tokens: int,
    seed: int,
) -> dict:
    accepted = np.asarray(rounds["accepted"], dtype=np.int64)
    depth = np.asarray(rounds["depth"], dtype=np.int64)
    n_rounds = len(accepted)
    decode_tokens = int((accepted + 1).sum())
    draft_s, verify_s, overhead_s = (float(np.sum(rounds[k])) for k in ("draft_s", "verify_s", "overhead_s"))
    decode_s = draft_s + verify_s + overhead_s
    drafted = int(np.sum(rounds["drafted"]))
    pos = np.arange(gamma)[None, :]
    name = "none" if drafter is None else drafter.name
    params = {} if drafter is None else drafter.params
    tree = "chain" if drafter is None else drafter.tree
    config = dict(
        target=target,
        drafter=name,
        params=params,
        tree=tree,
        gamma=gamma,
        temperature=temperature,
        workload=workload,
        prompt=prompt,
        turn=turn,
        repeat=repeat,
    )
    return {
        "unit_id": hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16],
        "sweep": sweep,
        "mode": "live",
        "target": target,
        "drafter": name,
        "drafter_params": json.dumps(params, sort_keys=True),
        "drafter_label": "none" if drafter is None else drafter.label,
        "tree": tree,
        "tree_nodes": gamma * (1 if drafter is None else drafter.nodes_per_depth),
        "gamma": gamma,
        "temperature": temperature,
        "top_p": 1.0,
        "top_k": 0,
        "workload": workload,
        "prompt_id": f"q{prompt:03d}",
        "category": category,
        "turn": turn,
        "repeat": repeat,
        "seed": seed,
        "device": "cpu",
        "dtype": "fp32",
        "prompt_tokens": prompt_tokens,
        "new_tokens": decode_tokens + 1,
        "decode_tokens": decode_tokens,
        "rounds": n_rounds,
        "drafted": drafted,
        "accepted": int(accepted.sum()),
        "draft_steps": int(np.sum(rounds["steps"])),
        "alpha": float(accepted.sum() / drafted) if drafted else float("nan"),
        "tau": decode_tokens / n_rounds if n_rounds else float("nan"),
        "accept_hist": np.bincount(accepted, minlength=gamma + 1)[: gamma + 1].tolist(),
        "pos_attempts": ((depth[:, None] > pos) & (accepted[:, None] >= pos)).sum(0).tolist(),
        "pos_accepts": (accepted[:, None] > pos).sum(0).tolist(),
        "round_drafted": list(map(int, rounds["drafted"])),
        "round_depth": depth.tolist(),
        "round_accepted": accepted.tolist(),
        "round_draft_steps": list(map(int, rounds["steps"])),
        "round_draft_s": list(map(float, rounds["draft_s"])),
        "round_verify_s": list(map(float, rounds["verify_s"])),
        "prefill_s": prefill_s,
        "decode_s": decode_s,
        "draft_s": draft_s,
        "verify_s": verify_s,
        "overhead_s": overhead_s,
        "tokens_per_s": decode_tokens / decode_s if decode_s > 0 else float("nan"),
        "peak_memory_bytes": 1 << 28,
        "memory_kind": "cpu_max_rss",
        "stop_reason": "length",
        "output_sha1": hashlib.sha1(np.asarray(output_ids, dtype=np.int64).tobytes()).hexdigest(),
        "output_ids": list(output_ids),
        "timestamp": "2026-01-01T00:00:00+00:00",
    }


def make_records(
    drafters: list[SyntheticDrafter],
    *,
    costs: SyntheticCosts | None = None,
    n_prompts: int = 20,
    max_new_tokens: int = 64,
    workload: str = "mt-bench",
    categories=MT_BENCH_CATEGORIES,
    target: str = "synthetic-target",
    temperature: float = 0.0,
    turns: int = 1,
    repeats: int = 1,
    baseline: bool = True,
    seed: int = 0,
    sweep: str = "synthetic",
) -> list[dict]:
    """Records of a synthetic sweep: each drafter at each of its γ, plus the γ = 0 baseline, on
    every prompt × turn × repeat."""
    costs = costs or SyntheticCosts()
    rng = np.random.default_rng(seed)
    records = []
    for prompt in range(n_prompts):
        category = categories[prompt % len(categories)]
        prompt_tokens = int(rng.integers(20, 200))
        alphas = [_prompt_alpha(d, rng) for d in drafters]
        for turn in range(1, turns + 1):
            for repeat in range(repeats):
                output_ids = rng.integers(0, 1000, size=max_new_tokens).tolist()
                configs = ([(None, 0, 0.0)] if baseline else []) + [
                    (d, g, a) for d, a in zip(drafters, alphas) for g in d.gammas
                ]
                for drafter, gamma, alpha in configs:
                    rounds = _generate(drafter, gamma, alpha, max_new_tokens, costs, rng)
                    records.append(
                        _record(
                            drafter=drafter,
                            gamma=gamma,
                            rounds=rounds,
                            prompt=prompt,
                            turn=turn,
                            repeat=repeat,
                            output_ids=output_ids,
                            target=target,
                            workload=workload,
                            category=category,
                            temperature=temperature,
                            sweep=sweep,
                            prompt_tokens=prompt_tokens,
                            seed=seed,
                            prefill_s=costs.prefill_s * float(_noise(rng, costs.noise)),
                        )
                    )
    return records


def records_frame(records: list[dict]) -> pd.DataFrame:
    """The records as `specbench.records.store.load_records` would return them (column order, list columns)."""
    return pd.DataFrame(records, columns=list(COLUMNS))


def write_results(folder: str | Path, records: list[dict], run_info: dict | None = None) -> Path:
    """Store records as a results folder (run.json + records/), the way a sweep does."""
    folder = Path(folder)
    store = ResultsStore(folder)
    store.write_run_info(run_info or {"sweep": "synthetic", "synthetic": True, "created": "2026-01-01T00:00:00+00:00"})
    for record in records:
        store.write_unit(record)
    store.consolidate()
    return folder


def write_synthetic_results(folder: str | Path, drafters: list[SyntheticDrafter] | None = None, **kwargs) -> Path:
    """`make_records` + `write_results`: a complete synthetic results folder."""
    drafters = drafters if drafters is not None else [SyntheticDrafter()]
    records = make_records(drafters, **kwargs)
    info = {
        "sweep": kwargs.get("sweep", "synthetic"),
        "synthetic": True,
        "spec": {
            "max_new_tokens": kwargs.get("max_new_tokens", 64),
            "drafters": [{"name": d.name, "params": d.params, "gammas": list(d.gammas)} for d in drafters],
        },
    }
    return write_results(folder, records, info)


def make_context_bin_records(
    bins: dict[str, tuple[int, list[SyntheticDrafter]]],
    *,
    n_prompts: int = 8,
    workload: str = "long-context",
    seed: int = 0,
    **kwargs,
) -> list[dict]:
    """Records of a long-context sweep: per bin label, (prompt tokens, the drafters with their true α
    in that bin). The same prompts appear in every bin (ids ``<workload>/<bin>/q<n>``), as the
    long-context workload asks the same (document, task) pairs at every length."""
    records = []
    for i, (label, (tokens, drafters)) in enumerate(bins.items()):
        for record in make_records(
            drafters, n_prompts=n_prompts, workload=workload, categories=("stdlib/summarise",), seed=seed + i, **kwargs
        ):
            record.update(
                prompt_id=f"{workload}/{label}/{record['prompt_id']}",
                context_bin=label,
                prompt_tokens=tokens - int(record["prompt_tokens"]) % 50,
                unit_id=hashlib.sha1(f"{record['unit_id']}:{label}".encode()).hexdigest()[:16],
            )
            records.append(record)
    return records

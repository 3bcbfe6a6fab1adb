"""Synthetic serving-backend records with a known speedup at every load.

`serving_records` copies `tests.synthetic_results.make_records`' rounds (acceptance as the engine would
record it) to every load level and gives each request the timing a serving engine would report:
the target-only baseline decodes at ``base_rate / (1 + slowdown · (load − 1))`` tokens/s per request,
a configuration at that times ``truth(load, gamma)`` — the known speedup — each times a per-prompt
factor (shared by every configuration: prompts differ in length and difficulty) and a per-request
log-normal noise. Per-round timings are NaN (a serving engine does not report them); the batch
columns hold one batch per (configuration, load, turn) — as `specbench.measure.serving.groups` forms them —
whose wall time is Σ latency ÷ min(load, requests) (every slot kept busy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.synthetic_results import SyntheticCosts, SyntheticDrafter, make_records, records_frame

NGRAM = SyntheticDrafter(
    name="ngram", params={"n_max": 3, "n_min": 1}, alpha=0.7, gammas=(2,), model_free=True, draft_fixed_s=0.0005
)


def serving_records(
    levels,
    truth,
    *,
    drafters=(NGRAM,),
    n_prompts: int = 12,
    axis: str = "concurrency",
    base_rate: float = 30.0,
    slowdown: float = 0.1,
    noise: float = 0.1,
    prompt_spread: float = 0.2,
    max_new_tokens: int = 32,
    seed: int = 0,
    workload: str = "mt-bench",
    backend: str = "vllm",
    timing_ok: bool = True,
    turns: int = 1,
) -> pd.DataFrame:
    """Records at every load in ``levels``; ``truth(load, gamma)`` is the true per-request speedup."""
    rng = np.random.default_rng(seed)
    skeleton = make_records(
        list(drafters),
        n_prompts=n_prompts,
        max_new_tokens=max_new_tokens,
        seed=seed,
        workload=workload,
        costs=SyntheticCosts(noise=0.0),
        turns=turns,
    )
    factor = {f"q{p:03d}": float(np.exp(prompt_spread * rng.standard_normal())) for p in range(n_prompts)}
    rows = []
    for level in levels:
        rate = base_rate / (1 + slowdown * (level - 1))
        batches: dict[str, list[dict]] = {}
        for r in skeleton:
            speed = rate * factor[r["prompt_id"]] * float(np.exp(noise * rng.standard_normal()))
            if r["gamma"] > 0:
                speed *= truth(level, r["gamma"])
            decode_s = r["decode_tokens"] / speed
            ttft = 0.05 * (1 + 0.2 * (level - 1))
            new = {
                **r,
                "unit_id": f"{r['unit_id']}-{axis}{level}",
                "backend": backend,
                "concurrency": int(level) if axis == "concurrency" else 64,
                "request_rate": float(level) if axis == "request_rate" else None,
                "decode_s": decode_s,
                "tokens_per_s": r["decode_tokens"] / decode_s,
                "prefill_s": ttft,
                "draft_s": np.nan,
                "verify_s": np.nan,
                "overhead_s": np.nan,
                "round_draft_s": [np.nan] * len(r["round_drafted"]),
                "round_verify_s": [np.nan] * len(r["round_drafted"]),
                "ttft_s": ttft,
                "itl_s": decode_s / max(r["new_tokens"] - 1, 1),
                "latency_s": ttft + decode_s,
                "timing_ok": timing_ok,
            }
            batches.setdefault(f"{r['drafter_label']}-{r['gamma']}-{level}-t{r['turn']}", []).append(new)
        for batch_id, requests in batches.items():
            slots = min(level, len(requests)) if axis == "concurrency" else len(requests)
            wall = sum(q["latency_s"] for q in requests) / slots
            start = 0.0
            for q in requests:
                q.update(
                    batch_id=batch_id,
                    batch_requests=len(requests),
                    batch_wall_s=wall,
                    batch_output_tokens=sum(x["new_tokens"] for x in requests),
                    arrival_s=start,
                    finish_s=start + q["latency_s"],
                )
            rows.extend(requests)
    return records_frame(rows)


def as_dicts(frame: pd.DataFrame) -> list[dict]:
    """The records as dicts for `tests.synthetic_results.write_results` (missing values as None)."""
    return frame.astype(object).where(frame.notna(), None).to_dict("records")

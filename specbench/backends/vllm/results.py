"""vLLM's answers → specbench's `GenerationResult`: pure functions, no vLLM needed.

What the worker (`specbench.backends.vllm_worker`) returns per request:

* ``token_ids`` and ``finish_reason``;
* ``token_times_s`` / ``token_counts``: when each engine step's tokens arrived (seconds after
  the request was submitted) and how many; with speculation a step brings 1..γ+1 tokens;
* ``spec``: vLLM's per-request spec-decode metrics (``per_request_spec_decode_metrics=
  "detailed"``): ``per_step_accepted`` / ``per_step_drafted`` for every step that had a draft.

Mapping (docs/backends.md):

* every step with a draft is one round: drafted = per_step_drafted, accepted =
  per_step_accepted, emitted = accepted + 1 cut at the length limit;
* decode steps without a draft (an n-gram proposer with no match) are rounds that drafted 0
  and emitted 1; vLLM does not say where they fell, so they follow the drafted rounds;
* the target-only baseline has one round per decode token;
* per-round draft and verify times are not observable inside vLLM's step: NaN, never invented;
* TTFT = first token's arrival − the request's arrival (queueing in the engine included; under
  open-loop load also the wait for a free slot when the in-flight cap was reached; in a closed
  loop a request arrives when it is sent); decode time = last token's arrival − first token's;
  mean inter-token latency = decode time ÷ (tokens − 1); the request's ``arrival_s`` and
  ``finish_s`` (last token) are seconds after its batch began.

`check_counters` compares the per-request sums with the difference of vLLM's aggregate
``vllm:spec_decode_*`` counters over the same batch.
"""

from __future__ import annotations

import math

from specbench.engine.stats import GenerationResult, RoundLog

NAN = math.nan
DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def rounds_from_output(output: dict, speculative: bool) -> RoundLog:
    """The rounds of one request (see the module docstring for the mapping)."""
    decode_tokens = max(len(output.get("token_ids") or []) - 1, 0)
    rounds = RoundLog()
    remaining = decode_tokens
    spec = output.get("spec") or {}
    if speculative:
        accepted = list(spec.get("per_step_accepted") or [])
        drafted = list(spec.get("per_step_drafted") or [])
        if len(drafted) != len(accepted):
            drafted = [int(spec.get("num_spec_tokens") or 0)] * len(accepted)
        for d, a in zip(drafted, accepted):
            emitted = min(int(a) + 1, remaining)
            if emitted <= 0:
                break
            rounds.add(
                drafted=int(d),
                depth=int(d),
                accepted=int(a),
                emitted=emitted,
                draft_steps=0,
                draft_s=NAN,
                verify_s=NAN,
                round_s=NAN,
            )
            remaining -= emitted
    for _ in range(remaining):  # steps without a draft (or the baseline): one token each
        rounds.add(drafted=0, depth=0, accepted=0, emitted=1, draft_steps=0, draft_s=NAN, verify_s=NAN, round_s=NAN)
    return rounds


def result_from_output(
    output: dict, prompt_tokens: int, speculative: bool, *, draft_steps_per_round: int = 0
) -> GenerationResult:
    """One request's `GenerationResult`, with ``ttft_s`` and ``itl_s`` set."""
    tokens = [int(t) for t in output.get("token_ids") or []]
    rounds = rounds_from_output(output, speculative)
    if draft_steps_per_round:
        rounds.draft_steps = [draft_steps_per_round if d else 0 for d in rounds.drafted]
    times = list(output.get("token_times_s") or [])  # since the request was sent
    submit = float(output.get("submit_s") or 0.0)
    arrival = float(output["arrival_s"]) if output.get("arrival_s") is not None else submit
    waited = submit - arrival  # open loop: the in-flight cap held it back
    ttft = float(times[0]) + waited if times else NAN
    decode_s = float(times[-1] - times[0]) if len(times) > 1 else 0.0
    itl = decode_s / (len(tokens) - 1) if len(tokens) > 1 and len(times) > 1 else NAN
    result = GenerationResult(
        prompt_tokens=prompt_tokens,
        tokens=tokens,
        rounds=rounds,
        prefill_s=float(times[0]) if times else NAN,
        decode_s=decode_s if len(times) > 1 else NAN,
        stop_reason="length" if output.get("finish_reason") == "length" else "eos",
        ttft_s=ttft,
        itl_s=itl,
        arrival_s=arrival,
        finish_s=submit + float(times[-1]) if times else None,
    )
    return result


def counter_delta(before: dict, after: dict) -> dict:
    """after − before for every counter (vectors element-wise)."""
    delta: dict[str, int | list[int]] = {}
    for name, value in after.items():
        old = before.get(name)
        if isinstance(value, list):
            old = old or [0] * len(value)
            delta[name] = [int(a) - int(b) for a, b in zip(value, old)]
        else:
            delta[name] = int(value) - int(old or 0)
    return delta


def per_request_sums(outputs: list[dict]) -> dict:
    """The per-request spec-decode figures summed like vLLM's aggregate counters."""
    drafts = draft_tokens = accepted = 0
    per_pos: list[int] = []
    for output in outputs:
        spec = output.get("spec") or {}
        steps = list(spec.get("per_step_accepted") or [])
        drafts += int(spec.get("num_spec_steps", len(steps)))
        draft_tokens += int(spec.get("num_draft_tokens", 0))
        accepted += int(spec.get("num_accepted_draft_tokens", sum(steps)))
        for a in steps:
            if len(per_pos) < a:
                per_pos += [0] * (a - len(per_pos))
            for i in range(a):
                per_pos[i] += 1
    return {DRAFTS: drafts, DRAFT_TOKENS: draft_tokens, ACCEPTED: accepted, PER_POS: per_pos}


def check_counters(outputs: list[dict], before: dict, after: dict) -> list[str]:
    """Disagreements between per-request sums and the aggregate counters' change (empty: they agree).

    Counters absent from both snapshots (vLLM reports none without speculation) are not checked.
    """
    delta = counter_delta(before, after)
    sums = per_request_sums(outputs)
    problems = []
    for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
        if name in delta and delta[name] != sums[name]:
            problems.append(f"{name}: counter +{delta[name]}, per-request sum {sums[name]}")
    if PER_POS in delta:
        counted = list(delta[PER_POS])
        summed = sums[PER_POS] + [0] * max(len(counted) - len(sums[PER_POS]), 0)
        if counted != summed[: len(counted)] or any(summed[len(counted) :]):
            problems.append(f"{PER_POS}: counter +{counted}, per-request sum {sums[PER_POS]}")
    return problems
